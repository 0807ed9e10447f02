/* marklog — the fencing marks' write-ahead journal (base/journal.h).
 *
 * A mark is made durable by one entry appended to <state-dir>/marks.journal (one fdatasync,
 * shared by the marks written at the same time), then applied to its file
 * <state-dir>/generations/<name> (temp, rename) without an fsync of its own: the file is what
 * every reader reads, the journal what makes it durable.  A checkpoint (when the journal's
 * region is half full, when the journal is opened with entries pending, and when it is
 * closed) makes the applied files durable with one syncfs of the state directory's file system
 * and retires the entries; the one a write finds due runs its sync on a thread of its own, so
 * that no call waits for it.  Opening the journal replays every entry not yet retired onto the
 * files, in order, before any mark is read: after a power cut the files are again what the
 * acknowledged calls wrote.  The file format of a mark is unchanged (agent-api.md §6.2), so an
 * agent of this version reads the marks of an earlier one.
 *
 * One state directory per process: opening another closes the first (tests that run one after
 * another).  Thread-safe; a mark's writer holds its volume's lock (fence.h).
 */
#ifndef PILLAR_ROLES_AGENT_MARKLOG_H
#define PILLAR_ROLES_AGENT_MARKLOG_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

#define AGENT_MARKLOG_FILE "marks.journal"

/* Opens (creating) <state_dir>/marks.journal unless it is open already, replays it onto
 * generations/ (created durably when missing) and checkpoints.  0 or a negative errno with e
 * naming the journal (-EBADMSG: corrupt, the agent does not guess). */
int agent_marklog_open(const char *state_dir, struct err *e);
/* Durably writes text as generations/<name> (name: an escaped ID + ".mark").  0 or a negative
 * errno with e set ("write fencing mark <path>: ..."); after a failure the mark is either the
 * old or the new one, and a later open makes it the new one when the journal took it. */
int agent_marklog_write(const char *state_dir, const char *name, const char *text, struct err *e);
/* A call that makes what its mark records (a `file` image: fence.h) holds the journal from
 * before its mark until the thing is made, so that no checkpoint retires the mark's entry
 * before the thing is there to be synced with it; hold before the call's first mark, release
 * once (a checkpoint due meanwhile then begins).  Holds of a thread nest. */
int agent_marklog_hold(const char *state_dir, struct err *e);
void agent_marklog_release(void);
/* What a checkpoint makes durable besides the marks, and what a replay makes again (set before
 * agent_marklog_open; 0 or -ENOMEM): every checkpoint syncs the filesystems of dirs (the
 * `file` pools: a new image's name is durable by the checkpoint that retires its mark's
 * entry), and an open that replays calls restore with the name of each mark it replayed,
 * once every mark is replayed and before the checkpoint that retires them (restore reads the
 * mark's file; it must not call this module). */
typedef void (*agent_marklog_restore_fn)(void *arg, const char *name);
int agent_marklog_images(const char *const *dirs, size_t n, agent_marklog_restore_fn restore,
                         void *arg, struct err *e);
/* Marks waiting for the journal's next batch (tests: group commit). */
unsigned agent_marklog_waiting(void);
/* Checkpoints (when checkpoint) and closes the open journal, if any. */
void agent_marklog_close(bool checkpoint);

#endif
