#include "controller/vdigest.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"

struct vdigest {
	struct vdigest *next;
	uint64_t digest;
	bool seen;
	char name[];
};

/* The hash of the exportSpec and publishedNodes as text; false when out of memory. */
static bool digest_of(const struct model_pvst *v, uint64_t *out)
{
	const struct model_pvst_export_spec *es = &v->status.export_spec;
	size_t cap = 256 + v->status.n_published * 600, o = 0;
	char *d = malloc(cap);
	if (!d)
		return false;
	o += (size_t)snprintf(d, cap, "%d|%s|%d:%lld|%d:%d|%d:%lld", v->status.has_export_spec,
	                      es->bind_address ?: "-", es->has_port, (long long)es->port,
	                      es->has_acl_enabled, es->acl_enabled, es->has_in_capsule_data_size,
	                      (long long)es->in_capsule_data_size);
	o += (size_t)snprintf(d + o, cap - o, "|%d", v->status.has_published);
	for (size_t i = 0; i < v->status.n_published && o < cap; i++) {
		const struct model_pvst_published *p = &v->status.published[i];
		o += (size_t)snprintf(d + o, cap - o, "|%s,%s,%s,%d:%d,%d:%d", p->node_id ?: "-",
		                      p->initiator_id ?: "-", p->access_mode ?: "-",
		                      p->has_readonly, p->readonly, p->has_revoking, p->revoking);
	}
	*out = hash_fnv1a64(d);
	free(d);
	return true;
}

static struct vdigest **slot(const struct vdigests *t, const char *name)
{
	return &t->b[hash_fnv1a32(name) % t->nb];
}

/* Doubles the buckets when the load passes 1; out of memory: stays (longer chains). */
static void grow(struct vdigests *t)
{
	size_t nb = t->nb ? t->nb * 2 : 256;
	struct vdigest **b = calloc(nb, sizeof(*b)), **old = t->b;
	size_t onb = t->nb;
	if (!b)
		return;
	t->b = b;
	t->nb = nb;
	for (size_t i = 0; i < onb; i++)
		while (old[i]) {
			struct vdigest *v = old[i], **s = slot(t, v->name);
			old[i] = v->next;
			v->next = *s;
			*s = v;
		}
	free(old);
}

bool vdigests_update(struct vdigests *t, const char *name, const struct model_pvst *v)
{
	uint64_t d;
	if (!digest_of(v, &d))
		return true;
	if (t->n >= t->nb)
		grow(t);
	if (!t->nb)
		return true;
	struct vdigest **s = slot(t, name), *x = *s;
	while (x && strcmp(x->name, name))
		x = x->next;
	if (!x) {
		if (!(x = calloc(1, sizeof(*x) + strlen(name) + 1)))
			return true;
		strcpy(x->name, name);
		x->digest = d;
		x->seen = true;
		x->next = *s;
		*s = x;
		t->n++;
		return true;
	}
	x->seen = true;
	bool changed = x->digest != d;
	x->digest = d;
	return changed;
}

/* Unlinks every entry for which drop(entry, arg) holds. */
static void drop_where(struct vdigests *t, bool (*drop)(const struct vdigest *, const void *),
                       const void *arg)
{
	for (size_t i = 0; i < t->nb; i++)
		for (struct vdigest **p = &t->b[i]; *p;) {
			struct vdigest *x = *p;
			if (!drop(x, arg)) {
				p = &x->next;
				continue;
			}
			*p = x->next;
			free(x);
			t->n--;
		}
}

void vdigests_drop(struct vdigests *t, const char *name)
{
	if (!t->nb)
		return;
	for (struct vdigest **p = slot(t, name); *p; p = &(*p)->next)
		if (!strcmp((*p)->name, name)) {
			struct vdigest *x = *p;
			*p = x->next;
			free(x);
			t->n--;
			return;
		}
}

void vdigests_unsee(struct vdigests *t)
{
	for (size_t i = 0; i < t->nb; i++)
		for (struct vdigest *x = t->b[i]; x; x = x->next)
			x->seen = false;
}

static bool unseen(const struct vdigest *x, const void *arg)
{
	(void)arg;
	return !x->seen;
}

static bool any(const struct vdigest *x, const void *arg)
{
	(void)x;
	(void)arg;
	return true;
}

void vdigests_drop_unseen(struct vdigests *t)
{
	drop_where(t, unseen, NULL);
}

void vdigests_free(struct vdigests *t)
{
	if (!t)
		return;
	drop_where(t, any, NULL);
	free(t->b);
	t->b = NULL;
	t->nb = t->n = 0;
}
