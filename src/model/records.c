/* model/records — fencing marks and identity pins (records.h). */
#include "model/records.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/str.h"
#include "model/codec.h"

#define T struct model_fence_mark
static const struct model_field fence_mark_fields[] = {
    MODEL_F_STR("volumeUID", volume_uid),
    MODEL_F_INT("generation", generation),
    MODEL_F_BOOL("ended", ended),
    MODEL_F_STRS_HAS("endedUIDs", ended_uids),
    /* optional: see records.h */
    MODEL_F_INT("imageBytes", image_bytes),
};
#undef T
MODEL_TYPE(model_fence_mark_type, struct model_fence_mark, fence_mark_fields);

#define T struct model_identity
static const struct model_field identity_fields[] = {
    MODEL_F_STR("uuid", uuid),
    MODEL_F_STR("nguid", nguid),
    MODEL_F_STR("serial", serial),
};
#undef T
MODEL_TYPE(model_identity_type, struct model_identity, identity_fields);

#define T struct model_identity_pin
static const struct model_field identity_pin_fields[] = {
    MODEL_F_STR("volumeUID", volume_uid),
    MODEL_F_OBJ_HAS("identity", identity, &model_identity_type),
};
#undef T
MODEL_TYPE(model_identity_pin_type, struct model_identity_pin, identity_pin_fields);

#define T struct model_stage_nvmeof
static const struct model_field stage_nvmeof_fields[] = {
    MODEL_F_STR("subsys_nqn", subsys_nqn),
    MODEL_F_STR("address", address),
    MODEL_F_STR("port", port),
};
#undef T
MODEL_TYPE(model_stage_nvmeof_type, struct model_stage_nvmeof, stage_nvmeof_fields);

#define T struct model_stage_record
static const struct model_field stage_record_fields[] = {
    MODEL_F_STR("protocol_type", protocol_type),
    MODEL_F_STR("access_type", access_type),
    MODEL_F_STR("fs_type", fs_type),
    MODEL_F_STR("volume_id", volume_id),
    MODEL_F_STR("staging_path", staging_path),
    MODEL_F_STR("namespace_uuid", namespace_uuid),
    MODEL_F_STR("namespace_nguid", namespace_nguid),
    MODEL_F_STR("staged_at", staged_at),
    MODEL_F_OBJ_HAS("nvmeof", nvmeof, &model_stage_nvmeof_type),
    MODEL_F_STR("subsys_nqn", subsys_nqn),
};
#undef T
MODEL_TYPE(model_stage_record_type, struct model_stage_record, stage_record_fields);

static bool uid_ok(const char *uid)
{
	return uid && uid[0] && strlen(uid) <= MODEL_RECORD_UID_MAX && !str_has_control(uid);
}

const char *model_fence_mark_check(const struct model_fence_mark *mark)
{
	if (!uid_ok(mark->volume_uid))
		return "volumeUID is not a non-empty string without control characters";
	if (!mark->has_generation || mark->generation < 0 ||
	    (uint64_t)mark->generation > MODEL_FENCE_GENERATION_MAX)
		return "generation is not an integer in 0..2^53";
	if (!mark->has_ended)
		return "ended is not a boolean";
	if (!mark->has_ended_uids)
		return "endedUIDs is not an array";
	for (size_t i = 0; i < mark->ended_uids.n; i++)
		if (!uid_ok(mark->ended_uids.v[i]))
			return "endedUIDs holds a UID that is empty, too long or has control "
			       "characters";
	if (mark->has_image_bytes &&
	    (mark->image_bytes < 1 || (uint64_t)mark->image_bytes > MODEL_FENCE_GENERATION_MAX))
		return "imageBytes is not an integer in 1..2^53";
	return NULL;
}

static bool is_uuid(const char *s)
{
	if (!s || strlen(s) != 36)
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
	size_t n = s ? strlen(s) : 0;
	if (n < 1 || n > 20)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return false;
	return true;
}

const char *model_identity_pin_check(const struct model_identity_pin *pin)
{
	if (!uid_ok(pin->volume_uid))
		return "volumeUID is not a non-empty string without control characters";
	if (!pin->has_identity)
		return "identity is not an object";
	if (!is_uuid(pin->identity.uuid))
		return "identity.uuid is not a UUID";
	if (!is_uuid(pin->identity.nguid))
		return "identity.nguid is not in UUID form";
	if (!is_serial(pin->identity.serial))
		return "identity.serial is not 1..20 printable characters";
	return NULL;
}

/* The record at path as a struct of type t, checked.  model_*_read's contract. */
static int record_read(const struct model_type *t, const char *path, void *obj,
                       const char *(*check)(const void *obj), struct err *e)
{
	cJSON *root = NULL;
	const char *why = NULL;
	memset(obj, 0, t->size);
	int r = json_read_file(path, &root, e);
	if (r < 0)
		return r;
	if (!cJSON_IsObject(root))
		r = err_set(e, -EBADMSG, "not a JSON object");
	else if ((r = model_type_decode(t, root, obj, e)) == -EINVAL)
		r = -EBADMSG; /* a member of the wrong JSON type: e names it */
	else if (r == -ENOMEM)
		r = err_set(e, -ENOMEM, "out of memory");
	else if (r == 0 && (why = check(obj)) != NULL)
		r = err_set(e, -EBADMSG, "%s", why);
	cJSON_Delete(root);
	if (r < 0)
		model_type_clear(t, obj);
	return r;
}

static const char *fence_mark_check(const void *obj)
{
	return model_fence_mark_check(obj);
}

static const char *identity_pin_check(const void *obj)
{
	return model_identity_pin_check(obj);
}

int model_fence_mark_read(const char *path, struct model_fence_mark *mark, struct err *e)
{
	return record_read(&model_fence_mark_type, path, mark, fence_mark_check, e);
}

int model_identity_pin_read(const char *path, struct model_identity_pin *pin, struct err *e)
{
	return record_read(&model_identity_pin_type, path, pin, identity_pin_check, e);
}

static bool set(const char *s)
{
	return s && s[0];
}

/* The members of a stage record are names, IDs and paths: none holds a control character.
 * 0 or -EBADMSG (e). */
static int stage_record_names_check(const struct model_stage_record *rec, struct err *e)
{
#define R struct model_stage_record
	static const struct model_name_field names[] = {
	    {"fs_type", offsetof(R, fs_type)},
	    {"volume_id", offsetof(R, volume_id)},
	    {"staging_path", offsetof(R, staging_path)},
	    {"namespace_uuid", offsetof(R, namespace_uuid)},
	    {"namespace_nguid", offsetof(R, namespace_nguid)},
	    {"staged_at", offsetof(R, staged_at)},
	    {"nvmeof.subsys_nqn", offsetof(R, nvmeof.subsys_nqn)},
	    {"nvmeof.address", offsetof(R, nvmeof.address)},
	    {"nvmeof.port", offsetof(R, nvmeof.port)},
	    {"subsys_nqn", offsetof(R, subsys_nqn)},
	};
#undef R
	if (model_names_plain(rec, names, sizeof(names) / sizeof(names[0]), e) < 0)
		return -EBADMSG;
	return 0;
}

/* The rules of a decoded stage record (records.h); rec->legacy set.  0 or -EBADMSG (e). */
static int stage_record_check(struct model_stage_record *rec, struct err *e)
{
	static const char missing[] = "\"%s\" is missing or not a string";
	const char *s;
	if (cJSON_GetArraySize(rec->rest) == 1 && rec->subsys_nqn) {
		if (!set(rec->subsys_nqn))
			return err_set(e, -EBADMSG, missing, "subsys_nqn");
		rec->legacy = true;
		return stage_record_names_check(rec, e);
	}
	if (!set(s = rec->protocol_type))
		return err_set(e, -EBADMSG, missing, "protocol_type");
	if (strcmp(s, "nvmeof-tcp") != 0)
		return err_set(e, -EBADMSG, "unknown protocol_type \"%s\"", s);
	if (!set(s = rec->access_type))
		return err_set(e, -EBADMSG, missing, "access_type");
	if (strcmp(s, "filesystem") && strcmp(s, "block"))
		return err_set(e, -EBADMSG, "unknown access_type \"%s\"", s);
	if (!strcmp(s, "filesystem") && !set(rec->fs_type))
		return err_set(e, -EBADMSG, missing, "fs_type");
	if (!rec->has_nvmeof)
		return err_set(e, -EBADMSG, "\"nvmeof\" is missing or not an object");
	if (!set(rec->nvmeof.subsys_nqn))
		return err_set(e, -EBADMSG, missing, "subsys_nqn");
	if (!set(rec->nvmeof.address))
		return err_set(e, -EBADMSG, missing, "address");
	if (!set(rec->nvmeof.port))
		return err_set(e, -EBADMSG, missing, "port");
	return stage_record_names_check(rec, e);
}

int model_stage_record_read(const char *path, struct model_stage_record *rec, struct err *e)
{
	cJSON *root = NULL;
	memset(rec, 0, sizeof(*rec));
	int r = json_read_file(path, &root, e);
	if (r < 0)
		return r;
	if (!cJSON_IsObject(root))
		r = err_set(e, -EBADMSG, "not a JSON object");
	else if ((r = model_type_decode(&model_stage_record_type, root, rec, e)) == -EINVAL)
		r = -EBADMSG; /* a member of the wrong JSON type: e names it */
	else if (r == -ENOMEM)
		r = err_set(e, -ENOMEM, "out of memory");
	else if (r == 0)
		r = stage_record_check(rec, e);
	cJSON_Delete(root);
	if (r < 0)
		model_type_clear(&model_stage_record_type, rec);
	return r;
}

char *model_stage_record_text(const struct model_stage_record *rec)
{
	char *text = model_type_encode_pretty(&model_stage_record_type, rec);
	size_t n = text ? strlen(text) : 0;
	char *t = text ? realloc(text, n + 2) : NULL;
	if (!t) {
		free(text);
		return NULL;
	}
	t[n] = '\n';
	t[n + 1] = '\0';
	return t;
}
