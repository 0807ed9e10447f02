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
#include "store/dir_int.h"

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

int dir_rv_read(struct dstore *s, uint64_t *rv, struct err *e)
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
	int r = dir_rv_read(s, &cur, e);
	if (r < 0)
		return r;
	*rv = cur + 1;
	snprintf(p, sizeof(p), "%s/resourceversion", s->path);
	snprintf(text, sizeof(text), "%" PRIu64 "\n", *rv);
	return file_write_atomic(p, text, strlen(text), 0644, e);
}

/* ---- locks ------------------------------------------------------------------------------------- */

int dir_oplock(struct dstore *s, int how, struct err *e)
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

void dir_opunlock(int fd)
{
	if (fd >= 0) {
		flock(fd, LOCK_UN);
		close(fd);
	}
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
	if ((r = dir_rv_read(s, &rv, e)) < 0) /* before reading: no event after it is missed */
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

static int plan_create(struct opreq *q, const cJSON *cur, cJSON **next, struct err *e)
{
	const struct store_kind *k = q->kind;
	if (cur)
		return err_set(e, STORE_ALREADY_EXISTS, "%s \"%s\" already exists", k->plural,
		               q->name);
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

static int plan_delete(struct opreq *q, const cJSON *cur, cJSON **next, struct err *e)
{
	if (q->uid_pre && *q->uid_pre) {
		const char *uid = store_meta_str(cur, "uid");
		if (!uid || strcmp(uid, q->uid_pre) != 0)
			return err_set(e, STORE_CONFLICT,
			               "Precondition failed: UID in precondition: %s, UID in "
			               "object meta: %s",
			               q->uid_pre, uid ? uid : "");
	}
	if (q->rv_pre && *q->rv_pre) {
		const char *rv = store_meta_str(cur, "resourceVersion");
		if (!rv || strcmp(rv, q->rv_pre) != 0)
			return err_set(e, STORE_CONFLICT,
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

/* true when n differs from cur outside metadata and status (a spec change). */
static bool spec_changed(const cJSON *n, const cJSON *cur)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, n)
	{
		if (!strcmp(it->string, "metadata") || !strcmp(it->string, "status"))
			continue;
		const cJSON *old = cJSON_GetObjectItemCaseSensitive(cur, it->string);
		if (!old || !cJSON_Compare(it, old, true))
			return true;
	}
	cJSON_ArrayForEach(it, cur)
	{
		if (strcmp(it->string, "metadata") && strcmp(it->string, "status") &&
		    !cJSON_GetObjectItemCaseSensitive(n, it->string))
			return true;
	}
	return false;
}

/* A whole-object update: the server-owned metadata and status kept, generation bumped on a spec
 * change.  1 with *next NULL when the update removed the last finalizer of a deleted object. */
static int plan_update(struct opreq *q, const cJSON *cur, cJSON **next)
{
	cJSON *n = cJSON_Duplicate(q->obj, true);
	cJSON *nm = meta_of(n);
	const cJSON *cm = cJSON_GetObjectItemCaseSensitive(cur, "metadata");
	static const char *const keep[] = {"uid",        "creationTimestamp", "deletionTimestamp",
	                                   "generation", "namespace",         "name"};
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		copy_field(nm, cm, keep[i]);
	if (q->kind->status_subresource)
		copy_field(n, cur, "status");
	if (spec_changed(n, cur)) {
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
	*next = n;
	return 0;
}

/* Computes the object to store from the request and the stored one.  Returns 0 with *next
 * (NULL: remove the file), 1 (see plan_update), or an error. */
static int plan(struct opreq *q, const cJSON *cur, cJSON **next, struct err *e)
{
	*next = NULL;
	if (q->op == OP_CREATE)
		return plan_create(q, cur, next, e);
	if (!cur)
		return not_found(q->kind, q->name, e);
	if (q->op == OP_DELETE)
		return plan_delete(q, cur, next, e);
	/* update and status update */
	const char *want_rv = store_meta_str(q->obj, "resourceVersion");
	const char *have_rv = store_meta_str(cur, "resourceVersion");
	const char *want_uid = store_meta_str(q->obj, "uid");
	if ((want_rv && *want_rv && (!have_rv || strcmp(want_rv, have_rv) != 0)) ||
	    (want_uid && *want_uid && strcmp(want_uid, store_meta_str(cur, "uid") ?: "") != 0))
		return conflict(q->kind, q->name, e);
	if (q->op != OP_STATUS)
		return plan_update(q, cur, next);
	cJSON *n = cJSON_Duplicate(cur, true);
	copy_field(n, q->obj, "status");
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
	fd = dir_oplock(s, LOCK_EX, e);
	if (fd < 0) {
		pthread_mutex_unlock(&s->mu);
		return fd;
	}
	if (s->cache_ready)
		dir_sync_locked(s, true);
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
			dir_ring_push(s, cur ? STORE_MODIFIED : STORE_ADDED, q->kind, rv, next);
			dir_cache_put(s, key, q->kind, ino, rv, next);
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
			dir_ring_push(s, STORE_DELETED, q->kind, rv, last);
			struct centry *c = dir_cache_find(s, key);
			if (c)
				dir_cache_drop(s, c);
		}
		(void)removed_by_update;
	}
	r = 0;
out:
	dir_opunlock(fd);
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
			dir_cache_drop(s, s->buckets[b]);
	if (s->owner_fd >= 0)
		close(s->owner_fd);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s->path);
	free(s);
}

static const struct store_ops dir_ops = {d_get,           d_list,   d_create,  d_update,
                                         d_update_status, d_remove, dir_watch, dir_watch_next,
                                         dir_watch_close, d_close};

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
	if ((r = dir_rv_read(s, &rv, e)) < 0) { /* a corrupt counter stops us here, loudly */
		d_close(&s->base);
		return r;
	}
	if (owner) {
		pthread_mutex_lock(&s->mu);
		dir_cache_init_locked(s);
		pthread_mutex_unlock(&s->mu);
	}
	*out = &s->base;
	return 0;
}
