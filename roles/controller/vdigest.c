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

#define FNV64_OFFSET 14695981039346656037ull
#define FNV64_PRIME  1099511628211ull

/* FNV-1a over the bytes of s ("-" for NULL), then a separator no text holds. */
static uint64_t mix_str(uint64_t h, const char *s)
{
	for (s = s ? s : "-"; *s; s++)
		h = (h ^ (unsigned char)*s) * FNV64_PRIME;
	return (h ^ 0xffu) * FNV64_PRIME;
}

/* FNV-1a over the 8 bytes of v, then a separator. */
static uint64_t mix_int(uint64_t h, int64_t v)
{
	uint64_t u = (uint64_t)v;
	for (int i = 0; i < 8; i++, u >>= 8)
		h = (h ^ (u & 0xffu)) * FNV64_PRIME;
	return (h ^ 0xfeu) * FNV64_PRIME;
}

/* The hash of the exportSpec and publishedNodes, field by field (no text is built: the loop's
 * first list hashes every volume). */
static uint64_t digest_of(const struct model_pvst *v)
{
	const struct model_pvst_export_spec *es = &v->status.export_spec;
	uint64_t h = FNV64_OFFSET;
	h = mix_int(h, v->status.has_export_spec);
	h = mix_str(h, es->bind_address);
	h = mix_int(h, es->has_port);
	h = mix_int(h, es->port);
	h = mix_int(h, es->has_acl_enabled);
	h = mix_int(h, es->acl_enabled);
	h = mix_int(h, es->has_in_capsule_data_size);
	h = mix_int(h, es->in_capsule_data_size);
	h = mix_int(h, v->status.has_published);
	h = mix_int(h, (int64_t)v->status.n_published);
	for (size_t i = 0; i < v->status.n_published; i++) {
		const struct model_pvst_published *p = &v->status.published[i];
		h = mix_str(h, p->node_id);
		h = mix_str(h, p->initiator_id);
		h = mix_str(h, p->access_mode);
		h = mix_int(h, p->has_readonly);
		h = mix_int(h, p->readonly);
		h = mix_int(h, p->has_revoking);
		h = mix_int(h, p->revoking);
	}
	return h;
}

uint64_t vdigest_of(const struct model_pvst *v)
{
	return digest_of(v);
}

void vdigest_text(uint64_t digest, char text[VDIGEST_TEXT])
{
	snprintf(text, VDIGEST_TEXT, "%016" PRIx64, digest);
}

bool vdigest_unconfirmed(const struct model_pvst *v)
{
	char now[VDIGEST_TEXT];
	if (!v->status.reconciled_digest)
		return false;
	vdigest_text(digest_of(v), now);
	return strcmp(v->status.reconciled_digest, now) != 0;
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
	uint64_t d = digest_of(v);
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
