/* cluster/events — core/v1 Events written as client-go's record.EventRecorder writes them
 * (tools/record: EventCorrelator with its aggregator, logger and spam filter).
 *
 * kube_events_record queues an event and returns at once; a sender thread writes it.  Before a
 * write each event goes through, in client-go's order:
 *  - the aggregator: events with the same source, involved object, type and reason but
 *    different messages, 10 of them within 10 minutes, become one event whose message is
 *    "(combined from similar events): <latest message>";
 *  - the logger: an event equal to one already written (same source, involved object, type,
 *    reason and message; for aggregated events the same aggregate) is not created again: the
 *    existing Event is PATCHed (strategic merge patch of count, lastTimestamp and message) with
 *    count + 1 and lastTimestamp = now, keeping its name and firstTimestamp; a PATCH answered
 *    NotFound (the Event expired) creates it again;
 *  - the spam filter: per source, involved object and type a token bucket of 25 events,
 *    refilled at one per 5 minutes; an event without a token is dropped (a write that carries
 *    identical events folded in the queue, below, takes one token for all of them).
 * Each cache holds at most 4096 keys and a fixed number of bytes (cluster/lru.h: hashed, the
 * least recently used goes first), so its memory is bounded whatever the number of objects.
 *
 * A new Event is named "<object name>.<hex of the Unix time in ns>" in the object's namespace,
 * or in "default" for a cluster-scoped object (the API server requires involvedObject.namespace
 * to equal the Event's); source.component is the recorder's component, source.host its host
 * when set; reportingComponent/reportingInstance the same; firstTimestamp = lastTimestamp = now
 * (RFC 3339, seconds), count 1, type Normal or Warning.
 *
 * The queue between kube_events_record and the sender is the rate budget's backlog: writes take
 * their rate-limiter tokens from the client's Events budget (kube/client.h), so a burst of
 * Events never delays the process's object requests, and what the budget cannot write yet
 * waits.  An event equal to one still waiting (same involved object, type, reason and message)
 * is not queued again: it is counted on the waiting one, whose write then carries the whole
 * count (one create or patch for all of them).  Normal events wait while fewer than 8000 are
 * queued (3 MiB), Warnings while fewer than 10000 (4 MiB): beyond that an event is dropped.
 * Drops are counted (kube_events_stats, pillar_csi_events_dropped_total) and logged once when
 * a burst of them begins and once, with their number, when the queue has drained.  Writes that
 * fail are dropped after one retry (the first failure of a run is logged, and the run's length
 * when writes succeed again): events are best effort and never block the caller.
 *
 * Functions return 0 or a negative errno (message in e).  Thread-safe.
 */
#ifndef PILLAR_KUBE_EVENTS_H
#define PILLAR_KUBE_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "kube/client.h"

#define KUBE_EVENT_NORMAL  "Normal"
#define KUBE_EVENT_WARNING "Warning"

struct kube_events_opts {
	const char *component; /* source.component, e.g. "pillar-csi-controller" (required) */
	const char *host;      /* source.host (the node name) or NULL */
	/* Tests: monotonic and wall-clock microseconds (defaults CLOCK_MONOTONIC/REALTIME). */
	uint64_t (*now_us)(void *arg);
	int64_t (*wall_us)(void *arg);
	void *clock_arg;
	/* Tests: the hash of the caches' and the queue's keys (default FNV-1a 64). */
	uint64_t (*key_hash)(const char *key);
};

/* The involved object. */
struct kube_event_ref {
	const char *api_version, *kind, *ns, *name, *uid; /* ns NULL: cluster-scoped */
};

struct kube_events;

/* kc must outlive the recorder. */
int kube_events_new(struct kube_events **out, struct kube_client *kc,
                    const struct kube_events_opts *o, struct err *e);
/* Queues an event (type KUBE_EVENT_NORMAL or KUBE_EVENT_WARNING) with a formatted message. */
void kube_events_record(struct kube_events *ev, const struct kube_event_ref *obj, const char *type,
                        const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Events recorded at the rate they are written (a storage-node outage's Event on each of
 * thousands of claims): the caller keeps a compact form of what is still to record and feed(arg)
 * records the next ones with kube_events_record while kube_events_backlog() is below
 * KUBE_EVENTS_FEED_HIGH.  feed is called on the sender thread, without the recorder's lock,
 * after each write that leaves fewer than KUBE_EVENTS_FEED_LOW events queued, and before
 * kube_events_flush counts the queue as drained.  A NULL feed removes it; the call returns
 * once a running feed has returned (so its arg may then be freed). */
#define KUBE_EVENTS_FEED_LOW  32
#define KUBE_EVENTS_FEED_HIGH 64
void kube_events_set_feeder(struct kube_events *ev, void (*feed)(void *arg), void *arg);
/* Events queued now. */
size_t kube_events_backlog(struct kube_events *ev);
/* Counts n events a feeder had no room to keep as dropped for cause queue_full. */
void kube_events_drop(struct kube_events *ev, unsigned long n);
/* Waits up to timeout_ms until every queued event has been handled; true when done. */
bool kube_events_flush(struct kube_events *ev, int timeout_ms);
/* Events written (created + patched) and dropped so far. */
void kube_events_counts(struct kube_events *ev, unsigned long *created, unsigned long *patched,
                        unsigned long *dropped);
struct kube_events_stats {
	unsigned long created, patched; /* writes */
	unsigned long dropped;          /* events not written (queue full, spam filter, failed) */
	unsigned long folded;           /* events counted on an identical queued one */
	size_t queued, queue_bytes;     /* waiting now */
	size_t cache_entries, cache_bytes; /* the correlator's caches after the last write */
};
void kube_events_stats(struct kube_events *ev, struct kube_events_stats *out);
/* Flushes (up to 2 s), stops the thread.  NULL is a no-op. */
void kube_events_free(struct kube_events *ev);

#endif
