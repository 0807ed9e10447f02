/* carry — entries carried from one pass over a list to the next (carry.h). */
#include "controller/carry.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int by_name(const void *a, const void *b)
{
	const char *x = ((const struct carry_head *)a)->name,
	           *y = ((const struct carry_head *)b)->name;
	return strcmp(x ? x : "", y ? y : "");
}

void *carry_slot(struct carry_pass *p)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 64;
		if (cap > SIZE_MAX / p->size)
			return NULL;
		void *v = realloc(p->v, cap * p->size);
		if (!v)
			return NULL;
		p->v = v;
		p->cap = cap;
	}
	void *slot = (char *)p->v + p->n * p->size;
	memset(slot, 0, p->size);
	return slot;
}

bool carry_move(struct carry_pass *p, const char *name, uint64_t rv)
{
	struct carry_head key = {.name = (char *)name}, *t;
	if (rv == 0 || !name || p->err || !p->n_old ||
	    !(t = bsearch(&key, p->old, p->n_old, p->size, by_name)) || t->moved || t->rv != rv)
		return false;
	void *slot = carry_slot(p);
	if (!slot) {
		p->err = -ENOMEM;
		return false;
	}
	memcpy(slot, t, p->size);
	p->n++;
	t->moved = true;
	return true;
}

void carry_sort(struct carry_pass *p)
{
	if (p->n)
		qsort(p->v, p->n, p->size, by_name);
}

void carry_entries_free(void *v, size_t n, size_t size, void (*clear)(void *entry))
{
	for (size_t i = 0; i < n; i++) {
		struct carry_head *h = (struct carry_head *)((char *)v + i * size);
		if (h->moved)
			continue;
		clear(h);
		free(h->name);
	}
	free(v);
}
