/* Host references: which subsystems link each host, remembered as a hint (fs.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "nvmet/fs.h"

#define HBUCKETS 256

struct host_ref {
	struct host_ref *next;
	char *host;
	char **nqns; /* subsystems seen linking host, newest last; some may be gone */
	size_t n, cap;
	size_t swept; /* n after the last sweep: the next sweep comes at twice as many */
};

struct nvmet_hostrefs {
	struct host_ref *b[HBUCKETS];
};

static unsigned bucket(const char *host)
{
	return hash_fnv1a32(host) % HBUCKETS;
}

static struct host_ref *find(struct nvmet_hostrefs *h, const char *host, bool create)
{
	struct host_ref **head = &h->b[bucket(host)];
	for (struct host_ref *r = *head; r; r = r->next)
		if (strcmp(r->host, host) == 0)
			return r;
	if (!create)
		return NULL;
	struct host_ref *r = calloc(1, sizeof(*r));
	if (!r || !(r->host = strdup(host))) {
		free(r);
		return NULL;
	}
	r->next = *head;
	*head = r;
	return r;
}

static void drop_nqns(struct host_ref *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->nqns[i]);
	r->n = 0;
}

struct nvmet_hostrefs *nvmet_hostrefs_new(void)
{
	return calloc(1, sizeof(struct nvmet_hostrefs));
}

void nvmet_hostrefs_free(struct nvmet_hostrefs *h)
{
	if (!h)
		return;
	for (unsigned i = 0; i < HBUCKETS; i++)
		for (struct host_ref *r = h->b[i], *next; r; r = next) {
			next = r->next;
			drop_nqns(r);
			free(r->nqns);
			free(r->host);
			free(r);
		}
	free(h);
}

static bool push(struct host_ref *r, const char *nqn)
{
	if (r->n == r->cap) {
		size_t nc = r->cap ? r->cap * 2 : 4;
		char **v = realloc(r->nqns, nc * sizeof(*v));
		if (!v)
			return false;
		r->nqns = v;
		r->cap = nc;
	}
	if (!(r->nqns[r->n] = strdup(nqn)))
		return false;
	r->n++;
	return true;
}

static bool link_exists(nvmet *nv, const char *nqn, const char *host)
{
	char rel[NVMET_PATH_MAX];
	return nvmet_fs_rel(rel, "subsystems/%s/allowed_hosts/%s", nqn, host) == 0 &&
	       nvmet_fs_exists(nv, rel);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Drops duplicates and links that are gone; amortised over the adds that doubled the list. */
static void sweep(nvmet *nv, struct host_ref *r)
{
	size_t k = 0;
	qsort(r->nqns, r->n, sizeof(*r->nqns), cmp_str);
	for (size_t i = 0; i < r->n; i++) {
		if ((k > 0 && strcmp(r->nqns[k - 1], r->nqns[i]) == 0) ||
		    !link_exists(nv, r->nqns[i], r->host))
			free(r->nqns[i]);
		else
			r->nqns[k++] = r->nqns[i];
	}
	r->n = k;
	r->swept = k;
}

void nvmet_hostref_add(nvmet *nv, const char *host, const char *nqn)
{
	struct nvmet_hostrefs *h = nvmet_fs_hostrefs(nv);
	struct host_ref *r = h ? find(h, host, true) : NULL;
	if (!r || !push(r, nqn))
		return;
	if (r->n > 2 * r->swept + 16)
		sweep(nv, r);
}

/* Every subsystem's allowed_hosts/<host>: the full scan of nvmet.md §7 step 5. */
static int scan(nvmet *nv, struct host_ref *r, const char *host, struct err *e)
{
	char **subs;
	size_t n, found = 0;
	int rc = nvmet_fs_list(nv, "subsystems", &subs, &n, e);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		if (!link_exists(nv, subs[i], host))
			continue;
		found++;
		if (r)
			push(r, subs[i]);
	}
	nvmet_fs_names_free(subs, n);
	if (r)
		r->swept = r->n;
	return found > 0;
}

int nvmet_hostref_used(nvmet *nv, const char *host, struct err *e)
{
	struct nvmet_hostrefs *h = nvmet_fs_hostrefs(nv);
	struct host_ref *r = h ? find(h, host, true) : NULL;
	while (r && r->n > 0) {
		if (link_exists(nv, r->nqns[r->n - 1], host))
			return 1;
		free(r->nqns[--r->n]); /* gone: each remembered link is dropped once */
	}
	return scan(nv, r, host, e);
}
