/* store: the embedded implementation — one durable JSON file per object in a directory.
 *
 * Layout: PATH/<plural>/<name>.json (PATH/<plural>/<namespace>/<name>.json for namespaced
 * kinds), PATH/resourceversion (a version no issued one exceeds, persisted before use),
 * PATH/.lock (the owning controller's flock), PATH/.oplock (every writer's flock, per
 * operation, and the exact last issued version while the machine runs).
 *
 * Cost per operation does not depend on the number of objects.  The owner (and any process
 * once it watches) keeps an index in memory (dir_index.c): each object's JSON text, shared by
 * reference with the bounded event history.  get and list answer from it; a write reads the
 * current object from it, not from a rescan.  Changes made by other processes arrive through
 * inotify (dir_watch.c) and are applied before each operation, one file per notification.
 * Processes without an index (the CLI, the node role) read and write files directly.
 *
 * Durability and fsyncs.  A write is one entry in the store's write-ahead journal PATH/.journal
 * (the object's key and full text, or a delete) made durable by one fdatasync that concurrent
 * writes of a process share, then the object's file written and renamed (or removed) without
 * fsync; a checkpoint (syncfs) makes the files durable and frees the journal when it is half
 * full and at the owner's close, and whoever takes the operation lock or opens the store
 * applies entries that a dead writer or a reboot left unapplied (dir_journal.c).  A write is
 * published, and acknowledged, only once its entry is durable.  The resourceVersion counter is
 * not a second durable write per write; it persists a ceiling:
 * PATH/resourceversion holds a version that no issued one exceeds, rewritten durably only when
 * a block of RV_BLOCK versions is used up; the exact last issued version lives in PATH/.oplock
 * next to the machine's boot ID, written under the operation lock by whichever process issues a
 * version.  Page-cache contents survive any
 * process crash, so while the boot ID matches that value is exact and shared by all processes;
 * after a reboot (boot ID differs) or when the ceiling file no longer matches, versions continue
 * above the persisted ceiling, so a version is never issued twice.  A write therefore costs one
 * fdatasync (shared by concurrent writes in a process with an index, dir_commit.c), plus two
 * fsyncs per RV_BLOCK writes and a checkpoint per half journal.  A corrupt object file,
 * counter or journal is an error naming it.
 * A process killed in the middle of a write leaves its temporary file (PATH/.<name>.json.tmp.XXXXXX)
 * behind; the owner removes such files when it opens the store.
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

static void obj_path(struct dir_store *s, const char *key, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s.json", s->path, key);
}

static int obj_dir(struct dir_store *s, const struct store_kind *k, const char *ns, char *out,
                   size_t cap)
{
	int n = ns ? snprintf(out, cap, "%s/%s/%s", s->path, k->plural, ns)
	           : snprintf(out, cap, "%s/%s", s->path, k->plural);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* ---- resourceVersion counter -------------------------------------------------------------------- */

#define RV_BLOCK 1024

/* The persisted ceiling (0 when the store is new). */
static int rv_ceiling_read(struct dir_store *s, uint64_t *rv, struct err *e)
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

static bool same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* rv_ceiling_read for a write that issues a version (mu held): the file read again only when
 * its identity (inode, size, modification and change times) is not the one last read.  The
 * store replaces the file (file_write_atomic: a new inode) and stats it before reading, so a
 * change made between the stat and the read is seen by the next stat. */
static int rv_ceiling_of_writer(struct dir_store *s, uint64_t *rv, struct err *e)
{
	char p[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof(p), "%s/resourceversion", s->path);
	if (stat(p, &st) < 0) {
		s->ceil_known = false;
		return rv_ceiling_read(s, rv, e);
	}
	if (s->ceil_known && s->ceil_ino == st.st_ino && s->ceil_size == st.st_size &&
	    same_time(&s->ceil_mtime, &st.st_mtim) && same_time(&s->ceil_ctime, &st.st_ctim)) {
		*rv = s->ceil_cached;
		return 0;
	}
	int r = rv_ceiling_read(s, rv, e);
	s->ceil_known = r == 0;
	s->ceil_cached = *rv;
	s->ceil_ino = st.st_ino;
	s->ceil_size = st.st_size;
	s->ceil_mtime = st.st_mtim;
	s->ceil_ctime = st.st_ctim;
	return r;
}

/* The last issued version and the ceiling, from .oplock (fd) when it belongs to this boot and
 * this ceiling, else both the ceiling; writer: a write that issues a version (mu held). */
static int rv_state(struct dir_store *s, int fd, bool writer, uint64_t *last, uint64_t *ceil,
                    struct err *e)
{
	char buf[128], boot[40];
	unsigned long long l, c;
	int r = writer ? rv_ceiling_of_writer(s, ceil, e) : rv_ceiling_read(s, ceil, e);
	if (r < 0)
		return r;
	*last = *ceil;
	ssize_t n = fd >= 0 ? pread(fd, buf, sizeof(buf) - 1, 0) : -1;
	if (n <= 0 || !*s->boot_id)
		return 0;
	buf[n] = '\0';
	if (sscanf(buf, "%39s %llu %llu", boot, &l, &c) == 3 && strcmp(boot, s->boot_id) == 0 &&
	    c == *ceil && l <= c)
		*last = l;
	return 0;
}

int dir_rv_last(struct dir_store *s, uint64_t *rv, struct err *e)
{
	char p[PATH_MAX];
	uint64_t ceil;
	snprintf(p, sizeof(p), "%s/.oplock", s->path);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	int r = rv_state(s, fd, false, rv, &ceil, e);
	if (fd >= 0)
		close(fd);
	return r;
}

/* Issues the next version (operation lock held through fd, s->mu held): persisted before use. */
int dir_rv_issue(struct dir_store *s, int fd, uint64_t *rv, struct err *e)
{
	char p[PATH_MAX], text[128];
	uint64_t last, ceil;
	int r = rv_state(s, fd, true, &last, &ceil, e);
	if (r < 0)
		return r;
	*rv = last + 1;
	if (*rv > ceil) {
		ceil = last + RV_BLOCK;
		snprintf(p, sizeof(p), "%s/resourceversion", s->path);
		snprintf(text, sizeof(text), "%" PRIu64 "\n", ceil);
		if ((r = file_write_atomic(p, text, strlen(text), 0644, e)) < 0)
			return r;
	}
	int n = snprintf(text, sizeof(text), "%s %020" PRIu64 " %020" PRIu64 "\n",
	                 *s->boot_id ? s->boot_id : "-", *rv, ceil);
	if (pwrite(fd, text, (size_t)n, 0) != n)
		return err_set(e, -errno ? -errno : -EIO, "write %s/.oplock: %s", s->path,
		               strerror(errno ? errno : EIO));
	return 0;
}

/* The kernel's ID of this boot ("" when unreadable: then no last version is trusted). */
static void read_boot_id(struct dir_store *s)
{
	char buf[64];
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, " \n")] = '\0';
	snprintf(s->boot_id, sizeof(s->boot_id), "%.39s", buf);
}

int dir_kind_index(const struct store_kind *k)
{
	const struct store_kind *const *all = store_kinds();
	for (int i = 0; all[i] && i < MAX_KINDS; i++)
		if (all[i] == k)
			return i;
	return -1;
}

/* ---- locks ------------------------------------------------------------------------------------- */

int dir_oplock(struct dir_store *s, int how, struct err *e)
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

int dir_oplock_kept(struct dir_store *s, struct err *e)
{
	if (s->op_keep < 0) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/.oplock", s->path);
		if ((s->op_keep = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0)
			return err_set(e, -errno, "open %s: %s", p, strerror(errno));
	}
	while (flock(s->op_keep, LOCK_EX) < 0)
		if (errno != EINTR)
			return err_set(e, -errno, "lock %s/.oplock: %s", s->path, strerror(errno));
	return s->op_keep;
}

void dir_opunlock(int fd)
{
	if (fd >= 0) {
		flock(fd, LOCK_UN);
		close(fd);
	}
}

/* ---- operations ------------------------------------------------------------------------------ */

/* The index answers for this process: built, and told of other processes' changes. */
bool dir_live(struct dir_store *s)
{
	return s->indexed && s->ino_fd >= 0;
}

static int parse_entry(const struct index_entry *en, cJSON **out, struct err *e)
{
	if (!en->obj)
		return err_set(e, -EBADMSG, "%s", en->corrupt ? en->corrupt : "corrupt record");
	return store_blob_parse(en->obj, out, e);
}

static int d_get(store *st, const struct store_kind *k, const char *ns, const char *name,
                 cJSON **out, struct err *e)
{
	struct dir_store *s = DS(st);
	char key[PATH_MAX], path[PATH_MAX + 64];
	int r;
	*out = NULL;
	if ((r = obj_key(k, ns, name, key, sizeof(key), e)) < 0)
		return r;
	pthread_mutex_lock(&s->mu);
	if (dir_live(s)) {
		dir_catch_up(s, false);
		struct index_entry *en = dir_index_find(s, key);
		r = en ? parse_entry(en, out, e) : dir_not_found(k, name, e);
		pthread_mutex_unlock(&s->mu);
		return r;
	}
	pthread_mutex_unlock(&s->mu);
	obj_path(s, key, path, sizeof(path));
	r = json_read_file(path, out, e);
	if (r == -ENOENT)
		return dir_not_found(k, name, e);
	return r;
}

static int cmp_names(const void *a, const void *b)
{
	const cJSON *x = *(cJSON *const *)a, *y = *(cJSON *const *)b;
	const char *nx = store_meta_str(x, "namespace"), *ny = store_meta_str(y, "namespace");
	int c = strcmp(nx ? nx : "", ny ? ny : "");
	return c ? c : strcmp(store_meta_str(x, "name"), store_meta_str(y, "name"));
}

struct objvec {
	cJSON **v;
	size_t n, cap;
};

/* Keeps obj when it matches the selector (takes it either way).  0 or an error. */
static int keep(struct objvec *ov, cJSON *obj, const char *selector, struct err *e)
{
	int m = store_selector_match(selector, obj, e);
	if (m <= 0) {
		cJSON_Delete(obj);
		return m;
	}
	if (ov->n == ov->cap) {
		size_t nc = ov->cap ? ov->cap * 2 : 32;
		cJSON **p = realloc(ov->v, nc * sizeof(*p));
		if (!p) {
			cJSON_Delete(obj);
			return err_set(e, -ENOMEM, "list: out of memory");
		}
		ov->v = p;
		ov->cap = nc;
	}
	ov->v[ov->n++] = obj;
	return 0;
}

struct list_files {
	const struct store_kind *k;
	const char *selector;
	struct objvec *ov;
};

/* dir_file_fn: keeps one object file's object (struct list_files arg) when the selector selects
 * it; a file that cannot be read is reported (store.h), one deleted meanwhile passed over. */
static int list_file(void *arg, const char *path, const char *ns, const char *file, size_t len,
                     struct err *e)
{
	struct list_files *l = arg;
	cJSON *obj;
	struct err oe = {0};
	int r = json_read_file(path, &obj, &oe);
	if (r == -ENOENT) /* deleted meanwhile */
		return 0;
	if (r == -ENOMEM)
		return err_set(e, r, "%s", oe.msg);
	if (r < 0) { /* this object's own error */
		char name[NAME_MAX + 1];
		snprintf(name, sizeof(name), "%.*s", (int)(len - 5), file);
		store_unreadable_report(l->k, ns, name, oe.msg);
		return 0;
	}
	return keep(l->ov, obj, l->selector, e);
}

/* A corrupt file of the index reported in its place (its key: <plural>/[<ns>/]<name>). */
static void report_corrupt(const struct store_kind *k, const struct index_entry *en)
{
	char ns[PATH_MAX];
	const char *rest = en->key + strlen(k->plural) + 1, *slash = strchr(rest, '/');
	if (k->namespaced && slash)
		snprintf(ns, sizeof(ns), "%.*s", (int)(slash - rest), rest);
	store_unreadable_report(k, k->namespaced && slash ? ns : NULL,
	                        k->namespaced && slash ? slash + 1 : rest,
	                        en->corrupt ? en->corrupt : "corrupt record");
}

/* The kind's entries in namespace ns (NULL: all) from the index; *rv the index's version. */
static int list_index(struct dir_store *s, const struct store_kind *k, const char *ns,
                      const char *selector, struct objvec *ov, uint64_t *rv, struct err *e)
{
	char prefix[PATH_MAX];
	int r = 0, ki = dir_kind_index(k);
	size_t plen = (size_t)snprintf(prefix, sizeof(prefix), "%s/%s/", k->plural, ns ? ns : "");
	dir_catch_up(s, false);
	for (struct index_entry *en = ki >= 0 ? s->kinds[ki] : NULL; en && r == 0; en = en->knext) {
		cJSON *obj;
		if (ns && strncmp(en->key, prefix, plen) != 0)
			continue;
		if (!en->obj) {
			report_corrupt(k, en);
			continue;
		}
		if ((r = parse_entry(en, &obj, e)) == 0)
			r = keep(ov, obj, selector, e);
	}
	*rv = s->index_rv;
	return r;
}

static int d_list(store *st, const struct store_kind *k, const char *ns, const char *selector,
                  cJSON **items, uint64_t *list_rv, struct err *e)
{
	struct dir_store *s = DS(st);
	char dir[PATH_MAX];
	struct objvec ov = {0};
	uint64_t rv = 0;
	int r;

	*items = NULL;
	if (ns && (r = store_validate_name("namespace", ns, e)) < 0)
		return r;
	if ((r = store_selector_match(selector, NULL, e)) < 0)
		return r;
	ns = k->namespaced ? ns : NULL;
	pthread_mutex_lock(&s->mu);
	if (dir_live(s)) {
		r = list_index(s, k, ns, selector, &ov, &rv, e);
	} else if ((r = dir_rv_last(s, &rv, e)) == 0) { /* before reading: no event is missed */
		if (obj_dir(s, k, ns, dir, sizeof(dir)) < 0)
			r = err_set(e, -ENAMETOOLONG, "path too long");
		else
			r = dir_files_each(k, dir, ns, k->namespaced && !ns, list_file,
			                   &(struct list_files){k, selector, &ov}, e);
	}
	pthread_mutex_unlock(&s->mu);
	if (r == 0 && !(*items = cJSON_CreateArray()))
		r = err_set(e, -ENOMEM, "list: out of memory");
	if (r < 0) {
		for (size_t i = 0; i < ov.n; i++)
			cJSON_Delete(ov.v[i]);
		free(ov.v);
		return r;
	}
	if (ov.n > 1)
		qsort(ov.v, ov.n, sizeof(*ov.v), cmp_names);
	for (size_t i = 0; i < ov.n; i++)
		cJSON_AddItemToArray(*items, ov.v[i]);
	free(ov.v);
	if (list_rv)
		*list_rv = rv;
	return 0;
}

/* The stored object now: from the index (after catching up) or from its file. */
int dir_current(struct dir_store *s, const char *key, const char *path, cJSON **cur, struct err *e)
{
	*cur = NULL;
	if (s->indexed) {
		dir_catch_up(s, true);
		struct index_entry *en = dir_index_find(s, key);
		return en ? parse_entry(en, cur, e) : 0;
	}
	int r = json_read_file(path, cur, e);
	return r == -ENOENT ? 0 : r;
}

/* Stores next (NULL: removes the file) at rv (the journal entry, then the file); the event and
 * the index follow.  The operation lock is held, nothing else in flight. */
static int commit(struct dir_store *s, struct opreq *q, const char *key, const char *path,
                  const cJSON *cur, cJSON *next, uint64_t rv, struct err *e)
{
	struct file_identity id;
	size_t len = 0;
	char *text = next ? dir_encode(next, rv, &len) : NULL;
	int r;
	if (next && !text)
		return err_set(e, -ENOMEM, "encode %s: out of memory", path);
	for (int tries = 0; tries < 2; tries++) {
		r = next ? dir_journal_put(s, key, path, text, len, !cur, false, &id, NULL, e)
		         : dir_journal_del(s, key, path, e);
		if (r != JOURNAL_FULL || tries || (r = dir_journal_checkpoint(s, e)) < 0)
			break;
	}
	free(text);
	if (r == 1)
		r = e && e->code ? e->code : -EIO;
	if (r == 0 && s->indexed)
		dir_publish(s, q, key, cur, next, rv, next ? &id : NULL);
	return r;
}

char *dir_encode(cJSON *next, uint64_t rv, size_t *len)
{
	dir_meta_set_rv(next, rv);
	char *text = json_print(next, true); /* the file stays readable: one field per line */
	if (!text)
		return NULL;
	*len = strlen(text);
	text[(*len)++] = '\n'; /* the terminator becomes the file's final newline */
	return text;
}

void dir_publish(struct dir_store *s, struct opreq *q, const char *key, const cJSON *cur,
                 cJSON *next, uint64_t rv, const struct file_identity *id)
{
	if (!next) {
		cJSON *last = q->out && *q->out ? *q->out : (cJSON *)cur;
		dir_meta_set_rv(last, rv);
		struct store_blob *b = store_blob_of(last);
		dir_ring_push(s, STORE_DELETED, q->kind, rv, b); /* NULL: out of memory, no copy */
		store_blob_put(b);
		struct index_entry *en = dir_index_find(s, key);
		if (en)
			dir_index_drop(s, en);
		return;
	}
	struct store_blob *b = store_blob_of(next);
	if (!b || dir_index_set(s, key, q->kind, b, NULL, rv, id) < 0) {
		store_blob_put(b); /* written; the index reloads it when its notification arrives */
		return;
	}
	dir_ring_push(s, cur ? STORE_MODIFIED : STORE_ADDED, q->kind, rv, b);
	store_blob_put(b);
}

static int d_write(struct dir_store *s, struct opreq *q, struct err *e)
{
	char key[PATH_MAX], path[PATH_MAX + 64];
	cJSON *cur = NULL, *next = NULL;
	uint64_t rv;
	int r, fd;

	if (q->out)
		*q->out = NULL;
	if ((r = obj_key(q->kind, q->ns, q->name, key, sizeof(key), e)) < 0)
		return r;
	obj_path(s, key, path, sizeof(path));
	pthread_mutex_lock(&s->mu);
	if (s->indexed) {
		pthread_mutex_unlock(&s->mu);
		return dir_write_grouped(s, q, key, path, e);
	}
	fd = dir_oplock(s, LOCK_EX, e);
	if (fd < 0) {
		pthread_mutex_unlock(&s->mu);
		return fd;
	}
	if ((r = dir_journal_attach(s, e)) == 0 && (r = dir_journal_locked(s, fd, e)) == 0 &&
	    (r = dir_current(s, key, path, &cur, e)) == 0 &&
	    (r = dir_plan(q, cur, &next, e)) >= 0 && (r = dir_rv_issue(s, fd, &rv, e)) == 0)
		r = commit(s, q, key, path, cur, next, rv, e);
	if (r == 0 && next && q->out) {
		*q->out = next;
		next = NULL;
	}
	/* the write stands whatever the checkpoint does; a failed one is tried again later */
	if (s->journal && journal_should_checkpoint(s->journal))
		dir_journal_checkpoint(s, NULL);
	dir_journal_mark(s, fd);
	dir_opunlock(fd);
	pthread_mutex_unlock(&s->mu);
	cJSON_Delete(cur);
	cJSON_Delete(next);
	return r < 0 ? r : 0;
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

static int d_write_all(store *st, const cJSON *obj, bool create, cJSON **out, struct err *e)
{
	struct opreq q = {.op = create ? OP_CREATE : OP_UPDATE, .out = out, .with_status = true};
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

/* At the owner's clean close: the journal checkpointed, so the next start replays nothing. */
static void close_journal(struct dir_store *s)
{
	if (s->journal && s->owner_fd >= 0 && journal_pending(s->journal)) {
		int fd = dir_oplock(s, LOCK_EX, NULL);
		if (fd >= 0 && dir_journal_locked(s, fd, NULL) == 0 &&
		    dir_journal_checkpoint(s, NULL) == 0)
			dir_journal_mark(s, fd);
		dir_opunlock(fd);
	}
	journal_close(s->journal);
}

static void d_close(store *st)
{
	struct dir_store *s = DS(st);
	dir_notify_stop(s);
	dir_lazy_stop(s);
	dir_checkpointer_join(s);
	close_journal(s);
	dir_ring_free(s);
	dir_index_free(s);
	if (s->owner_fd >= 0)
		close(s->owner_fd);
	if (s->op_keep >= 0)
		close(s->op_keep);
	pthread_cond_destroy(&s->cv);
	pthread_cond_destroy(&s->flight_cv);
	for (int i = 0; i < MAX_KINDS; i++) {
		pthread_cond_destroy(&s->kind_cv[i]);
	}
	pthread_mutex_destroy(&s->mu);
	free(s->path);
	free(s);
}

const struct store_ops dir_ops = {
    .get = d_get,
    .list = d_list,
    .list_each = dir_list_each,
    .list_each_skip = dir_list_each_skip,
    .create = d_create,
    .update = d_update,
    .update_status = d_update_status,
    .write_all = d_write_all,
    .remove = d_remove,
    .watch = dir_watch,
    .watch_next = dir_watch_next,
    .watch_close = dir_watch_close,
    .close = d_close,
    .health = dir_health,
};

static int take_owner_lock(struct dir_store *s, struct err *e)
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

/* The store's own temporary names: file_temp_create's (object files, the journal) and the
 * spares of file_write_atomic_reuse and file_write_atomic_grouped. */
static bool store_temp_name(const char *name)
{
	return file_temp_name(name) || file_spare_name(name);
}

/* Removes the temporary files of writes that a killed process never finished (store_temp_name,
 * regular files only) in dir and `depth` levels of directories below it (never through a
 * symlink). */
static void sweep_temps(const char *dir, int depth)
{
	file_remove_temps(dir, store_temp_name);
	DIR *d = depth > 0 ? opendir(dir) : NULL;
	struct dirent *de;
	struct stat st;
	char p[PATH_MAX];
	while (d && (de = readdir(d)) != NULL) {
		const char *n = de->d_name;
		if (n[0] != '.' && fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode) && snprintf(p, sizeof(p), "%s/%s", dir, n) < (int)sizeof(p))
			sweep_temps(p, depth - 1);
	}
	if (d)
		closedir(d);
}

/* The owner's sweep at open: under the operation lock, which every writer holds for its whole
 * write, a temporary file belongs to no write in progress. */
static int sweep_unfinished(struct dir_store *s, struct err *e)
{
	int fd = dir_oplock(s, LOCK_EX, e);
	if (fd < 0)
		return fd;
	sweep_temps(s->path, 2); /* PATH, PATH/<plural>, PATH/<plural>/<namespace> */
	dir_opunlock(fd);
	return 0;
}

int store_dir_open(const char *path, bool owner, int poll_ms, store **out, struct err *e)
{
	struct dir_store *s;
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
	s->ino_fd = -1;
	s->wake_fd = -1;
	read_boot_id(s);
	s->poll_ms = poll_ms > 0 ? poll_ms : 1000;
	s->path = strdup(path);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	pthread_cond_init(&s->flight_cv, NULL);
	s->op_fd = -1;
	s->op_keep = -1;
	for (int i = 0; i < MAX_KINDS; i++)
		pthread_cond_init(&s->kind_cv[i], NULL);
	if (!s->path) {
		d_close(&s->base);
		return err_set(e, -ENOMEM, "store: out of memory");
	}
	if (owner && ((r = take_owner_lock(s, e)) < 0 || (r = sweep_unfinished(s, e)) < 0)) {
		d_close(&s->base);
		return r;
	}
	if ((r = dir_journal_open(s, owner, e)) < 0) { /* a corrupt journal too */
		d_close(&s->base);
		return r;
	}
	if ((r = dir_rv_last(s, &rv, e)) < 0) { /* a corrupt counter stops us here, loudly */
		d_close(&s->base);
		return r;
	}
	if (owner) {
		pthread_mutex_lock(&s->mu);
		r = dir_index_start(s, e);
		pthread_mutex_unlock(&s->mu);
		if (r < 0) {
			d_close(&s->base);
			return r;
		}
	}
	*out = &s->base;
	return 0;
}
