/* model/records — the records the roles keep in their state directories, described for the
 * codec (model.h): the agent's fencing marks (agent-api.md §6.1) and identity pins (§8.3), the
 * node's stage records (csi.md §7.5).
 *
 * A record file is one JSON object; model_fence_mark_read / model_identity_pin_read decode it into the record's struct and
 * runs the record's rules.  Each rule broken has one reason, the text the agent reports after
 * `corrupt fencing mark <path>: `, `corrupt identity record <path>: ` or `corrupt stage record
 * <path>: ` (the spec's form); the
 * rules of each record live in its check function here and nowhere else.  Members this version
 * does not type are kept in `rest` on reading; the agent writes a record from a fresh struct, so
 * a written record holds exactly the typed members, in the order of the tables.
 */
#ifndef PILLAR_MODEL_RECORDS_H
#define PILLAR_MODEL_RECORDS_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

/* The longest volumeUID a record holds, in bytes. */
#define MODEL_RECORD_UID_MAX 255
/* The largest fencing generation: JSON readers keep integers exact up to 2^53. */
#define MODEL_FENCE_GENERATION_MAX (UINT64_C(1) << 53)

/* A fencing mark: {"volumeUID","generation","ended","endedUIDs":[...]}, every member present,
 * and "imageBytes" when the lifecycle's CreateVolume made a `file` image of that size whose
 * size only the mark makes durable (docs/architecture.md); marks without it (every mark an
 * earlier version wrote) read the same. */
struct model_fence_mark {
	void *rest;
	char *volume_uid;
	bool has_generation;
	int64_t generation;
	bool has_ended, ended;
	bool has_ended_uids;
	struct model_strs ended_uids;
	bool has_image_bytes;
	int64_t image_bytes;
};
extern const struct model_type model_fence_mark_type;
/* The reason mark breaks a rule (volumeUID non-empty and at most MODEL_RECORD_UID_MAX bytes,
 * generation in 0..2^53, ended and endedUIDs present, imageBytes when present in 1..2^53),
 * NULL when it keeps them all. */
const char *model_fence_mark_check(const struct model_fence_mark *mark);

/* An identity pin: {"volumeUID","identity":{"uuid","nguid","serial"}}. */
struct model_identity {
	void *rest;
	char *uuid, *nguid, *serial;
};
struct model_identity_pin {
	void *rest;
	char *volume_uid;
	bool has_identity;
	struct model_identity identity;
};
extern const struct model_type model_identity_pin_type;
/* The reason pin breaks a rule (volumeUID as for marks, uuid a UUID, nguid in UUID form, serial
 * 1..20 printable ASCII characters), NULL when it keeps them all. */
const char *model_identity_pin_check(const struct model_identity_pin *pin);

/* Read the record file at path into *mark / *pin (cleared on error) and check its rules.  0;
 * -ENOENT when the file is missing; -EBADMSG when it is not one JSON object of the record's
 * shape or breaks a rule, with the reason alone in e; -ENOMEM or the read's errno (the file is
 * not known to be corrupt) with the error in e. */
int model_fence_mark_read(const char *path, struct model_fence_mark *mark, struct err *e);
int model_identity_pin_read(const char *path, struct model_identity_pin *pin, struct err *e);

/* A stage record: {"protocol_type":"nvmeof-tcp","access_type":"filesystem"|"block",
 * "fs_type" (filesystem only),"volume_id","staging_path","namespace_uuid","namespace_nguid",
 * "staged_at","nvmeof":{"subsys_nqn","address","port"}}, written formatted with a trailing
 * newline (model_stage_record_text); or the legacy flat form {"subsys_nqn":"…"}, read only. */
struct model_stage_nvmeof {
	void *rest;
	char *subsys_nqn, *address, *port;
};
struct model_stage_record {
	void *rest;
	char *protocol_type, *access_type, *fs_type, *volume_id, *staging_path, *namespace_uuid,
	    *namespace_nguid, *staged_at;
	bool has_nvmeof;
	struct model_stage_nvmeof nvmeof;
	char *subsys_nqn; /* the legacy form's one member */
	bool legacy;      /* read in the legacy form (not a member) */
};
extern const struct model_type model_stage_record_type;
/* Reads and checks a stage record (the rules: the legacy form is exactly one non-empty
 * subsys_nqn; otherwise protocol_type nvmeof-tcp, access_type filesystem or block, fs_type for
 * filesystem, nvmeof an object with non-empty subsys_nqn, address and port; the other members
 * strings when present).  Errors as model_fence_mark_read's. */
int model_stage_record_read(const char *path, struct model_stage_record *rec, struct err *e);
/* The record's file text (formatted JSON, trailing newline), malloc'd; NULL when out of
 * memory. */
char *model_stage_record_text(const struct model_stage_record *rec);

#endif
