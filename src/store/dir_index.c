/* store: the embedded store's in-memory index, its bounded event history, and bringing both up
 * to date with the files (dir_int.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "base/hash.h"
#include "base/json.h"
#include "base/log.h"
#include "store/dir_int.h"

/* ---- index -------------------------------------------------------------------------------------- */

static size_t hash(const char *k, size_t n)
{
	return (size_t)(hash_fnv1a64(k) % n);
}

struct index_entry *dir_index_find(struct dir_store *s, const char *key)
{
	if (!s->nbuckets)
		return NULL;
	for (struct index_entry *en = s->buckets[hash(key, s->nbuckets)]; en; en = en->hnext)
		if (strcmp(en->key, key) == 0)
			return en;
	return NULL;
}

/* Doubles the table when the load passes 1 (amortised O(1) per insert). */
static void grow(struct dir_store *s)
{
	size_t nb = s->nbuckets ? s->nbuckets * 2 : 1024;
	struct index_entry **b = calloc(nb, sizeof(*b));
	if (!b)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < s->nbuckets; i++)
		for (struct index_entry *en = s->buckets[i], *next; en; en = next) {
			next = en->hnext;
			size_t h = hash(en->key, nb);
			en->hnext = b[h];
			b[h] = en;
		}
	free(s->buckets);
	s->buckets = b;
	s->nbuckets = nb;
}

static struct index_entry *insert(struct dir_store *s, const char *key, const struct store_kind *k)
{
	int ki = dir_kind_index(k);
	if (s->count >= s->nbuckets)
		grow(s);
	struct index_entry *en = calloc(1, sizeof(*en));
	if (!en || ki < 0 || !s->nbuckets || !(en->key = strdup(key))) {
		free(en);
		return NULL;
	}
	en->kind = k;
	en->kidx = (unsigned)ki;
	size_t h = hash(key, s->nbuckets);
	en->hnext = s->buckets[h];
	s->buckets[h] = en;
	en->knext = s->kinds[ki];
	if (en->knext)
		en->knext->kprev = en;
	s->kinds[ki] = en;
	s->count++;
	return en;
}

int dir_index_set(struct dir_store *s, const char *key, const struct store_kind *k,
                  struct store_blob *obj, const char *corrupt, uint64_t rv,
                  const struct file_identity *id)
{
	struct index_entry *en = dir_index_find(s, key);
	char *c = NULL;
	if ((!en && !(en = insert(s, key, k))) || (corrupt && !(c = strdup(corrupt))))
		return -ENOMEM;
	store_blob_put(en->obj);
	free(en->corrupt);
	en->obj = store_blob_ref(obj);
	en->corrupt = c;
	en->rv = rv;
	if (id)
		en->id = *id;
	en->seen = true;
	if (rv > s->index_rv)
		s->index_rv = rv;
	return 0;
}

void dir_index_drop(struct dir_store *s, struct index_entry *en)
{
	struct index_entry **pp = &s->buckets[hash(en->key, s->nbuckets)];
	while (*pp && *pp != en)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = en->hnext;
	if (en->kprev)
		en->kprev->knext = en->knext;
	else
		s->kinds[en->kidx] = en->knext;
	if (en->knext)
		en->knext->kprev = en->kprev;
	s->count--;
	store_blob_put(en->obj);
	free(en->corrupt);
	free(en->key);
	free(en);
}

void dir_index_free(struct dir_store *s)
{
	for (size_t i = 0; i < s->nbuckets; i++)
		while (s->buckets[i])
			dir_index_drop(s, s->buckets[i]);
	free(s->buckets);
	s->buckets = NULL;
	s->nbuckets = 0;
}

/* ---- event history ----------------------------------------------------------------------------- */

static void ring_drop_oldest(struct dir_store *s)
{
	struct event *ev = &s->ring[s->first_seq % RING_CAP];
	int ki = ev->kind ? dir_kind_index(ev->kind) : -1;
	s->floor_rv = ev->rv;
	if (ki >= 0)
		s->kind_lost[ki] = ev->seq + 1;
	s->ring_bytes -= ev->obj ? ev->obj->len : 0;
	store_blob_put(ev->obj);
	ev->obj = NULL;
	s->first_seq++;
}

void dir_ring_push(struct dir_store *s, enum store_event_type t, const struct store_kind *k,
                   uint64_t rv, struct store_blob *obj)
{
	size_t len = obj ? obj->len : 0;
	while (s->next_seq > s->first_seq &&
	       (s->next_seq - s->first_seq == RING_CAP || s->ring_bytes + len > RING_BYTES))
		ring_drop_oldest(s);
	struct event *ev = &s->ring[s->next_seq % RING_CAP];
	ev->seq = s->next_seq++;
	ev->rv = rv;
	ev->kind = k;
	ev->type = t;
	ev->obj = store_blob_ref(obj);
	s->ring_bytes += len;
	if (rv > s->index_rv)
		s->index_rv = rv;
	int ki = dir_kind_index(k); /* only that kind's watches wake */
	if (ki >= 0)
		pthread_cond_broadcast(&s->kind_cv[ki]);
}

void dir_ring_free(struct dir_store *s)
{
	while (s->first_seq < s->next_seq)
		ring_drop_oldest(s);
}

/* ---- refresh from files -------------------------------------------------------------------------- */

int dir_fident(const char *path, struct file_identity *id)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	id->ino = st.st_ino;
	id->size = st.st_size;
	id->mtime = st.st_mtim;
	return 0;
}

static bool same_ident(const struct file_identity *a, const struct file_identity *b)
{
	return a->ino == b->ino && a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec;
}

struct change {
	uint64_t rv;
	enum store_event_type type; /* 0: the file is corrupt (no event) */
	char *key;
	const struct store_kind *kind;
	struct file_identity id;
	struct store_blob *obj;
	char *corrupt;
};

struct changes {
	struct change *v;
	size_t n, cap;
};

static struct change *add_change(struct changes *c)
{
	if (c->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 16;
		struct change *p = realloc(c->v, nc * sizeof(*p));
		if (!p)
			return NULL;
		c->v = p;
		c->cap = nc;
	}
	memset(&c->v[c->n], 0, sizeof(c->v[0]));
	return &c->v[c->n++];
}

/* The object in the file name of directory dirfd (path: the same file, for messages) as a blob
 * of its text and its version, or the corruption message; *id the identity of what was read.
 * One open, fstat, read and close per file; the text parsed once and kept as read, made compact. */
static int load(int dirfd, const char *name, const char *path, struct store_blob **obj,
                uint64_t *rv, char **corrupt, struct file_identity *id)
{
	struct err e = {0};
	struct stat st;
	char *buf;
	size_t len;
	cJSON *o = NULL;
	*obj = NULL;
	*corrupt = NULL;
	int r = file_read_at(dirfd, name, path, JSON_FILE_MAX, &buf, &len, &st, &e);
	if (r < 0)
		return r;
	*id = (struct file_identity){st.st_ino, st.st_size, st.st_mtim};
	if ((r = json_parse_strict(buf, len, &o, &e)) < 0 || !cJSON_IsObject(o)) {
		if (r == 0)
			err_set(&e, -EBADMSG, "not a JSON object");
		err_prefix(&e, "%s is corrupt", path);
		*corrupt = strdup(e.msg);
	} else {
		*rv = store_meta_rv(o);
		*obj = store_blob_of_text(buf, len, o); /* what the index keeps: compact */
	}
	cJSON_Delete(o);
	free(buf);
	return *obj || *corrupt ? 0 : -ENOMEM;
}

/* Compares one file with its entry; a difference becomes a change. */
bool dir_index_unchanged(struct dir_store *s, const char *key)
{
	char path[PATH_MAX + 64];
	struct file_identity id;
	const struct index_entry *en = dir_index_find(s, key);
	snprintf(path, sizeof(path), "%s/%s.json", s->path, key);
	return en && dir_fident(path, &id) == 0 && same_ident(&en->id, &id);
}

/* Compares the file of key (name in directory dirfd, or AT_FDCWD and NULL: its path) with its
 * entry; a difference becomes a change.  A key without an entry is read at once: its identity
 * comes from the read, not from a stat before it. */
static void probe(struct dir_store *s, const struct store_kind *k, const char *key, int dirfd,
                  const char *name, struct changes *c)
{
	char path[PATH_MAX + 64];
	struct file_identity id;
	struct index_entry *en = dir_index_find(s, key);
	snprintf(path, sizeof(path), "%s/%s.json", s->path, key);
	if (en)
		en->seen = true;
	if (s->flight && dir_in_flight(s, key))
		return; /* its write publishes it (dir_commit.c) */
	int r = en ? dir_fident(path, &id) : 0;
	if (r < 0) {
		struct change *ch;
		if (r == -ENOENT && (ch = add_change(c))) {
			ch->type = STORE_DELETED;
			ch->key = strdup(key);
			ch->kind = k;
		}
		return;
	}
	if (en && same_ident(&en->id, &id))
		return; /* unchanged (our own writes come back this way) */
	struct store_blob *obj;
	char *corrupt;
	uint64_t rv = 0;
	if (load(name ? dirfd : AT_FDCWD, name ? name : path, path, &obj, &rv, &corrupt, &id) < 0)
		return; /* gone meanwhile (its notification follows), or not a regular file */
	if (en && obj && en->obj && en->rv == rv && en->obj->len == obj->len &&
	    memcmp(en->obj->text, obj->text, obj->len) == 0) {
		en->id = id; /* touched, not changed */
		store_blob_put(obj);
		return;
	}
	struct change *ch = add_change(c);
	if (!ch) {
		store_blob_put(obj);
		free(corrupt);
		return;
	}
	*ch = (struct change){
	    rv, obj ? (en ? STORE_MODIFIED : STORE_ADDED) : 0, strdup(key), k, id, obj, corrupt};
}

static void scan_dir(struct dir_store *s, const struct store_kind *k, const char *prefix,
                     struct changes *c)
{
	char dir[PATH_MAX], key[PATH_MAX];
	struct dirent *de;
	snprintf(dir, sizeof(dir), "%s/%s", s->path, prefix);
	DIR *d = opendir(dir);
	if (!d) {
		if (errno != ENOENT && errno != ENOTDIR)
			log_warnf("store: %s left out of the index: open: %s", dir, strerror(errno));
		return;
	}
	bool ns_level = k->namespaced && !strchr(prefix, '/');
	while ((de = readdir(d)) != NULL) {
		size_t len;
		if (de->d_name[0] == '.')
			continue;
		if (ns_level) {
			snprintf(key, sizeof(key), "%s/%s", prefix, de->d_name);
			scan_dir(s, k, key, c);
			continue;
		}
		if (!(len = dir_object_name_len(de->d_name)))
			continue;
		snprintf(key, sizeof(key), "%s/%.*s", prefix, (int)len, de->d_name);
		probe(s, k, key, dirfd(d), de->d_name, c);
	}
	closedir(d);
}

static int cmp_change(const void *a, const void *b)
{
	const struct change *x = a, *y = b;
	return x->rv < y->rv ? -1 : x->rv > y->rv;
}

static const struct store_kind *kind_of_key(const char *key)
{
	const char *slash = strchr(key, '/');
	for (const struct store_kind *const *k = store_kinds(); slash && *k; k++)
		if (strlen((*k)->plural) == (size_t)(slash - key) &&
		    strncmp((*k)->plural, key, (size_t)(slash - key)) == 0)
			return *k;
	return NULL;
}

static void apply(struct dir_store *s, struct changes *c, bool emit)
{
	uint64_t now_rv = s->index_rv;
	bool read_rv = false; /* only a deletion needs it: reading it is eight system calls */
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].type == STORE_DELETED) {
			if (!read_rv)
				dir_rv_last(s, &now_rv, NULL);
			read_rv = true;
			c->v[i].rv = now_rv; /* its version is gone with the file: "now" */
		}
	if (c->n > 1)
		qsort(c->v, c->n, sizeof(*c->v), cmp_change);
	for (size_t i = 0; i < c->n; i++) {
		struct change *ch = &c->v[i];
		struct index_entry *en = ch->key ? dir_index_find(s, ch->key) : NULL;
		if (ch->type == STORE_DELETED && en) {
			if (en->obj && emit)
				dir_ring_push(s, STORE_DELETED, ch->kind, ch->rv, en->obj);
			dir_index_drop(s, en);
		} else if (ch->type != STORE_DELETED && ch->key) {
			if (ch->obj && emit)
				dir_ring_push(s, ch->type, ch->kind, ch->rv, ch->obj);
			dir_index_set(s, ch->key, ch->kind, ch->obj, ch->corrupt, ch->rv, &ch->id);
		}
		store_blob_put(ch->obj);
		free(ch->corrupt);
		free(ch->key);
	}
	free(c->v);
}

void dir_index_refresh(struct dir_store *s, const struct store_kind *const *kinds,
                       char *const *keys, size_t n, bool emit)
{
	struct changes c = {0};
	if (!keys) { /* everything: also what vanished */
		for (size_t i = 0; i < s->nbuckets; i++)
			for (struct index_entry *en = s->buckets[i]; en; en = en->hnext)
				en->seen = false;
		for (const struct store_kind *const *k = kinds; *k; k++)
			scan_dir(s, *k, (*k)->plural, &c);
		for (size_t i = 0; i < s->nbuckets; i++)
			for (struct index_entry *en = s->buckets[i]; en; en = en->hnext) {
				struct change *ch;
				if (!en->seen && !(s->flight && dir_in_flight(s, en->key)) &&
				    (ch = add_change(&c))) {
					ch->type = STORE_DELETED;
					ch->key = strdup(en->key);
					ch->kind = en->kind;
				}
			}
	} else {
		for (size_t i = 0; i < n; i++) {
			const struct store_kind *k = kind_of_key(keys[i]);
			if (k)
				probe(s, k, keys[i], AT_FDCWD, NULL, &c);
		}
	}
	apply(s, &c, emit);
}
