/* pbjson — protobuf-c messages to and from JSON, by reflection over their descriptors.
 *
 * Output names fields by their JSON names, as protoc derives json_name and the proto3 JSON mapping
 * (and grpcurl) prints them: lowerCamelCase, "capacity_bytes" -> "capacityBytes" (our .proto
 * files set no json_name option, which protobuf-c descriptors would not carry); PBJSON_PROTO_NAMES
 * prints the .proto names instead.  Input accepts either spelling of each field.  Map keys are
 * data and never renamed.
 * Enums are written by name and read by name or number; 64-bit integers are written as decimal
 * strings (proto3 JSON) and read from strings or exact JSON numbers; bytes are base64; maps are
 * JSON objects; oneof members are plain members; google.protobuf wrappers are bare values and
 * google.protobuf.Timestamp is an RFC 3339 string in UTC ("2026-01-02T03:04:05.250Z"; the
 * {"seconds","nanos"} object is read too).  Output leaves out proto3 fields that hold their
 * default value, like the canonical JSON mapping.  Used by `pillar-csi call` and tests.
 */
#ifndef PILLAR_PBJSON_PBJSON_H
#define PILLAR_PBJSON_PBJSON_H

#include <cjson/cJSON.h>
#include <protobuf-c/protobuf-c.h>

#include "base/err.h"

/* Builds a message of d from the JSON object j.  0 with *out (free with
 * protobuf_c_message_free_unpacked(*out, NULL)), or -EINVAL naming the bad field, -ENOMEM. */
int pbjson_to_message(const ProtobufCMessageDescriptor *d, const cJSON *j, ProtobufCMessage **out,
                      struct err *e);

enum pbjson_flags {
	PBJSON_PROTO_NAMES = 1, /* member names are the .proto field names (snake_case) */
	PBJSON_PRETTY = 2,      /* pbjson_text: indented, one member a line */
};

/* A new JSON object for m (caller owns), or NULL when out of memory.  flags: enum pbjson_flags. */
cJSON *pbjson_from_message(const ProtobufCMessage *m, unsigned flags);

/* pbjson_to_message from JSON text (len bytes, one JSON value: base/json.h's strict parse):
 * 0 with *out, or -EBADMSG (not JSON), -EINVAL naming the bad field, -ENOMEM. */
int pbjson_parse_text(const ProtobufCMessageDescriptor *d, const char *text, size_t len,
                      ProtobufCMessage **out, struct err *e);

/* pbjson_from_message as text (malloc'd, caller frees; compact unless PBJSON_PRETTY), or NULL
 * when out of memory. */
char *pbjson_text(const ProtobufCMessage *m, unsigned flags);

/* protoc's JSON name of the .proto field name `name` (each '_' dropped, the letter after it
 * upper-cased) into buf of size bytes, always NUL-terminated when size > 0.  Returns its length;
 * >= size means it was truncated. */
size_t pbjson_json_name(const char *name, char *buf, size_t size);

/* m as one line of JSON for logs, every member named `secrets` (the CSI fields marked
 * csi_secret) replaced by "***stripped***" as csi-lib-utils' protosanitizer does; malloc'd,
 * NULL when m is NULL or out of memory.  The per-call log format (grpc/calllog.h). */
char *pbjson_log_text(const ProtobufCMessage *m);

#endif
