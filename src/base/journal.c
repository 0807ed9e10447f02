/* journal — the write-ahead journal (journal.h has the contract and the file format). */
#include "base/journal.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/file.h"

#define REGION_MAGIC 0x4e524a50u /* "PJRN" */
#define BATCH_MAGIC  0x424a5050u /* "PPJB" */
#define VERSION      1u

struct region_header {
	uint32_t magic, version;
	uint64_t first;
	uint32_t crc, zero;
};

struct batch_header {
	uint32_t magic, len;
	uint64_t seq;
	uint32_t count, crc;
};

#define HDR      sizeof(struct batch_header)
#define ENTRY    12u /* tag, name length, data length */
#define ALIGN(x) (((x) + JOURNAL_BLOCK - 1) / JOURNAL_BLOCK * JOURNAL_BLOCK)

struct region {
	bool valid;
	uint64_t first; /* sequence of its first batch */
	uint64_t next;  /* sequence of the batch after its chain */
	size_t tail;    /* offset in the region where the next batch goes */
};

struct waiter {
	struct waiter *next;
	char *buf; /* the encoded entries */
	size_t len;
	uint32_t count;
	int result;
	uint64_t seq;
	bool done;
	bool lazy; /* journal_append_lazy's: nobody waits; the journal frees it once written */
	struct err err;
};

struct journal {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int fd;
	char *path;
	size_t rsize;
	struct region reg[2];
	int active;
	struct waiter *queue, *queue_tail;
	unsigned waiting;
	unsigned lazy; /* lazy waiters queued, not yet written */
	bool writing;  /* a batch is being written and synced, or a checkpoint switches */
	/* Region headers are written without a sync of their own: the next fdatasync of the file
	 * (an append's) or the checkpoint user's sync makes them durable.  Each header write takes
	 * a number (writes); durable is the highest one known to have reached the disk. */
	uint64_t writes, durable;
	uint64_t header_write[2]; /* the number of each region's last header write */
};

/* ---- file access ------------------------------------------------------------------------------- */

static int pread_all(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;
	while (len > 0) {
		ssize_t n = pread(fd, p, len, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* the file is its full size from creation on */
		p += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

static int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = pwrite(fd, p, len, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

static off_t region_base(const journal *j, int r)
{
	return (off_t)r * (off_t)j->rsize;
}

static uint32_t region_crc(const struct region_header *h)
{
	struct region_header c = *h;
	c.crc = 0;
	return crc32c(0, &c, sizeof(c));
}

/* The region's header: 1 valid (*first), 0 retired or damaged, or a negative errno. */
static int header_read(journal *j, int r, uint64_t *first)
{
	struct region_header h;
	int rc = pread_all(j->fd, &h, sizeof(h), region_base(j, r));
	if (rc < 0)
		return rc;
	if (h.magic != REGION_MAGIC || h.version != VERSION || h.first == 0 ||
	    h.crc != region_crc(&h))
		return 0;
	*first = h.first;
	return 1;
}

/* Writes region r's header (first 0: retired) without a sync (j->writing set or mu held). */
static int header_write(journal *j, int r, uint64_t first, struct err *e)
{
	struct region_header h = {0};
	if (first) {
		h = (struct region_header){
		    .magic = REGION_MAGIC, .version = VERSION, .first = first};
		h.crc = region_crc(&h);
	}
	int rc = pwrite_all(j->fd, &h, sizeof(h), region_base(j, r));
	return rc < 0 ? err_set(e, rc, "write journal %s: %s", j->path, strerror(-rc)) : 0;
}

/* mu held: the number of a header write just made to region r. */
static void header_written(journal *j, int r)
{
	j->header_write[r] = ++j->writes;
}

/* The batch at offset off of region r: 1 intact (*h, and *payload malloc'd when payload is not
 * NULL), 0 not, or a negative errno. */
static int batch_read(journal *j, int r, size_t off, struct batch_header *h, char **payload)
{
	if (off + HDR > j->rsize)
		return 0;
	int rc = pread_all(j->fd, h, HDR, region_base(j, r) + (off_t)off);
	if (rc < 0)
		return rc;
	if (h->magic != BATCH_MAGIC || h->len > j->rsize - off - HDR)
		return 0;
	char *p = malloc(h->len ? h->len : 1);
	if (!p)
		return -ENOMEM;
	if ((rc = pread_all(j->fd, p, h->len, region_base(j, r) + (off_t)(off + HDR))) < 0) {
		free(p);
		return rc;
	}
	struct batch_header c = *h;
	c.crc = 0;
	bool ok = crc32c(crc32c(0, &c, HDR), p, h->len) == h->crc;
	if (ok && payload)
		*payload = p;
	else
		free(p);
	return ok;
}

/* Follows region r's chain from its tail (the state in j->reg[r] is where it stopped). */
static int chain_follow(journal *j, int r)
{
	struct region *g = &j->reg[r];
	struct batch_header h;
	int rc;
	while ((rc = batch_read(j, r, g->tail, &h, NULL)) == 1 && h.seq == g->next) {
		g->tail = ALIGN(g->tail + HDR + h.len);
		g->next++;
	}
	return rc < 0 ? rc : 0;
}

/* Region r from its header on: its chain, and the check that what ends the chain is a torn tail
 * (no intact batch of this cycle after it), else -EBADMSG naming the file. */
static int region_scan(journal *j, int r, struct err *e)
{
	struct region *g = &j->reg[r];
	struct batch_header h;
	uint64_t first = 0;
	int rc = header_read(j, r, &first);
	*g = (struct region){.valid = rc == 1, .first = rc == 1 ? first : 0};
	if (rc <= 0)
		return rc < 0 ? err_set(e, rc, "read journal %s: %s", j->path, strerror(-rc)) : 0;
	g->tail = JOURNAL_BLOCK;
	g->next = g->first;
	if ((rc = chain_follow(j, r)) < 0)
		return err_set(e, rc, "read journal %s: %s", j->path, strerror(-rc));
	for (size_t off = g->tail; off + HDR <= j->rsize; off += JOURNAL_BLOCK) {
		if ((rc = batch_read(j, r, off, &h, NULL)) < 0)
			return err_set(e, rc, "read journal %s: %s", j->path, strerror(-rc));
		if (rc == 1 && h.seq >= g->first)
			return err_set(e, -EBADMSG,
			               "journal %s is corrupt at offset %lld: batch %llu there or "
			               "before it is damaged and an intact batch (%llu) follows",
			               j->path, (long long)(region_base(j, r) + (off_t)g->tail),
			               (unsigned long long)g->next, (unsigned long long)h.seq);
	}
	return 0;
}

static int scan(journal *j, struct err *e)
{
	int rc;
	for (int r = 0; r < 2; r++)
		if ((rc = region_scan(j, r, e)) < 0)
			return rc;
	if (!j->reg[0].valid && !j->reg[1].valid)
		return err_set(e, -EBADMSG,
		               "journal %s is corrupt: neither region has a valid header", j->path);
	if (j->reg[0].valid && j->reg[1].valid && j->reg[0].first == j->reg[1].first)
		return err_set(e, -EBADMSG, "journal %s is corrupt: both regions start at %llu",
		               j->path, (unsigned long long)j->reg[0].first);
	j->active = !j->reg[0].valid || (j->reg[1].valid && j->reg[1].first > j->reg[0].first);
	for (int r = 0; r < 2; r++)
		header_written(j, r); /* read from the page cache: maybe not durable yet */
	return 0;
}

/* ---- open / close ------------------------------------------------------------------------------ */

/* A new journal at path: written in full under a temporary name, then renamed durably. */
static int create(const char *path, size_t rsize, mode_t mode, struct err *e)
{
	char tmp[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int fd = file_temp_create(path, mode, tmp, sizeof(tmp)), rc = 0;
	if (fd == -ENAMETOOLONG)
		return err_set(e, fd, "journal path too long: %s", path);
	if (fd < 0)
		return err_set(e, fd, "create journal %s: %s", path, strerror(-fd));
	static const char zeros[65536];
	struct region_header h = {.magic = REGION_MAGIC, .version = VERSION, .first = 1};
	h.crc = region_crc(&h);
	for (size_t off = 0; rc == 0 && off < 2 * rsize; off += sizeof(zeros))
		rc = pwrite_all(fd, zeros,
		                sizeof(zeros) < 2 * rsize - off ? sizeof(zeros) : 2 * rsize - off,
		                (off_t)off);
	if (rc == 0)
		rc = pwrite_all(fd, &h, sizeof(h), 0);
	if (rc == 0)
		rc = file_fsync(fd, tmp);
	close(fd);
	if (rc == 0 && renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) < 0)
		rc = errno == EEXIST ? 1 : -errno; /* 1: another process made it first */
	if (rc != 0) {
		unlink(tmp);
		if (rc == 1)
			return 0;
		return err_set(e, rc, "create journal %s: %s%s", path, strerror(-rc),
		               rc == -ENOSPC ? " (ENOSPC)" : "");
	}
	if (!slash)
		return file_fsync_dir(".", e);
	snprintf(tmp, sizeof(tmp), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	return file_fsync_dir(tmp, e);
}

int journal_open(const char *path, size_t region_size, mode_t mode, journal **out, struct err *e)
{
	struct stat st;
	int rc;
	*out = NULL;
	if (!region_size)
		region_size = JOURNAL_REGION_DEFAULT;
	if (region_size % JOURNAL_BLOCK || region_size < JOURNAL_REGION_MIN ||
	    region_size > (size_t)1 << 30)
		return err_set(e, -EINVAL,
		               "journal %s: region size %zu is not a multiple of %u "
		               "between %u and 1 GiB",
		               path, region_size, JOURNAL_BLOCK, JOURNAL_REGION_MIN);
	if (stat(path, &st) < 0) {
		if (errno != ENOENT)
			return err_set(e, -errno, "stat journal %s: %s", path, strerror(errno));
		if ((rc = create(path, region_size, mode, e)) < 0)
			return rc;
	}
	journal *j = calloc(1, sizeof(*j));
	if (!j || !(j->path = strdup(path))) {
		free(j);
		return err_set(e, -ENOMEM, "journal %s: out of memory", path);
	}
	pthread_mutex_init(&j->mu, NULL);
	pthread_cond_init(&j->cv, NULL);
	j->fd = open(path, O_RDWR | O_CLOEXEC);
	if (j->fd < 0) {
		rc = err_set(e, -errno, "open journal %s: %s", path, strerror(errno));
	} else if (fstat(j->fd, &st) < 0) {
		rc = err_set(e, -errno, "stat journal %s: %s", path, strerror(errno));
	} else if (!S_ISREG(st.st_mode) || st.st_size % (2 * JOURNAL_BLOCK) ||
	           st.st_size < 2 * JOURNAL_REGION_MIN) {
		rc = err_set(e, -EBADMSG, "journal %s is corrupt: its size %lld is not two regions",
		             path, (long long)st.st_size);
	} else {
		j->rsize = (size_t)st.st_size / 2;
		rc = scan(j, e);
	}
	if (rc < 0) {
		journal_close(j);
		return rc;
	}
	*out = j;
	return 0;
}

void journal_close(journal *j)
{
	if (!j)
		return;
	if (j->fd >= 0)
		close(j->fd);
	for (struct waiter *w = j->queue, *next; w; w = next) { /* only lazy ones are left */
		next = w->next;
		free(w->buf);
		free(w);
	}
	pthread_mutex_destroy(&j->mu);
	pthread_cond_destroy(&j->cv);
	free(j->path);
	free(j);
}

/* ---- append (group commit) -------------------------------------------------------------------- */

static int encode(journal *j, const struct journal_entry *en, size_t n, struct waiter *w,
                  struct err *e)
{
	size_t len = 0, cap = j->rsize - JOURNAL_BLOCK - HDR;
	if (n == 0)
		return err_set(e, -EINVAL, "journal %s: a batch needs an entry", j->path);
	for (size_t i = 0; i < n; i++) {
		size_t nl = en[i].name ? strlen(en[i].name) : 0;
		if (!nl || (en[i].len && !en[i].data))
			return err_set(e, -EINVAL, "journal %s: an entry needs a name and its data",
			               j->path);
		if (nl > cap || en[i].len > cap || len + ENTRY + nl + en[i].len > cap)
			return err_set(e, JOURNAL_FULL,
			               "journal %s: %zu entries do not fit a region "
			               "of %zu bytes",
			               j->path, n, j->rsize);
		len += ENTRY + nl + en[i].len;
	}
	if (n > UINT32_MAX || !(w->buf = malloc(len ? len : 1)))
		return err_set(e, -ENOMEM, "journal %s: out of memory", j->path);
	char *p = w->buf;
	for (size_t i = 0; i < n; i++) {
		uint32_t f[3] = {en[i].tag, (uint32_t)strlen(en[i].name), (uint32_t)en[i].len};
		memcpy(p, f, ENTRY);
		memcpy(p + ENTRY, en[i].name, f[1]);
		if (f[2])
			memcpy(p + ENTRY + f[1], en[i].data, f[2]);
		p += ENTRY + f[1] + f[2];
	}
	w->len = len;
	w->count = (uint32_t)n;
	return 0;
}

/* After a batch: its lazy waiters that were written are freed; those that were not (it failed,
 * or they did not fit) go back to the front of the queue, in order, for the next batch (mu
 * held). */
static void lazy_settle(journal *j, struct waiter *take)
{
	struct waiter *head = NULL, *last = NULL, *next;
	for (struct waiter *w = take; w; w = next) {
		next = w->next;
		if (w->lazy && w->result == 0) {
			j->lazy--;
			free(w->buf);
			free(w);
		} else if (w->lazy) {
			*w = (struct waiter){
			    .buf = w->buf, .len = w->len, .count = w->count, .lazy = 1};
			*(last ? &last->next : &head) = w;
			last = w;
		}
	}
	if (head && !(last->next = j->queue))
		j->queue_tail = last;
	if (head)
		j->queue = head;
}

/* The leader (mu held, j->writing set): writes every queued waiter that fits as one batch and
 * syncs it, the mutex let go meanwhile. */
static void lead(journal *j)
{
	struct region *g = &j->reg[j->active];
	struct waiter *take = j->queue, *w;
	size_t len = 0;
	uint32_t count = 0;
	bool full = false;
	j->queue = j->queue_tail = NULL;
	j->waiting = 0;
	for (w = take; w; w = w->next) {
		/* once one does not fit, none after it goes: the order of the entries stays */
		if (full || g->tail + HDR + len + w->len > j->rsize) {
			full = true;
			w->result = err_set(&w->err, JOURNAL_FULL,
			                    "journal %s is full: checkpoint "
			                    "first",
			                    j->path);
			continue;
		}
		len += w->len;
		count += w->count;
	}
	char *buf = count || len ? malloc(HDR + len) : NULL;
	int rc = count || len ? (buf ? 0 : -ENOMEM) : 1;
	struct batch_header h = {
	    .magic = BATCH_MAGIC, .len = (uint32_t)len, .seq = g->next, .count = count};
	size_t at = g->tail;
	if (rc == 0) {
		size_t p = HDR;
		for (w = take; w; w = w->next)
			if (w->result == 0 && w->len) {
				memcpy(buf + p, w->buf, w->len);
				p += w->len;
			}
		h.crc = crc32c(crc32c(0, &h, HDR), buf + HDR, len);
		memcpy(buf, &h, HDR);
		uint64_t upto = j->writes; /* header writes this fdatasync makes durable */
		pthread_mutex_unlock(&j->mu);
		rc = pwrite_all(j->fd, buf, HDR + len, region_base(j, j->active) + (off_t)at);
		if (rc == 0)
			rc = file_fdatasync(j->fd, j->path);
		pthread_mutex_lock(&j->mu);
		free(buf);
		if (rc == 0 && upto > j->durable)
			j->durable = upto;
	}
	if (rc == 0) {
		g->tail = ALIGN(at + HDR + len);
		g->next++;
	}
	for (w = take; w; w = w->next) {
		if (w->result == 0 && rc < 0)
			w->result = err_set(&w->err, rc, "write journal %s: %s%s", j->path,
			                    strerror(-rc), rc == -ENOSPC ? " (ENOSPC)" : "");
		w->seq = h.seq;
		w->done = true;
	}
	lazy_settle(j, take);
}

static void enqueue(journal *j, struct waiter *w)
{
	if (j->queue_tail)
		j->queue_tail->next = w;
	else
		j->queue = w;
	j->queue_tail = w;
}

/* Queues w and waits until a batch took it (mu not held). */
static void submit(journal *j, struct waiter *w)
{
	pthread_mutex_lock(&j->mu);
	enqueue(j, w);
	j->waiting++;
	while (!w->done) {
		if (j->writing) {
			pthread_cond_wait(&j->cv, &j->mu);
			continue;
		}
		j->writing = true;
		lead(j);
		j->writing = false;
		pthread_cond_broadcast(&j->cv);
	}
	pthread_mutex_unlock(&j->mu);
}

int journal_append(journal *j, const struct journal_entry *entries, size_t n, uint64_t *seq,
                   struct err *e)
{
	struct waiter w = {0};
	int rc = encode(j, entries, n, &w, e);
	if (rc < 0)
		return rc;
	submit(j, &w);
	free(w.buf);
	if (w.result < 0) {
		if (e)
			*e = w.err;
		return w.result;
	}
	if (seq)
		*seq = w.seq;
	return 0;
}

int journal_append_lazy(journal *j, const struct journal_entry *entries, size_t n, struct err *e)
{
	struct waiter *w = calloc(1, sizeof(*w));
	if (!w)
		return err_set(e, -ENOMEM, "journal %s: out of memory", j->path);
	int rc = encode(j, entries, n, w, e);
	if (rc < 0) {
		free(w);
		return rc;
	}
	w->lazy = true;
	pthread_mutex_lock(&j->mu);
	enqueue(j, w);
	j->lazy++;
	pthread_mutex_unlock(&j->mu);
	return 0;
}

int journal_flush(journal *j, struct err *e)
{
	pthread_mutex_lock(&j->mu);
	bool none = j->lazy == 0;
	pthread_mutex_unlock(&j->mu);
	if (none)
		return 0;
	/* no entries of its own: its batch holds the lazy ones queued before it, and when one of
	 * those is not written (the batch failed, or they did not fit) neither is this waiter */
	struct waiter w = {0};
	submit(j, &w);
	if (w.result < 0 && e)
		*e = w.err;
	return w.result;
}

bool journal_lazy_pending(journal *j)
{
	pthread_mutex_lock(&j->mu);
	bool b = j->lazy > 0;
	pthread_mutex_unlock(&j->mu);
	return b;
}

uint64_t journal_active_first(journal *j)
{
	pthread_mutex_lock(&j->mu);
	uint64_t s = j->reg[j->active].first;
	pthread_mutex_unlock(&j->mu);
	return s;
}

/* ---- replay ------------------------------------------------------------------------------------ */

/* Hands the entries of one batch's payload to fn. */
static int replay_batch(journal *j, uint64_t seq, const char *p, size_t len, uint32_t count,
                        journal_replay_fn fn, void *arg, struct err *e)
{
	for (uint32_t i = 0; i < count; i++) {
		uint32_t f[3];
		if (len < ENTRY)
			goto bad;
		memcpy(f, p, ENTRY);
		if (f[1] == 0 || f[1] > len - ENTRY || f[2] > len - ENTRY - f[1])
			goto bad;
		char *name = strndup(p + ENTRY, f[1]);
		if (!name)
			return err_set(e, -ENOMEM, "journal %s: out of memory", j->path);
		if (strlen(name) != f[1]) {
			free(name);
			goto bad;
		}
		struct journal_entry en = {f[0], name, f[2] ? p + ENTRY + f[1] : NULL, f[2]};
		int rc = fn(arg, seq, &en, e);
		free(name);
		if (rc)
			return rc;
		p += ENTRY + f[1] + f[2];
		len -= ENTRY + f[1] + f[2];
	}
	if (len == 0)
		return 0;
bad:
	return err_set(e, -EBADMSG, "journal %s is corrupt: batch %llu does not hold %u entries",
	               j->path, (unsigned long long)seq, count);
}

int journal_replay(journal *j, uint64_t after, journal_replay_fn fn, void *arg, struct err *e)
{
	int rc = 0;
	pthread_mutex_lock(&j->mu);
	int order[2] = {!j->active, j->active};
	for (int i = 0; i < 2 && rc == 0; i++) {
		int r = order[i];
		struct region g = j->reg[r];
		size_t off = JOURNAL_BLOCK;
		if (!g.valid)
			continue;
		for (uint64_t seq = g.first; seq < g.next && rc == 0; seq++) {
			struct batch_header h;
			char *p = NULL;
			rc = batch_read(j, r, off, &h, &p);
			if (rc == 1 && h.seq != seq)
				rc = 0;
			if (rc <= 0) {
				free(p);
				rc = rc < 0 ? err_set(e, rc, "read journal %s: %s", j->path,
				                      strerror(-rc))
				            : err_set(e, -EBADMSG,
				                      "journal %s changed under its "
				                      "reader at batch %llu",
				                      j->path, (unsigned long long)seq);
				break;
			}
			rc = seq > after ? replay_batch(j, seq, p, h.len, h.count, fn, arg, e) : 0;
			free(p);
			off = ALIGN(off + HDR + h.len);
		}
	}
	pthread_mutex_unlock(&j->mu);
	return rc;
}

/* ---- multi-process and state ------------------------------------------------------------------- */

int journal_refresh(journal *j, struct err *e)
{
	int rc = 0;
	pthread_mutex_lock(&j->mu);
	for (int r = 0; r < 2 && rc == 0; r++) {
		uint64_t first = 0;
		int v = header_read(j, r, &first);
		if (v < 0)
			rc = err_set(e, v, "read journal %s: %s", j->path, strerror(-v));
		else if ((v == 1) != j->reg[r].valid || (v == 1 && first != j->reg[r].first))
			rc = 1; /* another process checkpointed */
	}
	if (rc == 1)
		rc = scan(j, e);
	else if (rc == 0 && (rc = chain_follow(j, j->active)) < 0)
		rc = err_set(e, rc, "read journal %s: %s", j->path, strerror(-rc));
	pthread_mutex_unlock(&j->mu);
	return rc;
}

uint64_t journal_last_seq(journal *j)
{
	pthread_mutex_lock(&j->mu);
	uint64_t s = j->reg[j->active].next - 1;
	pthread_mutex_unlock(&j->mu);
	return s;
}

bool journal_should_checkpoint(journal *j)
{
	pthread_mutex_lock(&j->mu);
	bool b = j->reg[j->active].tail > j->rsize / 2;
	pthread_mutex_unlock(&j->mu);
	return b;
}

static bool pending_locked(const journal *j)
{
	const struct region *a = &j->reg[j->active];
	return j->reg[!j->active].valid || a->next > a->first;
}

bool journal_pending(journal *j)
{
	pthread_mutex_lock(&j->mu);
	bool b = pending_locked(j);
	pthread_mutex_unlock(&j->mu);
	return b;
}

unsigned journal_waiting(journal *j)
{
	pthread_mutex_lock(&j->mu);
	unsigned n = j->waiting;
	pthread_mutex_unlock(&j->mu);
	return n;
}

/* ---- checkpoint -------------------------------------------------------------------------------- */

/* Region other made the active one, beginning at sequence first (mu held, j->writing set; mu
 * let go meanwhile).  Its retirement must be durable before its header is written again: a
 * header of an earlier cycle (still valid on disk) with this cycle's batches behind it reads
 * as a corrupt journal. */
static int switch_to(journal *j, int other, uint64_t first, struct err *e)
{
	bool retire_unsynced = j->header_write[other] > j->durable;
	uint64_t upto = j->writes;
	int rc = 0;
	pthread_mutex_unlock(&j->mu);
	if (retire_unsynced && (rc = file_fdatasync(j->fd, j->path)) < 0)
		rc = err_set(e, rc, "write journal %s: %s", j->path, strerror(-rc));
	if (rc == 0)
		rc = header_write(j, other, first, e);
	pthread_mutex_lock(&j->mu);
	if (retire_unsynced && rc == 0 && upto > j->durable)
		j->durable = upto;
	if (rc == 0)
		header_written(j, other);
	return rc;
}

int journal_checkpoint_begin(journal *j, uint64_t *ticket, struct err *e)
{
	int rc = 0;
	*ticket = 0;
	pthread_mutex_lock(&j->mu);
	while (j->writing)
		pthread_cond_wait(&j->cv, &j->mu);
	int other = !j->active;
	struct region *a = &j->reg[j->active];
	if (j->reg[other].valid) {
		*ticket = j->reg[other].first; /* an earlier checkpoint to complete */
	} else if (a->next > a->first) {
		j->writing = true; /* no append starts while the header is written */
		uint64_t first = a->next;
		rc = switch_to(j, other, first, e);
		j->writing = false;
		pthread_cond_broadcast(&j->cv);
		if (rc == 0) {
			*ticket = a->first;
			j->reg[other] = (struct region){true, first, first, JOURNAL_BLOCK};
			j->active = other;
			rc = 1;
		}
	}
	pthread_mutex_unlock(&j->mu);
	return rc;
}

int journal_checkpoint_end(journal *j, uint64_t ticket, struct err *e)
{
	int rc = 0;
	if (!ticket)
		return 0;
	pthread_mutex_lock(&j->mu);
	int other = !j->active;
	uint64_t first = 0;
	/* the user's sync made the active region's header durable, and every header write
	 * before it: only then may the retirement reach the disk */
	if (j->header_write[j->active] > j->durable)
		j->durable = j->header_write[j->active];
	int v = header_read(j, other, &first);
	if (v < 0) {
		rc = err_set(e, v, "read journal %s: %s", j->path, strerror(-v));
	} else if (v == 1 && first == ticket) {
		rc = header_write(j, other, 0, e);
		if (rc == 0) {
			header_written(j, other);
			j->reg[other].valid = false;
		}
	} else if (j->reg[other].first == ticket) {
		j->reg[other].valid = false; /* another process retired it */
	}
	pthread_mutex_unlock(&j->mu);
	return rc;
}

int journal_checkpoint(journal *j, int (*sync)(void *arg, struct err *e), void *arg, struct err *e)
{
	for (int i = 0; i < 2; i++) {
		uint64_t ticket;
		int rc = journal_checkpoint_begin(j, &ticket, e);
		if (rc < 0)
			return rc;
		if (!ticket)
			return 0;
		int r2 = sync(arg, e);
		if (r2 < 0)
			return r2;
		if ((r2 = journal_checkpoint_end(j, ticket, e)) < 0)
			return r2;
		if (rc == 1)
			return 0; /* switched: what was pending is retired */
	}
	return 0;
}
