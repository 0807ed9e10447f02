/* kube/watch — watch streams, and a reflector that keeps a consumer in step with a collection:
 * list (in pages), then watch from the list's resourceVersion with bookmarks, resume from the
 * last resourceVersion seen when a stream ends, and relist when the server answers 410
 * Gone/Expired (as an HTTP status or, from a running watch, as an ERROR event).
 *
 * A watch answer is HTTP 200 with one JSON event per line, `{"type":T,"object":{...}}\n`; chunk
 * boundaries do not follow events, so the parser reassembles lines.  The parser accepts any
 * bytes (test/fuzz/fuzz_kube.c): a line that is not an event is -EBADMSG and is skipped.
 * Functions return 0 (or 1 for "an event") or a negative errno with st / e filled.
 */
#ifndef PILLAR_KUBE_WATCH_H
#define PILLAR_KUBE_WATCH_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "kube/client.h"

enum kube_event_type {
	KUBE_ADDED,
	KUBE_MODIFIED,
	KUBE_DELETED,
	KUBE_BOOKMARK, /* object carries only metadata.resourceVersion */
	KUBE_ERROR,    /* object is a Status */
};

#define KUBE_WATCH_LINE_MAX (16u << 20)

struct kube_watch_parser {
	char *buf;
	size_t len, cap, max_line;
};

void kube_watch_parser_init(struct kube_watch_parser *p, size_t max_line);
void kube_watch_parser_free(struct kube_watch_parser *p);
/* Appends stream bytes: 0, or -EMSGSIZE when an unfinished line exceeds max_line (the
 * buffer is dropped), -ENOMEM. */
int kube_watch_parser_push(struct kube_watch_parser *p, const void *data, size_t len);
/* The next complete event: 1 with *type and *obj (caller owns), 0 when more bytes
 * are needed, or -EBADMSG for a line that is not an event (consumed; the reason in e). */
int kube_watch_parser_next(struct kube_watch_parser *p, enum kube_event_type *type, cJSON **obj,
                           struct err *e);

struct kube_watch;

/* Opens `?watch=1&allowWatchBookmarks=true&timeoutSeconds=T` on r's collection from
 * o->resource_version (and its selectors); timeout_s 0: the server's default. */
int kube_watch_open(struct kube_client *kc, const struct kube_resource *r, const char *ns,
                    const struct kube_list_opts *o, int timeout_s, struct kube_watch **out,
                    struct kube_status *st);
/* kube_watch_open in two steps, so that a watch whose answer is slow to come can be cancelled
 * (kube_watch_cancel) or waited for in slices: kube_watch_start queues the request and returns
 * at once (0 with *out, or a negative errno with st) ... */
int kube_watch_start(struct kube_client *kc, const struct kube_resource *r, const char *ns,
                     const struct kube_list_opts *o, int timeout_s, struct kube_watch **out,
                     struct kube_status *st);
/* ... and kube_watch_ready waits up to timeout_ms for its answer: 1 when the watch is open (also
 * on every later call), 0 when no answer came yet (call again), or a negative errno with st: the
 * server's Status for an error answer (-ERANGE for 410 Expired), -ECANCELED after
 * kube_watch_cancel, or the connection's failure.  kube_watch_next needs a ready watch. */
int kube_watch_ready(struct kube_watch *w, int64_t timeout_ms, struct kube_status *st);
/* 1 with the next event (an ERROR event is not returned: its Status fills st and its errno is
 * returned, -ERANGE for Expired), 0 when the server ended the stream, -ETIMEDOUT when nothing
 * arrived within timeout_ms (> 0), -ECANCELED after kube_watch_cancel. */
int kube_watch_next(struct kube_watch *w, enum kube_event_type *type, cJSON **obj,
                    int64_t timeout_ms, struct kube_status *st);
/* Ends the watch from any thread (a blocked kube_watch_next returns -ECANCELED). */
void kube_watch_cancel(struct kube_watch *w);
void kube_watch_free(struct kube_watch *w);

struct kube_reflector_ops {
	/* After each (re)list: every object (a List's items array) and the list's resourceVersion. */
	int (*replace)(void *arg, const cJSON *items, const char *rv);
	/* Each ADDED, MODIFIED or DELETED event; a negative return ends kube_reflector_run_once. */
	int (*event)(void *arg, enum kube_event_type type, const cJSON *obj);
};

struct kube_reflector_opts {
	const char *label_selector, *field_selector;
	int64_t page;   /* list page size; default 500 */
	int watch_secs; /* timeoutSeconds of each watch; default 300 */
	/* a watch silent this long is taken for a dead connection (-ETIMEDOUT); default
	 * watch_secs + 30 s, since the server ends every watch after watch_secs */
	int64_t idle_ms;
};

struct kube_reflector;

int kube_reflector_new(struct kube_reflector **out, struct kube_client *kc,
                       const struct kube_resource *r, const char *ns,
                       const struct kube_reflector_opts *o, const struct kube_reflector_ops *ops,
                       void *arg, struct err *e);
/* One round: lists when no resourceVersion is known, then watches from the last one until the
 * stream ends.  0: the stream ended (call again to resume); -ERANGE: the resourceVersion expired
 * (the next call relists); -ECANCELED: stopped; -ETIMEDOUT: the watch fell silent for idle_ms
 * (call again: resumes); another negative errno: a failure (st). */
int kube_reflector_run_once(struct kube_reflector *rf, struct kube_status *st);
/* Stops a running or later round from any thread. */
void kube_reflector_stop(struct kube_reflector *rf);
/* The last resourceVersion seen ("" before the first list and after a 410). */
const char *kube_reflector_resource_version(const struct kube_reflector *rf);
/* Lists done so far (each relist counts once, however many pages). */
unsigned kube_reflector_lists(const struct kube_reflector *rf);
void kube_reflector_free(struct kube_reflector *rf);

#endif
