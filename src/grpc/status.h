/* grpc/status — gRPC status codes and the small wire encodings around them.
 *
 * Status codes are the gRPC enum (OK=0 … UNAUTHENTICATED=16).  This header also holds the pure
 * helpers of the gRPC-over-HTTP/2 wire format that both server and client use: percent-encoding
 * of `grpc-message`, `grpc-timeout` parsing and formatting, metadata key/value validation, the
 * mapping of an HTTP status or an RST_STREAM code to a gRPC status, and the 5-byte message prefix.
 * None of these functions allocate; they never fail silently (see each for its return).
 */
#ifndef PILLAR_GRPC_STATUS_H
#define PILLAR_GRPC_STATUS_H

#include <protobuf-c/protobuf-c.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

enum grpc_code {
	GRPC_OK = 0,
	GRPC_CANCELLED = 1,
	GRPC_UNKNOWN = 2,
	GRPC_INVALID_ARGUMENT = 3,
	GRPC_DEADLINE_EXCEEDED = 4,
	GRPC_NOT_FOUND = 5,
	GRPC_ALREADY_EXISTS = 6,
	GRPC_PERMISSION_DENIED = 7,
	GRPC_RESOURCE_EXHAUSTED = 8,
	GRPC_FAILED_PRECONDITION = 9,
	GRPC_ABORTED = 10,
	GRPC_OUT_OF_RANGE = 11,
	GRPC_UNIMPLEMENTED = 12,
	GRPC_INTERNAL = 13,
	GRPC_UNAVAILABLE = 14,
	GRPC_DATA_LOSS = 15,
	GRPC_UNAUTHENTICATED = 16,
};

#define GRPC_STATUS_MSG_MAX 512
/* Default receive limit of server and client (gRPC's own default). */
#define GRPC_DEFAULT_MAX_MSG (4u << 20)

/* A call's outcome: what a handler answers, and what a client sees. */
struct grpc_status {
	int code;                      /* enum grpc_code */
	char msg[GRPC_STATUS_MSG_MAX]; /* decoded grpc-message, "" when none */
};

/* ---- the status of a handler ---------------------------------------------------------------
 *
 * Every service of every role answers with a struct grpc_status: a handler
 *     int fn(ctx, const Req *req, Resp *resp, struct grpc_status *st)
 * returns the code (GRPC_OK or an error) and, on error, a message in st->msg that a person can act
 * on (roles/glue.h turns it into the call's grpc-status and grpc-message).
 *
 * Errors: layers return 0 or a negative errno with a message in a struct err (DESIGN §3); a
 * role's edge turns them into a status with grpc_status_from_err, through the one errno → code
 * mapping of grpc_code_from_errno, and adds only what its own spec says differently.
 *
 * Out of memory: an allocation failure is an error like any other.  Layers return -ENOMEM;
 * handlers answer RESOURCE_EXHAUSTED "out of memory" (grpc_status_oom) and leave their state as
 * it was; no role aborts and none goes on without what it failed to allocate.  The per-volume
 * locks never allocate (base/keylock.h), so a call is never run unlocked. */

/* Sets code and message (st may be NULL); returns code. */
int grpc_status_set(struct grpc_status *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* GRPC_RESOURCE_EXHAUSTED with "out of memory". */
int grpc_status_oom(struct grpc_status *st);
/* The code for a layer's negative errno (nvmet.md §9, initiator.h):
 *   0 → OK;  -ESTALE (stale token), -EBUSY, -ENOENT, -EACCES, -EPERM, -EOPNOTSUPP →
 *   FAILED_PRECONDITION;  -EINVAL, -ENAMETOOLONG → INVALID_ARGUMENT;  -EADDRINUSE,
 *   -EADDRNOTAVAIL, -ENODEV, -ENXIO, -EAGAIN, -ETIMEDOUT → UNAVAILABLE;  -ETIME (a bounded wait
 *   ran out) → DEADLINE_EXCEEDED;  -ENOSPC, -ENOMEM, -EDQUOT → RESOURCE_EXHAUSTED;  -EEXIST →
 *   ALREADY_EXISTS;  -ERANGE → OUT_OF_RANGE;  anything else (-EIO, -EBADMSG, ...) → INTERNAL. */
int grpc_code_from_errno(int err);
/* Sets st from e (code by grpc_code_from_errno, e's message or "internal error"); returns the
 * code. */
int grpc_status_from_err(struct grpc_status *st, const struct err *e);

/* "OK", "CANCELLED", … "UNAUTHENTICATED"; "UNKNOWN_CODE" for a value outside the enum. */
const char *grpc_code_name(int code);

/* Percent-encodes s for `grpc-message` (bytes outside 0x20..0x7e and '%' become %XX) into out.
 * Returns the length written, always NUL-terminating; the output is cut at a whole escape when
 * cap is too small. */
size_t grpc_msg_encode(const char *s, char *out, size_t cap);
/* Decodes a `grpc-message` value of len bytes into out (NUL-terminated); malformed escapes are
 * kept literally, as the gRPC spec asks.  Returns the length written. */
size_t grpc_msg_decode(const char *s, size_t len, char *out, size_t cap);

/* Parses a `grpc-timeout` value ("1-8 digits" + one of H M S m u n) into milliseconds, rounding
 * up sub-millisecond values.  Returns 0, or -EINVAL for a malformed value. */
int grpc_timeout_parse(const char *s, size_t len, int64_t *ms);
/* Formats a timeout of ms milliseconds (> 0) as a `grpc-timeout` value. Returns the length. */
size_t grpc_timeout_format(int64_t ms, char *out, size_t cap);

/* Custom metadata: a key is 1+ chars of [0-9a-z_.-] and is not reserved (":"-prefixed or
 * "grpc-"-prefixed); an ASCII value (key not ending in "-bin") is printable 0x20..0x7e.
 * Return true when valid. */
bool grpc_md_key_valid(const char *key);
bool grpc_md_value_valid(const char *key, const char *value, size_t len);

/* gRPC code for an HTTP :status other than 200 (gRPC's http-grpc-status-mapping). */
int grpc_code_from_http(int http_status);
/* gRPC code for a stream reset with an HTTP/2 error code and no grpc-status. */
int grpc_code_from_h2_error(uint32_t h2_error);

/* The 5-byte message prefix: flag byte (compressed) and big-endian length. */
#define GRPC_PREFIX_LEN 5
void grpc_prefix_write(uint8_t out[GRPC_PREFIX_LEN], bool compressed, uint32_t len);

/* Incremental reassembly of length-prefixed messages from DATA chunks.
 * grpc_deframer_feed consumes all of len and returns: 0 when more bytes are needed or after
 * complete messages were delivered to on_msg; -EPROTO for a set compression flag; -EMSGSIZE when
 * a message announces more than max bytes; -ENOMEM; or the negative value on_msg returned.
 * After an error the deframer must not be fed again.  msg points into the deframer's buffer,
 * valid during the callback only. */
struct grpc_deframer {
	uint8_t hdr[GRPC_PREFIX_LEN];
	size_t hdr_len;
	uint8_t *buf;
	size_t cap, len, want;
	bool in_body;
	size_t max;
	uint32_t last_len; /* size announced by the failing prefix, for messages */
};
typedef int (*grpc_msg_fn)(void *arg, const uint8_t *msg, size_t len);
void grpc_deframer_init(struct grpc_deframer *d, size_t max);
int grpc_deframer_feed(struct grpc_deframer *d, const uint8_t *data, size_t len, grpc_msg_fn on_msg,
                       void *arg);
/* True when no partial message is buffered. */
bool grpc_deframer_idle(const struct grpc_deframer *d);
void grpc_deframer_free(struct grpc_deframer *d);

/* protobuf-c's allocator for the messages we unpack: the C library's malloc/free called from
 * grpc/status.c (so that test_allocfail's wrappers see them); freeing with the default
 * allocator (protobuf_c_message_free_unpacked(m, NULL)) is equivalent. */
extern ProtobufCAllocator grpc_pb_allocator;

#endif
