/* The file backend's copies: reflink or sparse copy on a thread of its own, with progress and
 * cancellation (file_snap.c says what they are for). */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "base/file.h"
#include "base/time.h"

#define CHUNK (8 << 20) /* bytes between two looks at the cancel flag */

struct backend_copy {
	struct backend_copy *next;
	char src[4096], dst[4096], tmp[4200];
	mode_t mode;
	int64_t grow_to;
	_Atomic int64_t done, total;
	atomic_bool cancel;
	bool finished; /* under the list's lock */
	int result;
	struct err e;
	pthread_t thread;
	struct backend_copies *list;
	int out; /* the temporary file, made by the call that starts the copy */
};

struct backend_copies {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct backend_copy *head;
};

int backend_temp_name(const char *dst, char *out, size_t cap)
{
	const char *slash = strrchr(dst, '/');
	int n = slash ? snprintf(out, cap, "%.*s/.%s.tmp", (int)(slash - dst), dst, slash + 1)
	              : snprintf(out, cap, ".%s.tmp", dst);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* Copies [off, end) of in to out, CHUNK at a time, in the kernel where it can. */
static int copy_range(int in, int out, int64_t off, int64_t end, struct backend_copy *c)
{
	while (off < end) {
		if (atomic_load(&c->cancel))
			return err_set(&c->e, -ECANCELED, "copy to %s cancelled", c->dst);
		size_t want = (size_t)(end - off < CHUNK ? end - off : CHUNK);
		loff_t io = off, oo = off;
		ssize_t n = copy_file_range(in, &io, out, &oo, want, 0);
		if (n < 0 &&
		    (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
			char *mem = malloc(1 << 20);
			size_t part = want < (1 << 20) ? want : (1 << 20);
			n = mem ? pread(in, mem, part, off) : -1;
			if (n > 0 && pwrite(out, mem, (size_t)n, off) != n)
				n = -1;
			free(mem);
		}
		if (n < 0)
			return err_set(&c->e, -errno, "copy %s: %s", c->src, strerror(errno));
		if (n == 0)
			break; /* the source shrank */
		off += n;
		atomic_store(&c->done, off);
	}
	return 0;
}

/* Reflink, else the data extents one by one (holes stay holes). */
static int copy_data(int in, int out, struct backend_copy *c)
{
	int64_t total = atomic_load(&c->total), off = 0;
	if (ioctl(out, FICLONE, in) == 0) {
		atomic_store(&c->done, total);
		return 0;
	}
	while (off < total) {
		off_t data = lseek(in, off, SEEK_DATA), hole;
		if (data < 0 && errno == ENXIO)
			break; /* only a hole is left */
		if (data < 0)  /* no SEEK_DATA: everything is data */
			data = off, hole = total;
		else if ((hole = lseek(in, data, SEEK_HOLE)) < 0)
			hole = total;
		int r = copy_range(in, out, data, hole > total ? total : hole, c);
		if (r < 0)
			return r;
		off = hole;
	}
	atomic_store(&c->done, total);
	return 0;
}

static int run_copy(struct backend_copy *c)
{
	struct stat st;
	int in = open(c->src, O_RDONLY | O_CLOEXEC), out = c->out, r = 0;
	if (in < 0) {
		r = err_set(&c->e, errno == ENOENT ? -ENOENT : -errno, "open %s: %s", c->src,
		            strerror(errno));
		close(out);
		unlink(c->tmp);
		return r;
	}
	if (fstat(in, &st) < 0)
		r = err_set(&c->e, -errno, "stat %s: %s", c->src, strerror(errno));
	atomic_store(&c->total, (int64_t)st.st_size);
	if (r == 0)
		r = copy_data(in, out, c);
	if (r == 0 && ftruncate(out, c->grow_to > st.st_size ? c->grow_to : st.st_size) < 0)
		r = err_set(&c->e, errno == ENOSPC ? -ENOSPC : -errno, "truncate %s: %s", c->tmp,
		            strerror(errno));
	struct err we = {0};
	if (r == 0 && backend_file_write_through(out, c->tmp, &we) < 0)
		r = err_set(&c->e, we.code, "%s", we.msg);
	if (r == 0 &&
	    (fchmod(out, c->mode) < 0 || futimens(out, NULL) < 0 || file_fsync(out, c->tmp) < 0))
		r = err_set(&c->e, -errno, "write %s: %s", c->tmp, strerror(errno));
	close(out);
	close(in);
	if (r == 0 && rename(c->tmp, c->dst) < 0)
		r = err_set(&c->e, -errno, "rename %s: %s", c->tmp, strerror(errno));
	if (r == 0) {
		char dir[4096];
		const char *slash = strrchr(c->dst, '/');
		snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - c->dst) : 1,
		         slash ? c->dst : ".");
		return file_fsync_dir(dir, &c->e);
	}
	unlink(c->tmp);
	return r == -ENOSPC || r == -EDQUOT ? err_set(&c->e, -ENOSPC, "%s", c->e.msg) : r;
}

static void *copy_thread(void *arg)
{
	struct backend_copy *c = arg;
	int r = run_copy(c);
	pthread_mutex_lock(&c->list->mu);
	c->result = r;
	c->finished = true;
	pthread_cond_broadcast(&c->list->cv);
	pthread_mutex_unlock(&c->list->mu);
	return NULL;
}

int backend_copies_new(struct backend_copies **out)
{
	struct backend_copies *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	pthread_mutex_init(&l->mu, NULL);
	time_cond_init_mono(&l->cv);
	*out = l;
	return 0;
}

static struct backend_copy *find(struct backend_copies *l, const char *dst)
{
	for (struct backend_copy *c = l->head; c; c = c->next)
		if (strcmp(c->dst, dst) == 0)
			return c;
	return NULL;
}

/* Takes a finished copy out of the list (lock held) and frees it after joining its thread
 * (lock released); its result, with its message in e. */
static int reap(struct backend_copies *l, struct backend_copy *c, struct err *e)
{
	for (struct backend_copy **p = &l->head; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	pthread_mutex_unlock(&l->mu);
	pthread_join(c->thread, NULL);
	int r = c->result;
	if (r < 0)
		err_set(e, r, "%s", c->e.msg);
	free(c);
	return r;
}

/* A new copy in the list, its thread started; NULL with *code and e set. */
static struct backend_copy *start(struct backend_copies *l, const char *src, const char *dst,
                                  mode_t mode, int64_t grow_to, int *code, struct err *e)
{
	struct backend_copy *c = calloc(1, sizeof(*c));
	if (!c) {
		*code = err_set(e, -ENOMEM, "out of memory");
		return NULL;
	}
	snprintf(c->src, sizeof(c->src), "%s", src);
	snprintf(c->dst, sizeof(c->dst), "%s", dst);
	c->mode = mode;
	c->grow_to = grow_to;
	c->list = l;
	if (backend_temp_name(dst, c->tmp, sizeof(c->tmp)) < 0) {
		*code = err_set(e, -EINVAL, "file name %s is too long", dst);
		free(c);
		return NULL;
	}
	/* made before the call returns, so that a delete finds the copy in the directory */
	c->out = open(c->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (c->out < 0) {
		*code = err_set(e, errno == ENOSPC ? -ENOSPC : -errno, "create %s: %s", c->tmp,
		                strerror(errno));
		free(c);
		return NULL;
	}
	int r = pthread_create(&c->thread, NULL, copy_thread, c);
	if (r) {
		*code = err_set(e, -r, "cannot start the copy to %s: %s", dst, strerror(r));
		close(c->out);
		unlink(c->tmp);
		free(c);
		return NULL;
	}
	c->next = l->head;
	l->head = c;
	return c;
}

int backend_file_copy(backend *b, const char *src, const char *dst, mode_t mode, int64_t grow_to,
                      struct err *e)
{
	struct backend_copies *l = b->copies;
	struct timespec until = time_after(CLOCK_MONOTONIC, b->copy_wait_ms);
	pthread_mutex_lock(&l->mu);
	struct backend_copy *c = find(l, dst);
	if (!c && access(dst, F_OK) == 0) {
		pthread_mutex_unlock(&l->mu);
		return 0; /* an earlier call finished it */
	}
	int r = 0;
	if (!c && !(c = start(l, src, dst, mode, grow_to, &r, e))) {
		pthread_mutex_unlock(&l->mu);
		return r;
	}
	while (!c->finished && pthread_cond_timedwait(&l->cv, &l->mu, &until) == 0)
		;
	if (c->finished)
		return reap(l, c, e);
	int64_t done = atomic_load(&c->done), total = atomic_load(&c->total);
	pthread_mutex_unlock(&l->mu);
	return err_set(e, -EINPROGRESS,
	               "copying %s to %s: %lld of %lld bytes (%lld%%); the copy goes on, retry to "
	               "finish",
	               src, dst, (long long)done, (long long)total,
	               total > 0 ? (long long)(done * 100 / total) : 0LL);
}

void backend_file_copy_cancel(backend *b, const char *dst)
{
	struct backend_copies *l = b->copies;
	char tmp[4200];
	pthread_mutex_lock(&l->mu);
	struct backend_copy *c = find(l, dst);
	if (c) {
		atomic_store(&c->cancel, true);
		while (!c->finished)
			pthread_cond_wait(&l->cv, &l->mu);
		reap(l, c, NULL);
	} else {
		pthread_mutex_unlock(&l->mu);
	}
	if (backend_temp_name(dst, tmp, sizeof(tmp)) == 0)
		unlink(tmp); /* one a killed agent left */
}

void backend_copies_free(struct backend_copies *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	while (l->head) {
		struct backend_copy *c = l->head;
		atomic_store(&c->cancel, true);
		while (!c->finished)
			pthread_cond_wait(&l->cv, &l->mu);
		reap(l, c, NULL);
		pthread_mutex_lock(&l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free(l);
}
