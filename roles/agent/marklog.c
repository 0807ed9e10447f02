/* The fencing marks' write-ahead journal (marklog.h). */
#include "agent/marklog.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/journal.h"
#include "base/log.h"

#define MARKLOG_REGION (1u << 20) /* 2 MiB on disk; a checkpoint every ~128 marks */
#define TAG_MARK       1u
#define SLOTS          32

static struct {
	pthread_mutex_t mu;      /* the open journal and its directory */
	pthread_rwlock_t apply;  /* shared by an append and its apply; a checkpoint's begin
	                          * takes it alone, so every appended entry is applied by then */
	pthread_mutex_t slot_mu; /* temporary names .spare.<slot> of generations/ in use */
	pthread_cond_t slot_cv;
	unsigned slots;
	journal *j;
	char dir[PATH_MAX];
	/* a checkpoint a write began: its sync and retirement on their own thread (syncer,
	 * joined under mu), so that no mark's call waits for the sync */
	atomic_bool syncing;
	bool syncer_joinable;
	pthread_t syncer;
	uint64_t ticket;
	/* agent_marklog_images: the pools' directories, synced by every checkpoint too */
	char **pools;
	size_t n_pools;
	agent_marklog_restore_fn restore;
	void *restore_arg;
} lg = {.mu = PTHREAD_MUTEX_INITIALIZER,
        .apply = PTHREAD_RWLOCK_INITIALIZER,
        .slot_mu = PTHREAD_MUTEX_INITIALIZER,
        .slot_cv = PTHREAD_COND_INITIALIZER};

/* generations/ made to exist durably (its entry in the state directory fsync'd) once per
 * process, and again whenever it is made anew. */
static struct file_dir_once marks_dir = FILE_DIR_ONCE_INIT;

/* agent_marklog_hold's depth in this thread */
static _Thread_local unsigned held;

static int slot_take(void)
{
	int slot = 0;
	pthread_mutex_lock(&lg.slot_mu);
	while (lg.slots == (unsigned)((1ull << SLOTS) - 1))
		pthread_cond_wait(&lg.slot_cv, &lg.slot_mu);
	while (lg.slots & (1u << slot))
		slot++;
	lg.slots |= 1u << slot;
	pthread_mutex_unlock(&lg.slot_mu);
	return slot;
}

static void slot_give(int slot)
{
	pthread_mutex_lock(&lg.slot_mu);
	lg.slots &= ~(1u << slot);
	pthread_cond_signal(&lg.slot_cv);
	pthread_mutex_unlock(&lg.slot_mu);
}

/* Writes generations/<name> (temp .spare.<slot>, rename), no fsync: the journal holds it. */
static int apply(const char *state_dir, const char *name, const void *data, size_t len,
                 struct err *e)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	int r = 0, slot;
	if (!*name || strchr(name, '/') || name[0] == '.')
		return err_set(e, -EBADMSG,
		               "journal %s/" AGENT_MARKLOG_FILE " names no mark: \"%s\"", state_dir,
		               name);
	if (snprintf(path, sizeof(path), "%s/generations/%s", state_dir, name) >= (int)sizeof(path))
		return err_set(e, -ENAMETOOLONG, "state path too long");
	slot = slot_take();
	snprintf(tmp, sizeof(tmp), "%s/generations/" FILE_SPARE ".%d", state_dir, slot);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		r = -errno;
	for (const char *p = data; r == 0 && len > 0;) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno != EINTR)
			r = -errno;
		else if (w > 0)
			p += w, len -= (size_t)w;
	}
	if (r == 0 && fchmod(fd, 0600) < 0)
		r = -errno;
	if (fd >= 0 && close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	slot_give(slot);
	if (r < 0)
		return err_set(e, r, "write %s: %s%s", path, strerror(-r),
		               r == -ENOSPC   ? " (ENOSPC)"
		               : r == -EDQUOT ? " (EDQUOT)"
		                              : "");
	return 0;
}

static int replay_one(void *arg, uint64_t seq, const struct journal_entry *en, struct err *e)
{
	(void)seq;
	if (en->tag != TAG_MARK)
		return err_set(e, -EBADMSG,
		               "journal %s/" AGENT_MARKLOG_FILE " holds an entry of tag %u",
		               (const char *)arg, en->tag);
	return apply(arg, en->name, en->data, en->len, e);
}

static int syncfs_of(const char *dir, struct err *e)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return err_set(e, -errno, "open directory %s: %s", dir, strerror(errno));
	int r = file_syncfs(fd, dir);
	close(fd);
	return r < 0 ? err_set(e, r, "syncfs %s: %s", dir, strerror(-r)) : 0;
}

/* The checkpoint's sync: the state directory's filesystem (the marks and the journal), and
 * each pool's (the names of the images the retired marks record). */
static int sync_state(void *arg, struct err *e)
{
	int r = syncfs_of(arg, e);
	for (size_t i = 0; r == 0 && i < lg.n_pools; i++)
		r = syncfs_of(lg.pools[i], e);
	return r;
}

static int restore_one(void *arg, uint64_t seq, const struct journal_entry *en, struct err *e)
{
	(void)arg;
	(void)seq;
	(void)e;
	lg.restore(lg.restore_arg, en->name);
	return 0;
}

/* A checkpoint of j (lg.dir's): begin with no apply in flight, syncfs, end; an earlier one
 * that never completed is completed first. */
static int checkpoint(journal *j, struct err *e)
{
	for (int i = 0; i < 2; i++) {
		uint64_t ticket;
		pthread_rwlock_wrlock(&lg.apply);
		int r = journal_checkpoint_begin(j, &ticket, e);
		pthread_rwlock_unlock(&lg.apply);
		if (r < 0 || !ticket)
			return r < 0 ? r : 0;
		int s = sync_state(lg.dir, e);
		if (s == 0)
			s = journal_checkpoint_end(j, ticket, e);
		if (s < 0 || r == 1)
			return s;
	}
	return 0;
}

static void *sync_main(void *arg)
{
	journal *j = arg;
	/* lg.dir and lg.pools stay until the close, which joins this thread first */
	struct err e = {0};
	int r = sync_state(lg.dir, &e);
	if (r == 0)
		r = journal_checkpoint_end(j, lg.ticket, &e);
	if (r < 0) /* completed by the next checkpoint's beginning */
		log_warn("fencing marks' journal checkpoint failed", "error", e.msg);
	atomic_store(&lg.syncing, false);
	return NULL;
}

static void syncer_join(void)
{
	if (lg.syncer_joinable)
		pthread_join(lg.syncer, NULL);
	lg.syncer_joinable = false;
}

/* A checkpoint of the open journal, when due, begun here (the regions switched: no sync)
 * and finished by the syncer.  Not by a thread that holds the journal (agent_marklog_hold).
 * The order of the locks is apply, then mu, as a holder's (its hold, then its mark's open). */
static void checkpoint_behind(void)
{
	if (atomic_exchange(&lg.syncing, true))
		return; /* one at a time: the running one's end, the next write's beginning */
	pthread_rwlock_wrlock(&lg.apply);
	pthread_mutex_lock(&lg.mu);
	int r = -1;
	journal *j = lg.j;
	if (j && journal_should_checkpoint(j)) {
		syncer_join();
		r = journal_checkpoint_begin(j, &lg.ticket, NULL);
	}
	pthread_rwlock_unlock(&lg.apply);
	if (r >= 0 && lg.ticket && pthread_create(&lg.syncer, NULL, sync_main, j) == 0)
		lg.syncer_joinable = true;
	else if (r >= 0 && lg.ticket) /* no thread: here, as a last resort */
		sync_main(j);
	else
		atomic_store(&lg.syncing, false);
	pthread_mutex_unlock(&lg.mu);
}

static void close_locked(bool ckpt)
{
	syncer_join();
	if (!lg.j)
		return;
	if (ckpt)
		checkpoint(lg.j, NULL);
	journal_close(lg.j);
	lg.j = NULL;
	lg.dir[0] = '\0';
}

int agent_marklog_open(const char *state_dir, struct err *e)
{
	char path[PATH_MAX], gdir[PATH_MAX + 16];
	int r = 0;
	pthread_mutex_lock(&lg.mu);
	if (lg.j && strcmp(lg.dir, state_dir) == 0)
		goto out;
	close_locked(false);
	if (snprintf(path, sizeof(path), "%s/" AGENT_MARKLOG_FILE, state_dir) >=
	        (int)sizeof(path) ||
	    strlen(state_dir) >= sizeof(lg.dir)) {
		r = err_set(e, -ENAMETOOLONG, "state path too long");
		goto out;
	}
	snprintf(gdir, sizeof(gdir), "%s/generations", state_dir);
	if ((r = file_dir_once_ensure(&marks_dir, gdir, 0750, e)) < 0 ||
	    (r = journal_open(path, MARKLOG_REGION, 0600, &lg.j, e)) < 0)
		goto out;
	snprintf(lg.dir, sizeof(lg.dir), "%s", state_dir);
	/* the marks first, all of them; then what they record, from the final marks */
	if (journal_pending(lg.j) &&
	    ((r = journal_replay(lg.j, 0, replay_one, lg.dir, e)) < 0 ||
	     (lg.restore && (r = journal_replay(lg.j, 0, restore_one, NULL, e)) < 0) ||
	     (r = checkpoint(lg.j, e)) < 0))
		close_locked(false);
out:
	pthread_mutex_unlock(&lg.mu);
	return r;
}

int agent_marklog_write(const char *state_dir, const char *name, const char *text, struct err *e)
{
	char gdir[PATH_MAX + 16];
	int r = agent_marklog_open(state_dir, e);
	snprintf(gdir, sizeof(gdir), "%s/generations", state_dir);
	if (r == 0)
		r = file_dir_once_ensure(&marks_dir, gdir, 0750, e);
	if (r < 0)
		return r;
	struct journal_entry en = {TAG_MARK, name, text, strlen(text)};
	journal *j = lg.j;
	for (int tries = 0;; tries++) {
		pthread_rwlock_rdlock(&lg.apply);
		r = journal_append(j, &en, 1, NULL, e);
		if (r == 0)
			r = apply(state_dir, name, text, strlen(text), e);
		pthread_rwlock_unlock(&lg.apply);
		if (r != JOURNAL_FULL || tries == 1)
			break;
		/* a holder's first mark: nothing of its own is pending, its hold waits */
		for (unsigned i = 0; i < held; i++)
			pthread_rwlock_unlock(&lg.apply);
		r = checkpoint(j, e);
		for (unsigned i = 0; i < held; i++)
			pthread_rwlock_rdlock(&lg.apply);
		if (r < 0)
			return r;
	}
	if (r == -ENOMEM) /* the agent's form for memory (svc_state_failed) */
		r = err_set(e, -ENOMEM, "write fencing mark %s/generations/%s: out of memory",
		            state_dir, name);
	if (r == 0 && !held && journal_should_checkpoint(j))
		checkpoint_behind(); /* the mark is durable; a failed checkpoint is retried later */
	return r;
}

int agent_marklog_hold(const char *state_dir, struct err *e)
{
	int r = agent_marklog_open(state_dir, e);
	if (r == 0) {
		pthread_rwlock_rdlock(&lg.apply);
		held++;
	}
	return r;
}

void agent_marklog_release(void)
{
	pthread_rwlock_unlock(&lg.apply);
	if (--held == 0)
		checkpoint_behind();
}

int agent_marklog_images(const char *const *dirs, size_t n, agent_marklog_restore_fn restore,
                         void *arg, struct err *e)
{
	int r = 0;
	pthread_mutex_lock(&lg.mu);
	syncer_join();
	for (size_t i = 0; i < lg.n_pools; i++)
		free(lg.pools[i]);
	free(lg.pools);
	lg.pools = n ? calloc(n, sizeof(*lg.pools)) : NULL;
	lg.n_pools = 0;
	if (n && !lg.pools)
		r = err_set(e, -ENOMEM, "fencing marks' journal: out of memory");
	for (size_t i = 0; r == 0 && i < n; i++) {
		if (!(lg.pools[i] = strdup(dirs[i])))
			r = err_set(e, -ENOMEM, "fencing marks' journal: out of memory");
		else
			lg.n_pools++;
	}
	lg.restore = restore;
	lg.restore_arg = arg;
	pthread_mutex_unlock(&lg.mu);
	return r;
}

void agent_marklog_close(bool ckpt)
{
	pthread_mutex_lock(&lg.mu);
	close_locked(ckpt);
	pthread_mutex_unlock(&lg.mu);
}

unsigned agent_marklog_waiting(void)
{
	pthread_mutex_lock(&lg.mu);
	unsigned n = lg.j ? journal_waiting(lg.j) : 0;
	pthread_mutex_unlock(&lg.mu);
	return n;
}
