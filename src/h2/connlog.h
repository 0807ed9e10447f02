/* h2/connlog — rate-limited log lines about a server's connections, keyed by event and peer.
 *
 * The first event of a kind from a peer for a reason is logged at once (a klog warning, default verbosity)
 * with count="1"; further ones within the interval are only counted, and when the interval ends
 * one more line gives their count.  So a flood of refused or timed-out connections from one
 * peer costs one line per interval, and nothing is lost from the totals.  The table holds
 * H2_CONNLOG_SLOTS (event, peer, reason) entries; events beyond it share one entry with the
 * peer "other peers" (which reports the latest reason).  Loop only (holding the loop); the interval runs on a loop timer.
 */
#ifndef PILLAR_H2_CONNLOG_H
#define PILLAR_H2_CONNLOG_H

#include <stdbool.h>
#include <stdint.h>

#include "h2/loop.h"

#define H2_CONNLOG_SLOTS 32

struct h2_connlog_entry {
	const char *msg; /* static text: the event */
	char peer[64];
	char reason[192];
	uint64_t logged_at;
	unsigned long count; /* events since logged_at, not yet logged */
	bool used;
};

struct h2_connlog {
	struct h2_loop *loop;
	uint64_t interval_ms;
	struct h2_timer timer;
	struct h2_connlog_entry ent[H2_CONNLOG_SLOTS + 1]; /* the last: "other peers" */
};

void h2_connlog_init(struct h2_connlog *g, struct h2_loop *l, uint64_t interval_ms);
/* One event.  msg: a static text ("gRPC connection refused"); peer: the remote address as
 * text; reason: why, without secrets (no certificate or key material). */
void h2_connlog_event(struct h2_connlog *g, const char *msg, const char *peer, const char *reason);
/* Logs what is still counted and cancels the timer (before the loop or g goes away). */
void h2_connlog_stop(struct h2_connlog *g);

#endif
