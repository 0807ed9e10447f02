/* grpc/strcheck — the strings of a received message are the bytes that were sent.
 *
 * protobuf-c unpacks a proto3 `string` field into a NUL-terminated C string and drops its
 * length, so "pvc-1\0junk" reaches a handler as "pvc-1", another object; it does not check
 * UTF-8 either, which proto3 requires of `string`.  grpc_strcheck walks the wire bytes of a
 * message beside its descriptor and looks at every length-delimited field the descriptor types
 * as `string`, in sub-messages, repeated fields and map entries too.  The server runs it on
 * every request before the handler (grpc/server.h), so every role's every method is covered.
 */
#ifndef PILLAR_GRPC_STRCHECK_H
#define PILLAR_GRPC_STRCHECK_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* 0 when every string field of the message of d encoded in the len bytes at p is well-formed
 * (no NUL byte, UTF-8); else -EILSEQ with msg (cap bytes) naming the first bad one by its path:
 * "field volume_id contains a NUL byte", "field volume_capabilities[0].mount.fs_type is not
 * valid UTF-8", "field parameters[\"pool\"] ...", "a key of field parameters ...".  Keys of a
 * map named `secrets` are not printed.  Bytes that do not parse as the protobuf wire format
 * are left to the unpacker (0 as far as they go). */
int grpc_strcheck(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, char *msg,
                  size_t cap);

#endif
