/* Pinned namespace identities (agent-api.md §8.3–§8.4). */
#include "agent/identity.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/fence.h"
#include "base/file.h"
#include "model/records.h"

static int record_path(const char *state_dir, const char *volume_id, char *out, size_t cap,
                       struct err *e)
{
	char esc[NAME_MAX];
	if (agent_fence_escape(volume_id, esc, sizeof(esc) - 5) < 0)
		return err_set(e, -ENAMETOOLONG, "volume id \"%s\" is too long for a record",
		               volume_id);
	if (snprintf(out, cap, "%s/nvmet-identity/%s.json", state_dir, esc) >= (int)cap)
		return err_set(e, -ENAMETOOLONG, "state path too long");
	return 0;
}

static int read_record(const char *path, char *uid, size_t uid_cap, struct rules_ns_identity *id,
                       struct err *e)
{
	struct model_identity_pin pin;
	struct err pe = {0};
	int r = model_identity_pin_read(path, &pin, &pe);
	if (r == -ENOENT)
		return r;
	if (r == -EBADMSG)
		return err_set(e, -EBADMSG, "corrupt identity record %s: %s", path, pe.msg);
	if (r < 0) /* unreadable now (out of memory, EIO): not corrupt */
		return err_set(e, r, "%s", pe.msg);
	snprintf(uid, uid_cap, "%s", pin.volume_uid);
	snprintf(id->uuid, sizeof(id->uuid), "%s", pin.identity.uuid);
	snprintf(id->nguid, sizeof(id->nguid), "%s", pin.identity.nguid);
	snprintf(id->serial, sizeof(id->serial), "%s", pin.identity.serial);
	model_type_clear(&model_identity_pin_type, &pin);
	return 0;
}

int agent_identity_start(const char *state_dir, const char *volume_id, const char *uid,
                         const char *nqn, struct rules_ns_identity *out, struct err *e)
{
	char path[PATH_MAX], pinned_uid[256];
	struct rules_ns_identity pinned;
	int r = record_path(state_dir, volume_id, path, sizeof(path), e);
	if (r < 0)
		return r;
	rules_ns_identity_derive(nqn, out);
	r = read_record(path, pinned_uid, sizeof(pinned_uid), &pinned, e);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if (uid && strcmp(pinned_uid, uid) == 0) {
		*out = pinned;
		return 0;
	}
	return file_remove_durable(path, e); /* another lifecycle's record: delete, ignore */
}

/* nvmet-identity/ made to exist durably (the state directory fsync'd after creating it) once
 * per process and whenever it is made anew; a pin's write fsyncs the record and
 * nvmet-identity/, the only directory a rename inside it changes. */
static struct file_dir_once pins_dir = FILE_DIR_ONCE_INIT;

int agent_identity_settle(const char *state_dir, const char *volume_id, const char *uid,
                          const char *nqn, const struct rules_ns_identity *result, struct err *e)
{
	char path[PATH_MAX], dir[PATH_MAX];
	struct rules_ns_identity derived;
	int r = record_path(state_dir, volume_id, path, sizeof(path), e);
	if (r < 0)
		return r;
	rules_ns_identity_derive(nqn, &derived);
	if (rules_ns_identity_equal(&derived, result))
		return file_remove_durable(path, e);
	struct model_identity_pin pin = {
	    /* borrows every string */
	    .volume_uid = (char *)(uid ? uid : ""),
	    .has_identity = true,
	    .identity = {.uuid = (char *)result->uuid,
	                 .nguid = (char *)result->nguid,
	                 .serial = (char *)result->serial},
	};
	char *text = model_type_encode_text(&model_identity_pin_type, &pin);
	if (!text)
		return err_set(e, -ENOMEM, "write identity record %s: out of memory", path);
	snprintf(dir, sizeof(dir), "%s/nvmet-identity", state_dir);
	r = file_dir_once_ensure(&pins_dir, dir, 0750, e);
	if (r == 0)
		r = file_write_atomic(path, text, strlen(text), 0600, e);
	free(text);
	return r;
}

int agent_identity_forget(const char *state_dir, const char *volume_id, struct err *e)
{
	char path[PATH_MAX];
	int r = record_path(state_dir, volume_id, path, sizeof(path), e);
	return r < 0 ? r : file_remove_durable(path, e);
}
