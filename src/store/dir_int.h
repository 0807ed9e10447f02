/* store/dir_int — internal to the embedded store.
 *   dir.c        paths, locks, the resourceVersion counter, durable writes and the operations;
 *   dir_index.c  the in-memory index (one entry per object: its text, a store_blob shared by reference),
 *                the bounded event history, and bringing the index up to date with files;
 *   dir_watch.c  change notification (inotify) from other processes, its thread, and watches.
 * Everything in struct dir_store below `mu` is protected by it. */
#ifndef PILLAR_STORE_DIR_INT_H
#define PILLAR_STORE_DIR_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "base/file.h"
#include "base/journal.h"
#include "store/blob.h"
#include "store/store.h"

/* The event history keeps at most RING_CAP events and RING_BYTES of object text (an event
 * shares the text of its object version with the index while that version is current). */
#define RING_CAP   4096
#define RING_BYTES (2u << 20)
#define MAX_KINDS  24

/* What identifies the file content an entry was read from (a changed file changes one). */
struct file_identity {
	ino_t ino;
	off_t size;
	struct timespec mtime;
};

struct index_entry {
	struct index_entry *hnext;         /* hash chain */
	struct index_entry *kprev, *knext; /* the kind's list */
	char *key;                         /* plural/name or plural/ns/name */
	const struct store_kind *kind;
	unsigned kidx;
	struct store_blob *obj; /* NULL when the file is corrupt */
	char *corrupt;          /* the error naming the file, when it is */
	uint64_t rv;
	struct file_identity id;
	uint64_t jseq; /* the journal sequence of its last durable entry here (0: none) */
	bool seen;     /* mark during a full rescan */
};

struct event {
	uint64_t seq;
	uint64_t rv;
	const struct store_kind *kind;
	enum store_event_type type;
	struct store_blob *obj;
};

struct wdir { /* an inotify watch: a kind directory or a namespace directory under it */
	int wd;
	const struct store_kind *kind;
	char *prefix; /* plural or plural/ns: the key prefix of files there */
};

struct dir_store {
	store base;
	char *path;
	int owner_fd;
	int poll_ms; /* the full-rescan interval used only when inotify is unavailable */
	char boot_id[40];
	/* The ceiling PATH/resourceversion held when it had this identity (ceil_known), for the
	 * writes that issue versions (mu held): a stat, not a read, while the file is the same. */
	bool ceil_known;
	uint64_t ceil_cached;
	ino_t ceil_ino;
	off_t ceil_size;
	struct timespec ceil_mtime, ceil_ctime;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* stop */
	pthread_cond_t
	    kind_cv[MAX_KINDS]; /* a new event of the kind (watches wait on their kind's) */
	bool indexed;
	/* index */
	struct index_entry **buckets;
	size_t nbuckets, count;
	struct index_entry *kinds[MAX_KINDS];
	uint64_t index_rv; /* the highest version the index reflects */
	/* event history: ring[seq % RING_CAP] for seq in [first_seq, next_seq) */
	struct event ring[RING_CAP];
	uint64_t first_seq, next_seq;
	size_t ring_bytes;
	uint64_t floor_rv;             /* events with rv > floor_rv are all in the ring */
	uint64_t kind_lost[MAX_KINDS]; /* 1 + the seq of the kind's newest event dropped from it */
	/* change notification */
	int ino_fd, wake_fd;
	struct wdir *wds;
	size_t nwds, capwds;
	pthread_t thread;
	bool thread_running, stopping;
	int watchers;
	/* writes of an indexed store (dir_commit.c): in flight between the version they were
	 * issued and their publication, in version order; the process holds the operation lock
	 * (op_fd) while any is */
	struct flight *flight, *flight_tail;
	pthread_cond_t flight_cv;
	int op_fd;
	/* op_fd's descriptor of .oplock, opened by the first write and kept until the store
	 * closes (-1 before): a write takes and lets go of the lock with flock alone.  Only the
	 * group commit uses it (under mu, op_holders), so no two holders share its lock. */
	int op_keep;
	unsigned op_holders;
	unsigned op_batch; /* writes that joined since the process took the operation lock */
	/* the write-ahead journal (dir_journal.c); journal_unapplied: an entry may not be applied
	 * (no applied mark is left for the next lock holder) */
	journal *journal;
	atomic_bool journal_unapplied;
	bool checkpointing; /* a checkpoint of this process syncs (mu let go meanwhile) */
	/* the thread of an indexed store's checkpoint (dir_commit.c): it syncs and retires the
	 * old region holding a share of the operation lock, so no write waits for the sync */
	pthread_t checkpointer;
	bool checkpointer_joinable;
	uint64_t checkpoint_ticket;
	/* lazy writes (store_write_lazy, dir_commit.c): while lazy journal entries are queued the
	 * process holds a share of the operation lock for them (lazy_share, taken at lazy_since),
	 * and the flusher thread writes them at most STORE_LAZY_MS later (at once on flush_now) */
	bool lazy_share, flush_now, flusher_running, flusher_stop;
	bool lazy_flagged; /* .oplock holds this process's lazy flag (dir_journal_lazy_flag) */
	struct timespec lazy_since;
	pthread_t flusher;
	pthread_cond_t flush_cv;
};

struct flight {
	struct flight *next;
	const char *key;
	uint64_t rv;
	bool lazy;    /* its journal entry is a lazy one (store_write_lazy) */
	bool queued;  /* ... and was queued */
	uint64_t seq; /* the journal sequence of its durable entry */
};

struct dir_store_watch {
	store_watch base;
	struct dir_store *s;
	const struct store_kind *kind;
	uint64_t next_seq;
	struct store_blob **initial; /* delivered first as ADDED */
	size_t n_initial, initial_idx;
	bool closed;
};

#define DS(s) ((struct dir_store *)(s))

/* dir_plan.c: the object an operation stores, from the request and the stored object. */
enum dir_op { OP_CREATE, OP_UPDATE, OP_STATUS, OP_DELETE };
struct opreq {
	enum dir_op op;
	const cJSON *obj; /* create/update/status */
	const struct store_kind *kind;
	const char *ns, *name;
	const char *uid_pre, *rv_pre; /* delete */
	bool with_status;             /* create/update: obj's status too (store_*_with_status) */
	bool lazy;                    /* asked for a lazy write (store_write_lazy) */
	cJSON **out;
};
/* 0 with *next (NULL: remove the file), 1 when an update removed the last finalizer of a
 * deleted object (*next NULL, *q->out the final object), or an error. */
int dir_plan(struct opreq *q, const cJSON *cur, cJSON **next, struct err *e);
int dir_not_found(const struct store_kind *k, const char *name, struct err *e);
void dir_meta_set_rv(cJSON *obj, uint64_t rv);

/* dir.c */
int dir_rv_last(struct dir_store *s, uint64_t *rv, struct err *e); /* the last issued version */
/* Issues the next version (operation lock held through fd, s->mu held): persisted before use. */
int dir_rv_issue(struct dir_store *s, int fd, uint64_t *rv, struct err *e);
/* The stored object now: from the index (after catching up) or from its file (*cur NULL: none). */
int dir_current(struct dir_store *s, const char *key, const char *path, cJSON **cur, struct err *e);
/* next's text as stored at rv (its version set, a final newline), malloc'd; NULL: no memory. */
char *dir_encode(cJSON *next, uint64_t rv, size_t *len);
/* Publishes a durable write at rv in the index and the event history (mu held; next NULL: a
 * delete, of cur or of *q->out when the plan made one); id: what was written. */
void dir_publish(struct dir_store *s, struct opreq *q, const char *key, const cJSON *cur,
                 cJSON *next, uint64_t rv, const struct file_identity *id);

/* dir_commit.c */
/* A write of an indexed store with group commit (dir_commit.c); key and path of q's object. */
int dir_write_grouped(struct dir_store *s, struct opreq *q, const char *key, const char *path,
                      struct err *e);
/* Waits for the checkpoint thread, if any (mu not held; at close). */
void dir_checkpointer_join(struct dir_store *s);
/* At close (mu not held): the flusher stopped and the lazy entries written. */
void dir_lazy_stop(struct dir_store *s);
/* True when a write of key is in flight (mu held): the index leaves its file to that write. */
bool dir_in_flight(struct dir_store *s, const char *key);
int dir_oplock(struct dir_store *s, int how, struct err *e);
void dir_opunlock(int fd);
/* The operation lock taken on s->op_keep (opened the first time): the descriptor, or a
 * negative errno; let go with flock(fd, LOCK_UN), never closed before the store. */
int dir_oplock_kept(struct dir_store *s, struct err *e);
int dir_kind_index(const struct store_kind *k);

/* dir_index.c (with mu held) */
struct index_entry *dir_index_find(struct dir_store *s, const char *key);
/* Sets key's entry (creating it) to obj/corrupt at rv; takes a reference on obj. */
int dir_index_set(struct dir_store *s, const char *key, const struct store_kind *k,
                  struct store_blob *obj, const char *corrupt, uint64_t rv,
                  const struct file_identity *id);
void dir_index_drop(struct dir_store *s, struct index_entry *en);
void dir_index_free(struct dir_store *s);
/* Appends an event (takes a reference on obj), dropping the oldest beyond the bounds. */
void dir_ring_push(struct dir_store *s, enum store_event_type t, const struct store_kind *k,
                   uint64_t rv, struct store_blob *obj);
void dir_ring_free(struct dir_store *s);
/* Compares the files named by keys (NULL, n 0: every file of kinds) with the index and applies
 * the differences, as events in resourceVersion order when emit.  Needs the operation lock. */
/* The index answers for this process (built, and told of other processes' changes). */
bool dir_live(struct dir_store *s);
/* The length of the object's name in file name `file` of a kind's directory (the name without
 * ".json"); 0 when file is no object's: a name starting with '.' (temporary and hidden files) or
 * not ending in ".json" after a name (dir_list.c). */
size_t dir_object_name_len(const char *file);
/* The walk of a kind's directory by a process whose index does not answer (dir_list.c): fn is
 * called for each object file in dir (dir_object_name_len) with its path, the namespace ns
 * (NULL: none) and its name; with recurse, for those in each directory of dir instead (a name
 * starting with '.' passed over), ns that directory's name.  A missing dir holds nothing, and
 * so does a namespace's entry that is not a directory (a stray file beside the namespaces, passed
 * over as the index passes over it).  A namespace's directory that cannot be opened otherwise
 * (recurse) is reported as unreadable object "*" of that namespace of kind k
 * (store_unreadable_report) and the walk goes on; dir itself, when it cannot be opened
 * otherwise, is an error.  Returns 0, or the first error (fn's nonzero return, which stops the
 * walk). */
typedef int (*dir_file_fn)(void *arg, const char *path, const char *ns, const char *file,
                           size_t len, struct err *e);
int dir_files_each(const struct store_kind *k, const char *dir, const char *ns, bool recurse,
                   dir_file_fn fn, void *arg, struct err *e);
/* store_ops list_each and list_each_skip (dir_list.c). */
int dir_list_each(store *st, const struct store_kind *k, const char *ns, const char *selector,
                  store_each_fn fn, void *arg, uint64_t *list_rv, struct err *e);
int dir_list_each_skip(store *st, const struct store_kind *k, const char *ns, const char *selector,
                       store_skip_fn skip, store_each_fn fn, void *arg, uint64_t *list_rv,
                       struct err *e);
/* True when key's file is the one the index holds (its identity unchanged; s->mu held). */
bool dir_index_unchanged(struct dir_store *s, const char *key);
void dir_index_refresh(struct dir_store *s, const struct store_kind *const *kinds,
                       char *const *keys, size_t n, bool emit);
/* The file identity of path (0 / -errno). */
int dir_fident(const char *path, struct file_identity *id);

/* dir_journal.c: the journal's region size, and the most text an object may have (so that a
 * write always fits once the journal is checkpointed) */
#define STORE_JOURNAL_REGION (1u << 20)
#define STORE_OBJECT_MAX     (STORE_JOURNAL_REGION / 2)
/* At the store's open: under the operation lock, opens PATH/.journal (the owner makes it) and
 * does the lock holder's duties once. Another process with no journal there yet opens none and
 * leaves no file behind: a reader never writes the store's directory. */
int dir_journal_open(struct dir_store *s, bool owner, struct err *e);
/* With the operation lock held, before a write: the journal open, made if it is not there. Every
 * journal is made under the operation lock, so the owner's sweep of temporary files never takes
 * the one being made. */
int dir_journal_attach(struct dir_store *s, struct err *e);
/* After taking the operation lock exclusively (fd): applies what a writer that died, or a
 * reboot, may have left unapplied (and checkpoints after a reboot). */
int dir_journal_locked(struct dir_store *s, int fd, struct err *e);
/* Before letting the operation lock go, every write applied: the applied mark. */
void dir_journal_mark(struct dir_store *s, int fd);
/* Before a lazy entry is queued (operation lock held through fd): the flag that tells the next
 * lock holder of this boot that lazy entries may have been lost with this process (dir_journal.c
 * LAZY_AT).  False when it could not be written: the write is then durable. */
bool dir_journal_lazy_flag(struct dir_store *s, int fd);
/* Syncs what was applied and retires the journal's entries (operation lock held, every
 * appended entry applied). */
int dir_journal_checkpoint(struct dir_store *s, struct err *e);
/* sync(fs) of the store for a checkpoint in steps (journal_checkpoint_begin/end). */
int dir_journal_sync(void *store, struct err *e);
/* A durable write of path (key's object, text) or a delete: the journal entry, then the file
 * without fsync.  fresh: the writer knows of no object at path (a create: the file is renamed
 * into place without an exchange, its directory made when missing); else the object's file and
 * so its directory are there.  lazy: the entry is a lazy one (journal_append_lazy: queued, not
 * yet durable; the caller makes sure the key's previous entry is still in the journal), else
 * *seq (optional) its sequence.  0 (*id what was written); 1 durable (lazy: queued) but not
 * applied (e says why; the next lock holder applies it); or a negative errno, nothing durable
 * or queued (JOURNAL_FULL: checkpoint, then retry). */
int dir_journal_put(struct dir_store *s, const char *key, const char *path, const char *text,
                    size_t len, bool fresh, bool lazy, struct file_identity *id, uint64_t *seq,
                    struct err *e);
int dir_journal_del(struct dir_store *s, const char *key, const char *path, struct err *e);

/* dir.c: the embedded store's operations (what tells its stores from others') */
extern const struct store_ops dir_ops;

/* dir_health.c: store_health of the embedded store */
int dir_health(store *st, struct err *e);

/* dir_watch.c */
/* Builds the index and starts change notification (mu held).  0 or a negative errno. */
int dir_index_start(struct dir_store *s, struct err *e);
/* Applies the changes other processes made so far (mu held; takes the operation lock shared
 * unless lock_held). */
void dir_catch_up(struct dir_store *s, bool lock_held);
void dir_notify_stop(struct dir_store *s);
int dir_watch(store *st, const struct store_kind *k, uint64_t from_rv, store_watch **out,
              struct err *e);
int dir_watch_next(store_watch *w, int timeout_ms, enum store_event_type *type, cJSON **obj,
                   struct err *e);
void dir_watch_close(store_watch *w);

#endif
