/* pbjson — protobuf-c messages to and from JSON, by reflection over their descriptors.
 *
 * Field names are the .proto names (snake_case); lowerCamelCase names are accepted on input.
 * Enums are written by name and read by name or number; 64-bit integers are JSON numbers while
 * they fit a double exactly, else decimal strings (both read back); bytes are base64; maps are
 * JSON objects; oneof members are plain members.  Output leaves out proto3 fields that hold their
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

/* A new JSON object for m (caller owns), or NULL when out of memory. */
cJSON *pbjson_from_message(const ProtobufCMessage *m);

/* m as one line of JSON for logs, every member named `secrets` (the CSI fields marked
 * csi_secret) replaced by "***stripped***" as csi-lib-utils' protosanitizer does; malloc'd,
 * NULL when m is NULL or out of memory.  The per-call log format (grpc/calllog.h). */
char *pbjson_log_text(const ProtobufCMessage *m);

#endif
