/* node/record — stage records (csi.md §7.5) and the volume-ID checks that guard their paths.
 *
 * One JSON file per staged volume in the state directory, named after the volume ID with every
 * `/` replaced by `_` plus `.json`; directory 0700, file 0600, written with file_write_atomic.
 * The legacy flat form {"subsys_nqn":"…"} is read as an NVMe/TCP record (legacy = true).
 * Readers never guess: a record that is not exactly one of the two forms is -EBADMSG with the
 * message `corrupt stage record <path>: <reason>`.  Volume IDs are validated before they become
 * a path: a malformed ID is -EINVAL (node_record_read reports it as -ENOENT: no record can
 * exist for it).  Functions return 0 or a negative errno with a message in e.
 */
#ifndef PILLAR_ROLES_NODE_RECORD_H
#define PILLAR_ROLES_NODE_RECORD_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

#define NODE_REC_STR 512

struct node_record {
	bool legacy;
	char protocol_type[32];
	char access_type[16]; /* "filesystem" or "block"; "" for legacy records */
	char fs_type[16];
	char subsys_nqn[256];
	char address[NODE_REC_STR];
	char port[16];
	char volume_id[NODE_REC_STR];
	char staging_path[4096];
	char namespace_uuid[48];
	char namespace_nguid[48];
	char staged_at[40];
};

/* The volume ID grammar of rules/volid.h (csi.md §2.1), at most NODE_VOLUME_ID_MAX bytes so
 * that `<id with / → _>.json` is one file name.  A well-formed ID naming another protocol is
 * accepted here (the caller refuses the protocol by name).  0 with the protocol segment copied
 * to protocol (may be NULL), or -EINVAL `volume ID "<id>" is malformed`. */
#define NODE_VOLUME_ID_MAX 250
int node_volume_id_parse(const char *id, char *protocol, size_t protocol_cap, struct err *e);

/* <state_dir>/<id with / → _>.json.  -EINVAL for a malformed ID. */
int node_record_path(const char *state_dir, const char *id, char *buf, size_t cap, struct err *e);

int node_record_read(const char *state_dir, const char *id, struct node_record *r, struct err *e);
/* The state directory, created 0700 when missing and its entry in its parent fsync'd once per
 * process (file_dir_once_ensure): a record fsync'd in it survives a power cut with it.  0 or a
 * negative errno with e set. */
int node_state_dir_ensure(const char *state_dir, struct err *e);
/* Writes r durably (new form; staged_at filled when empty) in the state directory, which
 * node_state_dir_ensure makes durable first. */
int node_record_write(const char *state_dir, struct node_record *r, struct err *e);
int node_record_delete(const char *state_dir, const char *id, struct err *e);

/* csi.md §6.1 step 6: deletes records whose staging_path directory no longer exists; legacy
 * records and corrupt ones are left alone (logged).  Returns how many were deleted, or -errno. */
int node_records_sweep(const char *state_dir, struct err *e);

/* Calls fn with every readable stage record in state_dir (corrupt ones are skipped).  Returns
 * how many fn saw, or -errno when the directory cannot be read. */
int node_records_each(const char *state_dir, void (*fn)(const struct node_record *r, void *arg),
                      void *arg);

#endif
