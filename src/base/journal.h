/* journal — a write-ahead journal of durable writes: one fdatasync per write (shared by
 * concurrent writers) instead of the two fsyncs of a record's temp -> fsync -> rename ->
 * fsync(directory).
 *
 * The contract for a user (one journal file per state directory; the embedded store and the
 * agent's state each have their own):
 *   1. journal_append: an entry is a name, an opaque payload and a tag of the user's (what to do
 *      with the payload: put, delete, ...).  When journal_append returns 0 the entries are
 *      durable; concurrent appenders share one fdatasync (group commit).  Each append is one
 *      batch with its own sequence number (*seq); a batch is all or nothing after a power cut.
 *   2. The user then applies the entries to its own files WITHOUT fsync (write, rename) and may
 *      acknowledge the operation.
 *   3. journal_checkpoint makes the applied files durable and frees the journal's space: it
 *      switches to the file's other region (journal_checkpoint_begin), the user's sync makes
 *      every applied effect durable and the journal file too (syncfs(2) of the filesystem that
 *      holds both, or fsync of each touched file and directory and of the journal), then the
 *      old region is retired (journal_checkpoint_end).  Checkpoint when
 *      journal_should_checkpoint says so, at clean shutdown, or whenever idle; the writers
 *      need not wait for it (appends go on during the user's sync).  It must be begun only
 *      when every entry appended so far has been applied (no append in flight).
 *   4. At start (journal_open), or when the user finds that entries were appended but maybe not
 *      applied (a writer died between 1 and 2; after a reboot, since page-cache contents are
 *      lost), journal_replay hands every entry not yet retired, in sequence order, to the user's
 *      callback, which re-applies it (idempotently: replaying twice must give the same files);
 *      then a checkpoint makes the result durable.
 * Several processes may share one journal file when they exclude each other with a lock of the
 * user's (the embedded store's operation lock): each calls journal_refresh after taking the lock,
 * which finds what others appended or checkpointed meanwhile.  Within a process every function
 * is thread-safe.
 *
 * File format (host byte order: local state, not portable between machines): two regions of
 * region_size bytes each.  Block 0 of a region (blocks are JOURNAL_BLOCK bytes) is its header:
 * magic, the sequence number of its first batch, CRC-32C; all zeros when the region is retired.
 * The active region is the valid one whose first sequence is the higher; the other, when still
 * valid, holds a checkpoint that has not completed (replayed first).
 *
 * A checkpoint costs the user's sync and no fdatasync of its own: a header is written without
 * one, and is durable once any later fdatasync of the file (an append's) or the user's sync
 * has run.  What a power cut may leave, and why each state reads right: the new region's
 * header lost (the old region alone is valid: it is replayed whole; no batch of the new region
 * was acknowledged, since its append's fdatasync would have written the header too); the old
 * region's retirement lost (both valid: the old one is replayed first, again, which the
 * user's replay tolerates).  The two orders that would lose or misread acknowledged batches
 * are kept out: the retirement is written only after the user's sync made the new header
 * durable (else neither region could be valid), and a retired region's header is rewritten
 * only once its retirement is durable (else its earlier cycle's header, still valid on disk,
 * would stand before this cycle's batches and read as corruption).  Batches follow block 0,
 * each at a block boundary: magic, payload length, sequence number (consecutive within the
 * region from its first), entry count, CRC-32C of header and payload; the payload is the entries,
 * each tag, name length, data length (32 bits each), name, data.  The file is created full size
 * with zeros written (never sparse, never extended), so an append overwrites allocated blocks
 * and its fdatasync writes data without a filesystem-journal commit.
 *
 * Reading it back: the chain of a region is its batches from block 1 with consecutive sequence
 * numbers.  The first batch that fails its checks ends the chain: when no later block of the
 * region holds an intact batch of this region's cycle (sequence >= its first), it is a torn tail
 * (the last append, never acknowledged) and is dropped; otherwise the journal is corrupt and
 * journal_open fails with an error naming the file and offset (never a guess).  A corrupt last
 * batch cannot be told from a torn one. */
#ifndef PILLAR_BASE_JOURNAL_H
#define PILLAR_BASE_JOURNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"

#define JOURNAL_BLOCK 4096u
/* The default and the least region size. */
#define JOURNAL_REGION_DEFAULT (4u << 20)
#define JOURNAL_REGION_MIN     (4 * JOURNAL_BLOCK)
/* journal_append's answer when the batch does not fit the active region: checkpoint first. */
#define JOURNAL_FULL (-EXFULL)

typedef struct journal journal;

struct journal_entry {
	unsigned tag;     /* the user's: what the entry means */
	const char *name; /* NUL-terminated, not empty */
	const void *data; /* len bytes (NULL when len is 0) */
	size_t len;
};

/* Opens path, creating it (temp, zeros, fsync, rename, fsync of its directory) with two
 * regions of region_size bytes (0: JOURNAL_REGION_DEFAULT; a multiple of JOURNAL_BLOCK, at least
 * JOURNAL_REGION_MIN) and the given mode when it does not exist.  An existing file keeps its
 * size.  0, or a negative errno with e naming path (-EBADMSG: corrupt). */
int journal_open(const char *path, size_t region_size, mode_t mode, journal **out, struct err *e);
void journal_close(journal *j);

/* Appends entries[0..n) as one batch; returns once it is durable (0, *seq its sequence number
 * when seq is not NULL), or an error (JOURNAL_FULL: it does not fit: checkpoint, then retry).
 * Concurrent calls share an fdatasync. */
int journal_append(journal *j, const struct journal_entry *entries, size_t n, uint64_t *seq,
                   struct err *e);

/* Lazy appends: entries[0..n) queued WITHOUT waiting, no fdatasync of their own; they are
 * written, ahead of it, in the batch of the next journal_append or journal_flush of this
 * process (all or nothing with that batch, in queue order), and so are durable exactly when
 * that call returns 0.  Until then a power cut loses them, and only them: the file holds no
 * byte of a lazy entry before its batch is written and synced like any other, so the torn-
 * tail rule above is unchanged and a lost lazy entry leaves the journal as it was without it.
 * A lazy entry that does not fit the active region, or whose batch fails to write, stays
 * queued (with every entry after it) for the batch after the next checkpoint.  The user applies
 * a lazy entry at once (it reads as written); it must make sure that losing it is harmless,
 * e.g. that the entry its key had before is still in the journal (journal_active_first).
 * Processes that share the journal keep their lock while they have lazy entries queued (another
 * process's append would otherwise go ahead of them).  0, or -ENOMEM / an encoding error with
 * nothing queued. */
int journal_append_lazy(journal *j, const struct journal_entry *entries, size_t n, struct err *e);
/* Writes the lazy entries queued so far (one batch, one fdatasync; shared with concurrent
 * appends): 0 when they are durable (at once when none is queued), else the error of their
 * batch (JOURNAL_FULL: checkpoint, then flush again). */
int journal_flush(journal *j, struct err *e);
/* True when lazy entries are queued, not yet written. */
bool journal_lazy_pending(journal *j);
/* The sequence number of the active region's first batch: every batch with a sequence at or
 * above it stays in the journal (replayed after a power cut) until the next checkpoint begins
 * (with the users' lock held: as of the last journal_refresh). */
uint64_t journal_active_first(journal *j);

/* Calls fn for every entry of every batch with sequence > after that the journal still holds
 * (not retired), in order; stops at fn's first nonzero return and returns it.  fn must not call
 * the journal (appends wait meanwhile). */
typedef int (*journal_replay_fn)(void *arg, uint64_t seq, const struct journal_entry *entry,
                                 struct err *e);
int journal_replay(journal *j, uint64_t after, journal_replay_fn fn, void *arg, struct err *e);

/* Finds what other processes appended or checkpointed since this one last looked (call with
 * the users' lock held).  0 or an error (-EBADMSG: corrupt). */
int journal_refresh(journal *j, struct err *e);

/* The sequence number of the last batch (0: none yet). */
uint64_t journal_last_seq(journal *j);
/* True when the active region is more than half full. */
bool journal_should_checkpoint(journal *j);
/* True when the journal holds batches that are not retired. */
bool journal_pending(journal *j);
/* Appenders waiting for the next batch to start (observability and tests). */
unsigned journal_waiting(journal *j);

/* The checkpoint in steps, for a user who syncs without its lock held: begin (lock held, every
 * appended entry applied) switches regions and returns 1, or, when the previous checkpoint never
 * completed, keeps them and returns 0 (*ticket names the region to retire either way; 0 when
 * nothing is pending: no sync is needed); the user syncs; end (lock held) retires that region
 * unless another checkpoint already did.  journal_checkpoint does all three with sync(arg) as
 * the user's sync, completing an earlier checkpoint first if needed. */
int journal_checkpoint_begin(journal *j, uint64_t *ticket, struct err *e);
int journal_checkpoint_end(journal *j, uint64_t ticket, struct err *e);
int journal_checkpoint(journal *j, int (*sync)(void *arg, struct err *e), void *arg, struct err *e);

#endif
