/* Pinned namespace identities (agent-api.md §8.3–§8.4). */
#include "agent/identity.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/fence.h"
#include "base/file.h"
#include "base/json.h"

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

static bool is_uuid(const char *s)
{
	if (strlen(s) != 36)
		return false;
	for (int i = 0; i < 36; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash ? s[i] != '-' : !strchr("0123456789abcdefABCDEF", s[i]))
			return false;
	}
	return true;
}

static bool is_serial(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > 20)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return false;
	return true;
}

static int read_record(const char *path, char *uid, size_t uid_cap, struct rules_ns_identity *id,
                       struct err *e)
{
	cJSON *root = NULL;
	struct err pe = {0};
	int r = json_read_file(path, &root, &pe);
	if (r == -ENOENT)
		return r;
	if (r == -EBADMSG)
		return err_set(e, -EBADMSG, "corrupt identity record %s: %s", path, pe.msg);
	if (r < 0) /* unreadable now (out of memory, EIO): not corrupt */
		return err_set(e, r, "%s", pe.msg);
	const cJSON *ident = cJSON_GetObjectItemCaseSensitive(root, "identity");
	const char *u = json_get_str(root, "volumeUID");
	const char *uu = json_get_str(ident, "uuid"), *ng = json_get_str(ident, "nguid");
	const char *se = json_get_str(ident, "serial");
	const char *why = NULL;
	if (!u || !*u || strlen(u) >= uid_cap)
		why = "volumeUID is not a non-empty string";
	else if (!cJSON_IsObject(ident))
		why = "identity is not an object";
	else if (!uu || !is_uuid(uu))
		why = "identity.uuid is not a UUID";
	else if (!ng || !is_uuid(ng))
		why = "identity.nguid is not in UUID form";
	else if (!se || !is_serial(se))
		why = "identity.serial is not 1..20 printable characters";
	if (why) {
		cJSON_Delete(root);
		return err_set(e, -EBADMSG, "corrupt identity record %s: %s", path, why);
	}
	snprintf(uid, uid_cap, "%s", u);
	snprintf(id->uuid, sizeof(id->uuid), "%s", uu);
	snprintf(id->nguid, sizeof(id->nguid), "%s", ng);
	snprintf(id->serial, sizeof(id->serial), "%s", se);
	cJSON_Delete(root);
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
	cJSON *o = cJSON_CreateObject(), *id = cJSON_CreateObject();
	char *text = NULL;
	if (o && id) {
		bool ok = json_add(id, "uuid", cJSON_CreateString(result->uuid)) &&
		          json_add(id, "nguid", cJSON_CreateString(result->nguid)) &&
		          json_add(id, "serial", cJSON_CreateString(result->serial)) &&
		          json_add(o, "volumeUID", cJSON_CreateString(uid ? uid : ""));
		if (ok) {
			ok = json_add(o, "identity", id); /* o owns id, or id was freed */
			id = NULL;
		}
		if (ok)
			text = json_dump(o); /* NULL when out of memory */
	}
	cJSON_Delete(o);
	cJSON_Delete(id);
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
