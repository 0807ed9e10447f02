/* store: the embedded implementation — one durable JSON file per object in a directory.
 *
 * Layout: PATH/<plural>/<name>.json (PATH/<plural>/<namespace>/<name>.json for namespaced
 * kinds), PATH/resourceversion (the last issued version, persisted before use), PATH/.lock (the
 * owning controller's flock), PATH/.oplock (every writer's flock, per operation).
 *
 * Watches: once a watch may be needed (at owner open or the first watch) the store keeps a
 * cache of every object (inode + resourceVersion + content).  Before each local write, and every
 * poll interval, the directory is compared with the cache under the operation lock; differences
 * made by other processes become events in resourceVersion order, then the local write appends
 * its own.  Events live in a bounded ring; a watcher that falls behind it gets STORE_EXPIRED.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/file.h"
#include "base/json.h"
#include "base/time.h"
#include "store/store.h"

#define RING_CAP 4096
#define NBUCKETS 1024

struct centry {
	struct centry *next;
	char *key; /* plural/name or plural/ns/name */
	const struct store_kind *kind;
	ino_t ino;
	uint64_t rv;
	cJSON *obj;
	bool seen; /* mark during a scan */
};

struct event {
	uint64_t seq;
	uint64_t rv;
	const struct store_kind *kind;
	enum store_event_type type;
	cJSON *obj;
};

struct dstore {
	store base;
	char *path;
	int owner_fd;
	int poll_ms;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool cache_ready;
	uint64_t floor_rv; /* events with rv > floor_rv are all in the ring */
	struct centry *buckets[NBUCKETS];
	struct event ring[RING_CAP];
	uint64_t first_seq, next_seq; /* ring holds [first_seq, next_seq) */
	pthread_t poller;
	bool poller_running, stopping;
	int watchers;
};

struct store_watch {
	struct dstore *s;
	const struct store_kind *kind;
	uint64_t next_seq;
	cJSON *initial; /* array of objects delivered first as ADDED */
	int initial_idx;
	bool closed;
};

#define DS(s) ((struct dstore *)(s))

/* ---- paths -------------------------------------------------------------------------------------- */

static int obj_key(const struct store_kind *k, const char *ns, const char *name, char *key,
                   size_t cap, struct err *e)
{
	int r = store_validate_name(k->kind, name, e);
	if (r < 0)
		return r;
	if (k->namespaced) {
		if (!ns || !*ns)
			return err_set(e, STORE_INVALID, "%s \"%s\": namespace is required",
			               k->kind, name);
		if ((r = store_validate_name("namespace", ns, e)) < 0)
			return r;
		r = snprintf(key, cap, "%s/%s/%s", k->plural, ns, name);
	} else {
		r = snprintf(key, cap, "%s/%s", k->plural, name);
	}
	return r < 0 || (size_t)r >= cap ? err_set(e, STORE_INVALID, "name too long") : 0;
}

static void obj_path(struct dstore *s, const char *key, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s.json", s->path, key);
}

static int obj_dir(struct dstore *s, const struct store_kind *k, const char *ns, char *out,
                   size_t cap)
{
	int n = ns ? snprintf(out, cap, "%s/%s/%s", s->path, k->plural, ns)
	           : snprintf(out, cap, "%s/%s", s->path, k->plural);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* ---- resourceVersion counter -------------------------------------------------------------------- */

static int rv_read(struct dstore *s, uint64_t *rv, struct err *e)
{
	char p[PATH_MAX], *buf, *end;
	int r;
	snprintf(p, sizeof(p), "%s/resourceversion", s->path);
	r = file_read_all(p, 64, &buf, NULL, e);
	if (r == -ENOENT) {
		*rv = 0;
		return 0;
	}
	if (r < 0)
		return r;
	errno = 0;
	unsigned long long v = strtoull(buf, &end, 10);
	if (end == buf || errno || (*end && strcmp(end, "\n") != 0)) {
		free(buf);
		return err_set(e, -EBADMSG, "%s is corrupt: not a decimal counter", p);
	}
	free(buf);
	*rv = v;
	return 0;
}

static int rv_next(struct dstore *s, uint64_t *rv, struct err *e)
{
	char p[PATH_MAX], text[32];
	uint64_t cur;
	int r = rv_read(s, &cur, e);
	if (r < 0)
		return r;
	*rv = cur + 1;
	snprintf(p, sizeof(p), "%s/resourceversion", s->path);
	snprintf(text, sizeof(text), "%" PRIu64 "\n", *rv);
	return file_write_atomic(p, text, strlen(text), 0644, e);
}

/* ---- locks ------------------------------------------------------------------------------------- */

static int oplock(struct dstore *s, int how, struct err *e)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/.oplock", s->path);
	int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return err_set(e, -errno, "open %s: %s", p, strerror(errno));
	while (flock(fd, how) < 0) {
		if (errno != EINTR) {
			int r = -errno;
			close(fd);
			return err_set(e, r, "lock %s: %s", p, strerror(-r));
		}
	}
	return fd;
}

static void opunlock(int fd)
{
	if (fd >= 0) {
		flock(fd, LOCK_UN);
		close(fd);
	}
}

/* ---- cache and events ---------------------------------------------------------------------------- */

static unsigned hash(const char *k)
{
	unsigned h = 2166136261u;
	for (; *k; k++)
		h = (h ^ (unsigned char)*k) * 16777619u;
	return h % NBUCKETS;
}

static struct centry *cache_find(struct dstore *s, const char *key)
{
	for (struct centry *c = s->buckets[hash(key)]; c; c = c->next)
		if (strcmp(c->key, key) == 0)
			return c;
	return NULL;
}

static void cache_drop(struct dstore *s, struct centry *victim)
{
	struct centry **pp = &s->buckets[hash(victim->key)];
	while (*pp && *pp != victim)
		pp = &(*pp)->next;
	if (*pp)
		*pp = victim->next;
	free(victim->key);
	cJSON_Delete(victim->obj);
	free(victim);
}

static void cache_put(struct dstore *s, const char *key, const struct store_kind *k, ino_t ino,
                      uint64_t rv, const cJSON *obj)
{
	struct centry *c = cache_find(s, key);
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c)
			return;
		c->key = strdup(key);
		if (!c->key) {
			free(c);
			return;
		}
		c->next = s->buckets[hash(key)];
		s->buckets[hash(key)] = c;
	}
	c->kind = k;
	c->ino = ino;
	c->rv = rv;
	cJSON_Delete(c->obj);
	c->obj = cJSON_Duplicate(obj, true);
	c->seen = true;
}

static void ring_push(struct dstore *s, enum store_event_type t, const struct store_kind *k,
                      uint64_t rv, const cJSON *obj)
{
	struct event *ev;
	if (s->next_seq - s->first_seq == RING_CAP) {
		ev = &s->ring[s->first_seq % RING_CAP];
		s->floor_rv = ev->rv;
		cJSON_Delete(ev->obj);
		ev->obj = NULL;
		s->first_seq++;
	}
	ev = &s->ring[s->next_seq % RING_CAP];
	ev->seq = s->next_seq++;
	ev->rv = rv;
	ev->kind = k;
	ev->type = t;
	ev->obj = cJSON_Duplicate(obj, true);
	pthread_cond_broadcast(&s->cv);
}

struct change {
	uint64_t rv;
	enum store_event_type type;
	struct centry *entry; /* for DELETED: the entry to drop after the event */
	char *key;
	const struct store_kind *kind;
	ino_t ino;
	cJSON *obj;
};

static int cmp_change(const void *a, const void *b)
{
	const struct change *x = a, *y = b;
	return x->rv < y->rv ? -1 : x->rv > y->rv;
}

static int scan_dir(struct dstore *s, const struct store_kind *k, const char *dir,
                    const char *keyprefix, struct change **chg, size_t *n, size_t *cap, bool emit)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d)) != NULL) {
		char path[PATH_MAX], key[PATH_MAX];
		struct stat st;
		size_t len = strlen(de->d_name);
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (k->namespaced && !keyprefix[strlen(k->plural)]) { /* a namespace directory */
			char sub[PATH_MAX];
			snprintf(sub, sizeof(sub), "%s/%s", keyprefix, de->d_name);
			if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
				scan_dir(s, k, path, sub, chg, n, cap, emit);
			continue;
		}
		if (len < 6 || strcmp(de->d_name + len - 5, ".json") != 0)
			continue;
		if (stat(path, &st) < 0)
			continue;
		snprintf(key, sizeof(key), "%s/%.*s", keyprefix, (int)(len - 5), de->d_name);
		struct centry *c = cache_find(s, key);
		if (c && c->ino == st.st_ino) {
			c->seen = true;
			continue;
		}
		cJSON *obj = NULL;
		if (json_read_file(path, &obj, NULL) < 0)
			continue; /* corrupt files are reported by get/list, not by watches */
		if (!emit) {
			cache_put(s, key, k, st.st_ino, store_meta_rv(obj), obj);
			cJSON_Delete(obj);
			continue;
		}
		if (*n == *cap) {
			size_t nc = *cap ? *cap * 2 : 16;
			struct change *p = realloc(*chg, nc * sizeof(**chg));
			if (!p) {
				cJSON_Delete(obj);
				break;
			}
			*chg = p;
			*cap = nc;
		}
		(*chg)[(*n)++] = (struct change){store_meta_rv(obj),
		                                 c ? STORE_MODIFIED : STORE_ADDED,
		                                 NULL,
		                                 strdup(key),
		                                 k,
		                                 st.st_ino,
		                                 obj};
		if (c)
			c->seen = true;
	}
	closedir(d);
	return 0;
}

/* Brings the cache up to date with the directory; with emit, differences become events. */
static void sync_locked(struct dstore *s, bool emit)
{
	struct change *chg = NULL;
	size_t n = 0, cap = 0;
	uint64_t now_rv = 0;

	for (unsigned b = 0; b < NBUCKETS; b++)
		for (struct centry *c = s->buckets[b]; c; c = c->next)
			c->seen = false;
	for (const struct store_kind *const *k = store_kinds(); *k; k++) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof(dir), "%s/%s", s->path, (*k)->plural);
		scan_dir(s, *k, dir, (*k)->plural, &chg, &n, &cap, emit);
	}
	rv_read(s, &now_rv, NULL);
	for (unsigned b = 0; b < NBUCKETS; b++) {
		for (struct centry *c = s->buckets[b], *next; c; c = next) {
			next = c->next;
			if (c->seen)
				continue;
			if (!emit || n == cap) {
				if (n == cap && emit) {
					size_t nc = cap ? cap * 2 : 16;
					struct change *p = realloc(chg, nc * sizeof(*chg));
					if (p) {
						chg = p;
						cap = nc;
					}
				}
				if (!emit || n == cap) {
					cache_drop(s, c);
					continue;
				}
			}
			chg[n++] =
			    (struct change){now_rv, STORE_DELETED, c, NULL, c->kind, 0, NULL};
		}
	}
	if (n > 1)
		qsort(chg, n, sizeof(*chg), cmp_change);
	for (size_t i = 0; i < n; i++) {
		if (chg[i].type == STORE_DELETED) {
			ring_push(s, STORE_DELETED, chg[i].kind, chg[i].rv, chg[i].entry->obj);
			cache_drop(s, chg[i].entry);
		} else {
			ring_push(s, chg[i].type, chg[i].kind, chg[i].rv, chg[i].obj);
			if (chg[i].key)
				cache_put(s, chg[i].key, chg[i].kind, chg[i].ino, chg[i].rv,
				          chg[i].obj);
			free(chg[i].key);
			cJSON_Delete(chg[i].obj);
		}
	}
	free(chg);
}

static void cache_init_locked(struct dstore *s)
{
	if (s->cache_ready)
		return;
	int fd = oplock(s, LOCK_SH, NULL);
	sync_locked(s, false);
	rv_read(s, &s->floor_rv, NULL);
	opunlock(fd);
	s->cache_ready = true;
}

static void *poller_main(void *arg)
{
	struct dstore *s = arg;
	pthread_mutex_lock(&s->mu);
	while (!s->stopping) {
		struct timespec ts = time_after(CLOCK_REALTIME, s->poll_ms);
		pthread_cond_timedwait(&s->cv, &s->mu, &ts);
		if (s->stopping)
			break;
		if (s->watchers > 0) {
			int fd = oplock(s, LOCK_SH, NULL);
			if (fd >= 0) {
				sync_locked(s, true);
				opunlock(fd);
			}
		}
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ---- object helpers --------------------------------------------------------------------------- */

static cJSON *meta_of(cJSON *obj)
{
	cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	if (!cJSON_IsObject(m)) {
		cJSON_DeleteItemFromObjectCaseSensitive(obj, "metadata");
		m = cJSON_AddObjectToObject(obj, "metadata");
	}
	return m;
}

static void meta_set_str(cJSON *obj, const char *field, const char *value)
{
	cJSON *m = meta_of(obj);
	cJSON_DeleteItemFromObjectCaseSensitive(m, field);
	if (value)
		cJSON_AddStringToObject(m, field, value);
}

static void meta_set_rv(cJSON *obj, uint64_t rv)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%" PRIu64, rv);
	meta_set_str(obj, "resourceVersion", buf);
}

static void copy_field(cJSON *dst, const cJSON *src, const char *field)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(src, field);
	cJSON_DeleteItemFromObjectCaseSensitive(dst, field);
	if (v)
		cJSON_AddItemToObject(dst, field, cJSON_Duplicate(v, true));
}

static bool has_finalizers(const cJSON *obj)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "finalizers");
	return cJSON_IsArray(f) && cJSON_GetArraySize(f) > 0;
}

static void new_uid(char *out)
{
	unsigned char b[16];
	if (getrandom(b, sizeof(b), 0) != sizeof(b)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		for (int i = 0; i < 16; i++)
			b[i] = (unsigned char)((ts.tv_nsec >> (i % 8)) ^ (getpid() << i) ^ rand());
	}
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	sprintf(out, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
	        b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
	        b[14], b[15]);
}

static int conflict(const struct store_kind *k, const char *name, struct err *e)
{
	return err_set(e, STORE_CONFLICT,
	               "Operation cannot be fulfilled on %s \"%s\": the object has been modified; "
	               "please apply your changes to the latest version and try again",
	               k->plural, name);
}

static int not_found(const struct store_kind *k, const char *name, struct err *e)
{
	return err_set(e, STORE_NOT_FOUND, "%s \"%s\" not found", k->plural, name);
}

/* ---- operations ------------------------------------------------------------------------------ */

static int d_get(store *st, const struct store_kind *k, const char *ns, const char *name,
                 cJSON **out, struct err *e)
{
	struct dstore *s = DS(st);
	char key[PATH_MAX], path[PATH_MAX + 64];
	int r;
	*out = NULL;
	if ((r = obj_key(k, ns, name, key, sizeof(key), e)) < 0)
		return r;
	obj_path(s, key, path, sizeof(path));
	r = json_read_file(path, out, e);
	if (r == -ENOENT)
		return not_found(k, name, e);
	return r;
}

static int cmp_names(const void *a, const void *b)
{
	const cJSON *x = *(cJSON *const *)a, *y = *(cJSON *const *)b;
	const char *nx = store_meta_str(x, "namespace"), *ny = store_meta_str(y, "namespace");
	int c = strcmp(nx ? nx : "", ny ? ny : "");
	return c ? c : strcmp(store_meta_str(x, "name"), store_meta_str(y, "name"));
}

static int list_dir(struct dstore *s, const char *dir, const char *selector, cJSON ***v, size_t *n,
                    size_t *cap, bool recurse, struct err *e)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int r = 0;
	if (!d)
		return errno == ENOENT ? 0
		                       : err_set(e, -errno, "open %s: %s", dir, strerror(errno));
	while (r == 0 && (de = readdir(d)) != NULL) {
		char path[PATH_MAX];
		size_t len = strlen(de->d_name);
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (recurse) {
			r = list_dir(s, path, selector, v, n, cap, false, e);
			continue;
		}
		if (len < 6 || strcmp(de->d_name + len - 5, ".json") != 0)
			continue;
		cJSON *obj;
		r = json_read_file(path, &obj, e);
		if (r == -ENOENT) { /* deleted meanwhile */
			r = 0;
			continue;
		}
		if (r < 0)
			break;
		int m = store_selector_match(selector, obj, e);
		if (m <= 0) {
			cJSON_Delete(obj);
			r = m;
			continue;
		}
		if (*n == *cap) {
			size_t nc = *cap ? *cap * 2 : 32;
			cJSON **p = realloc(*v, nc * sizeof(**v));
			if (!p) {
				cJSON_Delete(obj);
				r = err_set(e, -ENOMEM, "list: out of memory");
				break;
			}
			*v = p;
			*cap = nc;
		}
		(*v)[(*n)++] = obj;
	}
	closedir(d);
	return r;
}

static int d_list(store *st, const struct store_kind *k, const char *ns, const char *selector,
                  cJSON **items, uint64_t *list_rv, struct err *e)
{
	struct dstore *s = DS(st);
	char dir[PATH_MAX];
	cJSON **v = NULL;
	size_t n = 0, cap = 0;
	uint64_t rv;
	int r;

	*items = NULL;
	if (ns && (r = store_validate_name("namespace", ns, e)) < 0)
		return r;
	if ((r = store_selector_match(selector, NULL, e)) < 0)
		return r;
	if ((r = rv_read(s, &rv, e)) < 0) /* before reading: no event after it is missed */
		return r;
	if (obj_dir(s, k, k->namespaced ? ns : NULL, dir, sizeof(dir)) < 0)
		return err_set(e, -ENAMETOOLONG, "path too long");
	r = list_dir(s, dir, selector, &v, &n, &cap, k->namespaced && !ns, e);
	if (r < 0) {
		for (size_t i = 0; i < n; i++)
			cJSON_Delete(v[i]);
		free(v);
		return r;
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_names);
	*items = cJSON_CreateArray();
	for (size_t i = 0; i < n; i++)
		cJSON_AddItemToArray(*items, v[i]);
	free(v);
	if (list_rv)
		*list_rv = rv;
	return 0;
}

enum op { OP_CREATE, OP_UPDATE, OP_STATUS, OP_DELETE };

struct opreq {
	enum op op;
	const cJSON *obj; /* create/update/status */
	const struct store_kind *kind;
	const char *ns, *name;
	const char *uid_pre, *rv_pre; /* delete */
	cJSON **out;
};

/* Computes the object to store from the request and the stored one.  Returns 0 with *next
 * (NULL: remove the file), or an error. */
static int plan(struct opreq *q, const cJSON *cur, cJSON **next, struct err *e)
{
	const struct store_kind *k = q->kind;
	*next = NULL;
	if (q->op == OP_CREATE) {
		if (cur)
			return err_set(e, STORE_ALREADY_EXISTS, "%s \"%s\" already exists",
			               k->plural, q->name);
		if (store_meta_str(q->obj, "resourceVersion"))
			return err_set(e, STORE_INVALID,
			               "%s \"%s\": resourceVersion should not be set "
			               "on objects to be created",
			               k->kind, q->name);
		cJSON *n = cJSON_Duplicate(q->obj, true);
		char uid[40], ts[32];
		new_uid(uid);
		store_timestamp(ts, sizeof(ts));
		meta_set_str(n, "uid", uid);
		meta_set_str(n, "creationTimestamp", ts);
		meta_set_str(n, "deletionTimestamp", NULL);
		cJSON_DeleteItemFromObjectCaseSensitive(meta_of(n), "generation");
		cJSON_AddNumberToObject(meta_of(n), "generation", 1);
		if (k->status_subresource)
			cJSON_DeleteItemFromObjectCaseSensitive(n, "status");
		*next = n;
		return 0;
	}
	if (!cur)
		return not_found(k, q->name, e);
	if (q->op == OP_DELETE) {
		if (q->uid_pre && *q->uid_pre) {
			const char *uid = store_meta_str(cur, "uid");
			if (!uid || strcmp(uid, q->uid_pre) != 0)
				return err_set(
				    e, STORE_CONFLICT,
				    "Precondition failed: UID in precondition: %s, UID in "
				    "object meta: %s",
				    q->uid_pre, uid ? uid : "");
		}
		if (q->rv_pre && *q->rv_pre) {
			const char *rv = store_meta_str(cur, "resourceVersion");
			if (!rv || strcmp(rv, q->rv_pre) != 0)
				return err_set(
				    e, STORE_CONFLICT,
				    "Precondition failed: ResourceVersion in precondition: "
				    "%s, ResourceVersion in object meta: %s",
				    q->rv_pre, rv ? rv : "");
		}
		if (!has_finalizers(cur))
			return 0; /* remove */
		cJSON *n = cJSON_Duplicate(cur, true);
		if (!store_meta_str(cur, "deletionTimestamp")) {
			char ts[32];
			store_timestamp(ts, sizeof(ts));
			meta_set_str(n, "deletionTimestamp", ts);
		}
		*next = n;
		return 0;
	}
	/* update and status update */
	const char *want_rv = store_meta_str(q->obj, "resourceVersion");
	const char *have_rv = store_meta_str(cur, "resourceVersion");
	const char *want_uid = store_meta_str(q->obj, "uid");
	if ((want_rv && *want_rv && (!have_rv || strcmp(want_rv, have_rv) != 0)) ||
	    (want_uid && *want_uid && strcmp(want_uid, store_meta_str(cur, "uid") ?: "") != 0))
		return conflict(k, q->name, e);
	cJSON *n;
	if (q->op == OP_STATUS) {
		n = cJSON_Duplicate(cur, true);
		copy_field(n, q->obj, "status");
	} else {
		n = cJSON_Duplicate(q->obj, true);
		cJSON *nm = meta_of(n);
		const cJSON *cm = cJSON_GetObjectItemCaseSensitive(cur, "metadata");
		static const char *const keep[] = {
		    "uid",        "creationTimestamp", "deletionTimestamp",
		    "generation", "namespace",         "name"};
		for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
			copy_field(nm, cm, keep[i]);
		if (k->status_subresource)
			copy_field(n, cur, "status");
		/* any change outside metadata and status bumps the generation */
		bool changed = false;
		const cJSON *it;
		cJSON_ArrayForEach(it, n)
		{
			if (!strcmp(it->string, "metadata") || !strcmp(it->string, "status"))
				continue;
			const cJSON *old = cJSON_GetObjectItemCaseSensitive(cur, it->string);
			changed |= !old || !cJSON_Compare(it, old, true);
		}
		cJSON_ArrayForEach(it, cur)
		{
			if (strcmp(it->string, "metadata") && strcmp(it->string, "status") &&
			    !cJSON_GetObjectItemCaseSensitive(n, it->string))
				changed = true;
		}
		if (changed) {
			int64_t g = 0;
			json_get_int64(cm, "generation", &g);
			cJSON_DeleteItemFromObjectCaseSensitive(nm, "generation");
			cJSON_AddNumberToObject(nm, "generation", (double)(g + 1));
		}
		if (store_meta_str(cur, "deletionTimestamp") && !has_finalizers(n)) {
			*next = NULL; /* the last finalizer went: the object goes */
			if (q->out)
				*q->out = n;
			else
				cJSON_Delete(n);
			return 1;
		}
	}
	*next = n;
	return 0;
}

static int d_write(struct dstore *s, struct opreq *q, struct err *e)
{
	char key[PATH_MAX], path[PATH_MAX + 64], dir[PATH_MAX];
	cJSON *cur = NULL, *next = NULL;
	uint64_t rv;
	int r, fd;

	if (q->out)
		*q->out = NULL;
	if ((r = obj_key(q->kind, q->ns, q->name, key, sizeof(key), e)) < 0)
		return r;
	obj_path(s, key, path, sizeof(path));
	pthread_mutex_lock(&s->mu);
	fd = oplock(s, LOCK_EX, e);
	if (fd < 0) {
		pthread_mutex_unlock(&s->mu);
		return fd;
	}
	if (s->cache_ready)
		sync_locked(s, true);
	r = json_read_file(path, &cur, e);
	if (r == -ENOENT)
		r = 0;
	if (r < 0)
		goto out;
	r = plan(q, cur, &next, e);
	if (r < 0)
		goto out;
	bool removed_by_update = r == 1;
	if ((r = rv_next(s, &rv, e)) < 0)
		goto out;
	if (next) {
		meta_set_rv(next, rv);
		if (obj_dir(s, q->kind, q->kind->namespaced ? q->ns : NULL, dir, sizeof(dir)) < 0 ||
		    (r = file_mkdir_p(dir, 0755, e)) < 0)
			goto out;
		if ((r = json_write_file(path, next, 0644, e)) < 0)
			goto out;
		if (s->cache_ready) {
			struct stat st;
			ino_t ino = stat(path, &st) == 0 ? st.st_ino : 0;
			ring_push(s, cur ? STORE_MODIFIED : STORE_ADDED, q->kind, rv, next);
			cache_put(s, key, q->kind, ino, rv, next);
		}
		if (q->out) {
			*q->out = next;
			next = NULL;
		}
	} else {
		if ((r = file_remove_durable(path, e)) < 0)
			goto out;
		if (s->cache_ready) {
			cJSON *last = q->out && *q->out ? *q->out : cur;
			meta_set_rv(last, rv);
			ring_push(s, STORE_DELETED, q->kind, rv, last);
			struct centry *c = cache_find(s, key);
			if (c)
				cache_drop(s, c);
		}
		(void)removed_by_update;
	}
	r = 0;
out:
	opunlock(fd);
	pthread_mutex_unlock(&s->mu);
	cJSON_Delete(cur);
	cJSON_Delete(next);
	return r;
}

static int prep_obj(struct opreq *q, const cJSON *obj, struct err *e)
{
	q->kind = store_kind_of(obj, e);
	if (!q->kind)
		return STORE_INVALID;
	q->obj = obj;
	q->name = store_meta_str(obj, "name");
	q->ns = q->kind->namespaced ? store_meta_str(obj, "namespace") : NULL;
	return 0;
}

static int d_create(store *st, const cJSON *obj, cJSON **out, struct err *e)
{
	struct opreq q = {.op = OP_CREATE, .out = out};
	int r = prep_obj(&q, obj, e);
	return r < 0 ? r : d_write(DS(st), &q, e);
}

static int d_update(store *st, const cJSON *obj, cJSON **out, struct err *e)
{
	struct opreq q = {.op = OP_UPDATE, .out = out};
	int r = prep_obj(&q, obj, e);
	return r < 0 ? r : d_write(DS(st), &q, e);
}

static int d_update_status(store *st, const cJSON *obj, cJSON **out, struct err *e)
{
	struct opreq q = {.op = OP_STATUS, .out = out};
	int r = prep_obj(&q, obj, e);
	return r < 0 ? r : d_write(DS(st), &q, e);
}

static int d_remove(store *st, const struct store_kind *k, const char *ns, const char *name,
                    const char *uid_pre, const char *rv_pre, struct err *e)
{
	struct opreq q = {.op = OP_DELETE,
	                  .kind = k,
	                  .ns = k->namespaced ? ns : NULL,
	                  .name = name,
	                  .uid_pre = uid_pre,
	                  .rv_pre = rv_pre};
	return d_write(DS(st), &q, e);
}

/* ---- watches ----------------------------------------------------------------------------------- */

static int start_poller_locked(struct dstore *s)
{
	if (s->poller_running)
		return 0;
	if (pthread_create(&s->poller, NULL, poller_main, s) != 0)
		return -EAGAIN;
	s->poller_running = true;
	return 0;
}

static int d_watch(store *st, const struct store_kind *k, uint64_t from_rv, store_watch **out,
                   struct err *e)
{
	struct dstore *s = DS(st);
	struct store_watch *w = calloc(1, sizeof(*w));
	int r = 0;

	*out = NULL;
	if (!w)
		return err_set(e, -ENOMEM, "watch: out of memory");
	w->s = s;
	w->kind = k;
	pthread_mutex_lock(&s->mu);
	cache_init_locked(s);
	if (from_rv == 0) {
		w->initial = cJSON_CreateArray();
		for (unsigned b = 0; b < NBUCKETS; b++)
			for (struct centry *c = s->buckets[b]; c; c = c->next)
				if (c->kind == k && c->obj)
					cJSON_AddItemToArray(w->initial,
					                     cJSON_Duplicate(c->obj, true));
		w->next_seq = s->next_seq;
	} else if (from_rv < s->floor_rv) {
		r = err_set(e, STORE_EXPIRED, "too old resource version: %" PRIu64 " (%" PRIu64 ")",
		            from_rv, s->floor_rv);
	} else {
		uint64_t q = s->first_seq;
		while (q < s->next_seq && s->ring[q % RING_CAP].rv <= from_rv)
			q++;
		w->next_seq = q;
	}
	if (r == 0 && (r = start_poller_locked(s)) < 0)
		err_set(e, r, "watch: cannot start the poll thread");
	if (r == 0)
		s->watchers++;
	pthread_mutex_unlock(&s->mu);
	if (r < 0) {
		cJSON_Delete(w->initial);
		free(w);
		return r;
	}
	*out = w;
	return 0;
}

int store_watch_next(store_watch *w, int timeout_ms, enum store_event_type *type, cJSON **obj,
                     struct err *e)
{
	struct dstore *s = w->s;
	struct timespec ts;
	int r = 0;

	*obj = NULL;
	if (w->initial && w->initial_idx < cJSON_GetArraySize(w->initial)) {
		*type = STORE_ADDED;
		*obj = cJSON_Duplicate(cJSON_GetArrayItem(w->initial, w->initial_idx++), true);
		return 1;
	}
	ts = time_after(CLOCK_REALTIME, timeout_ms);
	pthread_mutex_lock(&s->mu);
	for (;;) {
		if (w->closed) {
			r = err_set(e, -ECANCELED, "watch closed");
			break;
		}
		if (w->next_seq < s->first_seq) {
			r = err_set(e, STORE_EXPIRED, "watch fell behind: too many events; relist");
			break;
		}
		while (w->next_seq < s->next_seq && s->ring[w->next_seq % RING_CAP].kind != w->kind)
			w->next_seq++;
		if (w->next_seq < s->next_seq) {
			struct event *ev = &s->ring[w->next_seq % RING_CAP];
			*type = ev->type;
			*obj = cJSON_Duplicate(ev->obj, true);
			w->next_seq++;
			r = 1;
			break;
		}
		if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT) {
			r = 0;
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return r;
}

void store_watch_close(store_watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->s->mu);
	w->s->watchers--;
	pthread_mutex_unlock(&w->s->mu);
	cJSON_Delete(w->initial);
	free(w);
}

/* ---- open/close -------------------------------------------------------------------------------- */

static void d_close(store *st)
{
	struct dstore *s = DS(st);
	pthread_mutex_lock(&s->mu);
	s->stopping = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	if (s->poller_running)
		pthread_join(s->poller, NULL);
	for (uint64_t q = s->first_seq; q < s->next_seq; q++)
		cJSON_Delete(s->ring[q % RING_CAP].obj);
	for (unsigned b = 0; b < NBUCKETS; b++)
		while (s->buckets[b])
			cache_drop(s, s->buckets[b]);
	if (s->owner_fd >= 0)
		close(s->owner_fd);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s->path);
	free(s);
}

static const struct store_ops dir_ops = {d_get,           d_list,   d_create, d_update,
                                         d_update_status, d_remove, d_watch,  d_close};

static int take_owner_lock(struct dstore *s, struct err *e)
{
	char p[PATH_MAX], pid[32];
	snprintf(p, sizeof(p), "%s/.lock", s->path);
	int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return err_set(e, -errno, "open %s: %s", p, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		close(fd);
		return err_set(e, -EBUSY, "store %s is in use by another controller (pid %s)",
		               s->path, *pid ? pid : "unknown");
	}
	snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, strlen(pid), 0) < 0) {
		int r = -errno;
		close(fd);
		return err_set(e, r, "write %s: %s", p, strerror(-r));
	}
	s->owner_fd = fd;
	return 0;
}

int store_dir_open(const char *path, bool owner, int poll_ms, store **out, struct err *e)
{
	struct dstore *s;
	uint64_t rv;
	int r;

	*out = NULL;
	if (!path || !*path)
		return err_set(e, -EINVAL, "store directory path is empty");
	if ((r = file_mkdir_p(path, 0755, e)) < 0)
		return r;
	s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, -ENOMEM, "store: out of memory");
	s->base.ops = &dir_ops;
	s->owner_fd = -1;
	s->poll_ms = poll_ms > 0 ? poll_ms : 1000;
	s->path = strdup(path);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (!s->path) {
		d_close(&s->base);
		return err_set(e, -ENOMEM, "store: out of memory");
	}
	if (owner && (r = take_owner_lock(s, e)) < 0) {
		d_close(&s->base);
		return r;
	}
	if ((r = rv_read(s, &rv, e)) < 0) { /* a corrupt counter stops us here, loudly */
		d_close(&s->base);
		return r;
	}
	if (owner) {
		pthread_mutex_lock(&s->mu);
		cache_init_locked(s);
		pthread_mutex_unlock(&s->mu);
	}
	*out = &s->base;
	return 0;
}
