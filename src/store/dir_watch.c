/* store: change notification for the embedded store and its watches (dir_int.h).
 *
 * Other processes (the CLI, the node role) write object files directly.  The index learns of
 * their changes from inotify on every kind directory (and every namespace directory under a
 * namespaced kind): each notification names one file, which is compared with its entry
 * (dir_index_refresh), so the cost follows the number of changes, not the number of objects.
 * Pending notifications are applied before every operation of this process (under the
 * operation lock for writes, so events stay in resourceVersion order) and by a thread that
 * sleeps in poll(2) while watches are open.  A notification queue overflow, or inotify being
 * unavailable (no instances or watches left), falls back to a full rescan: on overflow once, in
 * the second case every poll_ms. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "base/file.h"
#include "base/json.h"
#include "base/time.h"
#include "store/dir_int.h"

#define WATCH_MASK                                                                           \
	(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE | IN_ONLYDIR | \
	 IN_DONT_FOLLOW)

/* ---- inotify watches ------------------------------------------------------------------------- */

static int add_wdir(struct dir_store *s, const struct store_kind *k, const char *prefix)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/%s", s->path, prefix);
	int wd = inotify_add_watch(s->ino_fd, dir, WATCH_MASK);
	if (wd < 0)
		return -errno;
	for (size_t i = 0; i < s->nwds; i++)
		if (s->wds[i].wd == wd)
			return 0; /* already watched */
	if (s->nwds == s->capwds) {
		size_t nc = s->capwds ? s->capwds * 2 : 16;
		struct wdir *v = realloc(s->wds, nc * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->wds = v;
		s->capwds = nc;
	}
	char *p = strdup(prefix);
	if (!p)
		return -ENOMEM;
	s->wds[s->nwds++] = (struct wdir){wd, k, p};
	return 0;
}

static struct wdir *find_wdir(struct dir_store *s, int wd)
{
	for (size_t i = 0; i < s->nwds; i++)
		if (s->wds[i].wd == wd)
			return &s->wds[i];
	return NULL;
}

static void drop_wdir(struct dir_store *s, struct wdir *w)
{
	free(w->prefix);
	*w = s->wds[--s->nwds];
}

/* Watches every kind directory (created here) and the namespace directories that exist. */
static int watch_all(struct dir_store *s)
{
	char dir[PATH_MAX];
	int r = 0;
	for (const struct store_kind *const *k = store_kinds(); *k && r == 0; k++) {
		snprintf(dir, sizeof(dir), "%s/%s", s->path, (*k)->plural);
		if ((r = file_mkdir_p(dir, 0755, NULL)) < 0 ||
		    (r = add_wdir(s, *k, (*k)->plural)) < 0)
			break;
		if (!(*k)->namespaced)
			continue;
		struct dirent *de;
		DIR *d = opendir(dir);
		while (d && (de = readdir(d)) != NULL && r == 0) {
			char prefix[PATH_MAX];
			if (de->d_name[0] == '.')
				continue;
			snprintf(prefix, sizeof(prefix), "%s/%s", (*k)->plural, de->d_name);
			r = add_wdir(s, *k, prefix);
		}
		if (d)
			closedir(d);
	}
	return r;
}

/* ---- applying notifications ------------------------------------------------------------------- */

struct keyset {
	char **v;
	size_t n, cap;
	bool overflow; /* lost notifications (or no memory to note one): rescan everything */
};

static void keyset_add(struct keyset *ks, const char *prefix, const char *name, size_t len)
{
	char key[PATH_MAX];
	if (ks->n == ks->cap) {
		size_t nc = ks->cap ? ks->cap * 2 : 16;
		char **v = realloc(ks->v, nc * sizeof(*v));
		if (!v) {
			ks->overflow = true;
			return;
		}
		ks->v = v;
		ks->cap = nc;
	}
	snprintf(key, sizeof(key), "%s/%.*s", prefix, (int)len, name);
	if (!(ks->v[ks->n] = strdup(key)))
		ks->overflow = true;
	else
		ks->n++;
}

static void keyset_free(struct keyset *ks)
{
	for (size_t i = 0; i < ks->n; i++)
		free(ks->v[i]);
	free(ks->v);
}

/* A namespace directory appeared: watch it, then look at what it already holds. */
static void new_ns_dir(struct dir_store *s, const struct store_kind *k, const char *prefix,
                       struct keyset *ks)
{
	char dir[PATH_MAX + 256];
	struct dirent *de;
	if (add_wdir(s, k, prefix) < 0) {
		ks->overflow = true;
		return;
	}
	snprintf(dir, sizeof(dir), "%s/%s", s->path, prefix);
	DIR *d = opendir(dir);
	while (d && (de = readdir(d)) != NULL) {
		size_t len = dir_object_name_len(de->d_name);
		if (len)
			keyset_add(ks, prefix, de->d_name, len);
	}
	if (d)
		closedir(d);
}

static void one_event(struct dir_store *s, const struct inotify_event *ev, struct keyset *ks)
{
	struct wdir *w = find_wdir(s, ev->wd);
	if (ev->mask & IN_Q_OVERFLOW) {
		ks->overflow = true;
		return;
	}
	if (!w)
		return;
	if (ev->mask & IN_IGNORED) { /* the directory went away */
		drop_wdir(s, w);
		return;
	}
	size_t len = ev->len ? strlen(ev->name) : 0;
	if (!len || ev->name[0] == '.')
		return; /* temporary files and the directory itself */
	if (ev->mask & IN_ISDIR) {
		if (w->kind->namespaced && !strchr(w->prefix, '/') &&
		    (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
			char prefix[PATH_MAX];
			snprintf(prefix, sizeof(prefix), "%s/%s", w->prefix, ev->name);
			new_ns_dir(s, w->kind, prefix, ks);
		}
		return;
	}
	if ((len = dir_object_name_len(ev->name)) &&
	    !(w->kind->namespaced && !strchr(w->prefix, '/')))
		keyset_add(ks, w->prefix, ev->name, len);
}

/* Reads every pending notification (the fd is non-blocking). */
static void drain(struct dir_store *s, struct keyset *ks)
{
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	for (;;) {
		ssize_t n = read(s->ino_fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			one_event(s, ev, ks);
			p += sizeof(*ev) + ev->len;
		}
	}
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* True when every file of ks is the one the index holds (s->mu held): this process's own
 * writes come back as notifications, and need neither the operation lock nor a read. */
static bool all_unchanged(struct dir_store *s, const struct keyset *ks)
{
	if (ks->overflow)
		return false;
	for (size_t i = 0; i < ks->n; i++)
		if (!dir_index_unchanged(s, ks->v[i]))
			return false;
	return true;
}

void dir_catch_up(struct dir_store *s, bool lock_held)
{
	struct keyset ks = {0};
	if (!s->indexed)
		return;
	if (s->ino_fd < 0)
		ks.overflow = true; /* no notification: compare everything */
	else
		drain(s, &ks);
	if (all_unchanged(s, &ks)) {
		keyset_free(&ks);
		return;
	}
	/* a write in flight holds the process's operation lock: another descriptor's would wait on it */
	int fd = lock_held || s->op_fd >= 0 ? -1 : dir_oplock(s, LOCK_SH, NULL);
	if (ks.overflow) {
		dir_index_refresh(s, store_kinds(), NULL, 0, true);
	} else {
		size_t k = 0; /* one look per file, however many notifications it had */
		qsort(ks.v, ks.n, sizeof(*ks.v), cmp_key);
		for (size_t i = 0; i < ks.n; i++) {
			if (k > 0 && strcmp(ks.v[k - 1], ks.v[i]) == 0)
				free(ks.v[i]);
			else
				ks.v[k++] = ks.v[i];
		}
		ks.n = k;
		dir_index_refresh(s, store_kinds(), ks.v, ks.n, true);
	}
	dir_opunlock(fd);
	keyset_free(&ks);
}

/* ---- the index's start, its thread and its end ----------------------------------------------- */

int dir_index_start(struct dir_store *s, struct err *e)
{
	if (s->indexed)
		return 0;
	int fd = dir_oplock(s, LOCK_SH, e);
	if (fd < 0)
		return fd;
	s->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (s->ino_fd >= 0 && watch_all(s) < 0) { /* out of watches: rescan every poll_ms */
		close(s->ino_fd);
		s->ino_fd = -1;
		for (size_t i = 0; i < s->nwds; i++)
			free(s->wds[i].prefix);
		s->nwds = 0;
	}
	dir_index_refresh(s, store_kinds(), NULL, 0, false); /* after the watches: nothing lost */
	if (dir_rv_last(s, &s->floor_rv, NULL) == 0 && s->floor_rv > s->index_rv)
		s->index_rv = s->floor_rv;
	dir_opunlock(fd);
	s->indexed = true;
	return 0;
}

static void *notify_main(void *arg)
{
	struct dir_store *s = arg;
	pthread_mutex_lock(&s->mu);
	while (!s->stopping) {
		struct pollfd p[2] = {{.fd = s->wake_fd, .events = POLLIN},
		                      {.fd = s->ino_fd, .events = POLLIN}};
		int n = s->ino_fd >= 0 ? 2 : 1, timeout = s->ino_fd >= 0 ? -1 : s->poll_ms;
		pthread_mutex_unlock(&s->mu);
		poll(p, (nfds_t)n, timeout);
		pthread_mutex_lock(&s->mu);
		if (!s->stopping && (s->watchers > 0 || s->ino_fd >= 0))
			dir_catch_up(s, false);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static int start_thread_locked(struct dir_store *s)
{
	if (s->thread_running)
		return 0;
	if (s->wake_fd < 0 && (s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		return -errno;
	if (pthread_create(&s->thread, NULL, notify_main, s) != 0)
		return -EAGAIN;
	s->thread_running = true;
	return 0;
}

void dir_notify_stop(struct dir_store *s)
{
	pthread_mutex_lock(&s->mu);
	s->stopping = true;
	pthread_cond_broadcast(&s->cv);
	for (int i = 0; i < MAX_KINDS; i++)
		pthread_cond_broadcast(&s->kind_cv[i]);
	pthread_mutex_unlock(&s->mu);
	if (s->thread_running) {
		uint64_t one = 1;
		if (write(s->wake_fd, &one, sizeof(one)) < 0) {
			/* the counter cannot overflow here; nothing else to do */
		}
		pthread_join(s->thread, NULL);
	}
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	if (s->ino_fd >= 0)
		close(s->ino_fd);
	for (size_t i = 0; i < s->nwds; i++)
		free(s->wds[i].prefix);
	free(s->wds);
}

/* ---- watches ----------------------------------------------------------------------------------- */

static int initial_of(struct dir_store *s, struct dir_store_watch *w, const struct store_kind *k)
{
	int ki = dir_kind_index(k);
	size_t n = 0;
	for (struct index_entry *en = ki >= 0 ? s->kinds[ki] : NULL; en; en = en->knext)
		n += en->obj != NULL;
	w->initial = calloc(n ? n : 1, sizeof(*w->initial));
	if (!w->initial)
		return -ENOMEM;
	for (struct index_entry *en = ki >= 0 ? s->kinds[ki] : NULL; en; en = en->knext)
		if (en->obj)
			w->initial[w->n_initial++] = store_blob_ref(en->obj);
	return 0;
}

static void watch_free(struct dir_store_watch *w)
{
	for (size_t i = 0; i < w->n_initial; i++)
		store_blob_put(w->initial[i]);
	free(w->initial);
	free(w);
}

int dir_watch(store *st, const struct store_kind *k, uint64_t from_rv, store_watch **out,
              struct err *e)
{
	struct dir_store *s = DS(st);
	struct dir_store_watch *w = calloc(1, sizeof(*w));
	int r = 0;

	*out = NULL;
	if (!w)
		return err_set(e, -ENOMEM, "watch: out of memory");
	w->base.ops = st->ops;
	w->s = s;
	w->kind = k;
	pthread_mutex_lock(&s->mu);
	if ((r = dir_index_start(s, e)) == 0) {
		dir_catch_up(s, false);
		if (from_rv == 0) {
			if ((r = initial_of(s, w, k)) < 0)
				err_set(e, r, "watch: out of memory");
			w->next_seq = s->next_seq;
		} else if (from_rv < s->floor_rv) {
			r = err_set(e, STORE_EXPIRED, "too old resource version: %llu (%llu)",
			            (unsigned long long)from_rv, (unsigned long long)s->floor_rv);
		} else {
			uint64_t q = s->first_seq;
			while (q < s->next_seq && s->ring[q % RING_CAP].rv <= from_rv)
				q++;
			w->next_seq = q;
		}
	}
	if (r == 0 && (r = start_thread_locked(s)) < 0)
		err_set(e, r, "watch: cannot start the notification thread");
	if (r == 0)
		s->watchers++;
	pthread_mutex_unlock(&s->mu);
	if (r < 0) {
		pthread_mutex_lock(&s->mu);
		watch_free(w);
		pthread_mutex_unlock(&s->mu);
		return r;
	}
	*out = &w->base;
	return 0;
}

int dir_watch_next(store_watch *bw, int timeout_ms, enum store_event_type *type, cJSON **obj,
                   struct err *e)
{
	struct dir_store_watch *w = (struct dir_store_watch *)bw;
	struct dir_store *s = w->s;
	struct timespec ts = time_after(CLOCK_REALTIME, timeout_ms);
	int r = 0, ki = dir_kind_index(w->kind);

	*obj = NULL;
	if (ki < 0)
		return err_set(e, -EINVAL, "watch: unknown kind");
	pthread_mutex_lock(&s->mu);
	if (w->initial_idx < w->n_initial) {
		*type = STORE_ADDED;
		r = store_blob_parse(w->initial[w->initial_idx++], obj, e);
		pthread_mutex_unlock(&s->mu);
		return r < 0 ? r : 1;
	}
	for (;;) {
		if (w->closed) {
			r = err_set(e, -ECANCELED, "watch closed");
			break;
		}
		if (w->next_seq < s->first_seq) { /* lost only if an event of its kind went */
			if (w->next_seq < s->kind_lost[ki]) {
				r = err_set(e, STORE_EXPIRED,
				            "watch fell behind: too many events; relist");
				break;
			}
			w->next_seq = s->first_seq;
		}
		while (w->next_seq < s->next_seq && s->ring[w->next_seq % RING_CAP].kind != w->kind)
			w->next_seq++;
		if (w->next_seq < s->next_seq) {
			struct event *ev = &s->ring[w->next_seq % RING_CAP];
			*type = ev->type;
			w->next_seq++;
			r = store_blob_parse(ev->obj, obj, e);
			r = r < 0 ? r : 1;
			break;
		}
		if (pthread_cond_timedwait(&s->kind_cv[ki], &s->mu, &ts) == ETIMEDOUT) {
			r = 0;
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return r;
}

void dir_watch_close(store_watch *bw)
{
	struct dir_store_watch *w = (struct dir_store_watch *)bw;
	struct dir_store *s = w->s;
	pthread_mutex_lock(&s->mu);
	s->watchers--;
	watch_free(w);
	pthread_mutex_unlock(&s->mu);
}
