#include "node/record.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/file.h"
#include "base/json.h"
#include "base/log.h"
#include "base/str.h"
#include "grpc/status.h"
#include "rules/volid.h"

int node_volume_id_parse(const char *id, char *protocol, size_t protocol_cap, struct err *e)
{
	struct rules_volid v;
	int r = rules_volid_parse(id, &v);
	/* A well-formed ID of another protocol is the caller's to refuse (it names the protocol). */
	if ((r < 0 && r != -EPROTONOSUPPORT) || strlen(id) > NODE_VOLUME_ID_MAX)
		return err_set(e, -EINVAL, "volume ID \"%s\" is malformed", id ? id : "");
	if (protocol)
		str_copy(protocol, protocol_cap, v.protocol);
	return 0;
}

int node_record_path(const char *state_dir, const char *id, char *buf, size_t cap, struct err *e)
{
	char *p;
	int r = node_volume_id_parse(id, NULL, 0, e);
	if (r < 0)
		return r;
	if (snprintf(buf, cap, "%s/%s.json", state_dir, id) >= (int)cap)
		return err_set(e, -ENAMETOOLONG, "state path too long for volume \"%s\"", id);
	for (p = buf + strlen(state_dir) + 1; *p; p++)
		if (*p == '/')
			*p = '_';
	return 0;
}

/* A required string member; NULL (and e set) when absent or not a string. */
static const char *req_str(const cJSON *o, const char *key, const char *path, struct err *e)
{
	const char *v = json_get_str(o, key);
	if (!v || !*v)
		err_set(e, -EBADMSG, "corrupt stage record %s: \"%s\" is missing or not a string",
		        path, key);
	return v && *v ? v : NULL;
}

static int opt_str(const cJSON *o, const char *key, char *dst, size_t cap, const char *path,
                   struct err *e)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!it)
		return 0;
	if (!cJSON_IsString(it))
		return err_set(e, -EBADMSG, "corrupt stage record %s: \"%s\" is not a string", path,
		               key);
	str_copy(dst, cap, it->valuestring);
	return 0;
}

static int parse_file(const char *path, struct node_record *r, struct err *e)
{
	cJSON *root = NULL, *nv;
	const char *s;
	int rc;

	memset(r, 0, sizeof(*r));
	rc = json_read_file(path, &root, e);
	if (rc == -ENOENT)
		return -ENOENT;
	if (rc < 0 && rc != -EBADMSG)
		return rc; /* unreadable now (out of memory, EIO), not corrupt: e says why */
	if (rc < 0) {
		char why[ERR_MSG_MAX];
		str_copy(why, sizeof(why), e ? e->msg : "unreadable");
		return err_set(e, -EBADMSG, "corrupt stage record %s: %s", path, why);
	}
	rc = -EBADMSG;
	if (!cJSON_IsObject(root)) {
		err_set(e, rc, "corrupt stage record %s: not a JSON object", path);
		goto out;
	}
	if (cJSON_GetArraySize(root) == 1 && cJSON_GetObjectItemCaseSensitive(root, "subsys_nqn")) {
		if (!(s = req_str(root, "subsys_nqn", path, e)))
			goto out;
		r->legacy = true;
		str_copy(r->protocol_type, sizeof(r->protocol_type), "nvmeof-tcp");
		str_copy(r->subsys_nqn, sizeof(r->subsys_nqn), s);
		rc = 0;
		goto out;
	}
	if (!(s = req_str(root, "protocol_type", path, e)))
		goto out;
	str_copy(r->protocol_type, sizeof(r->protocol_type), s);
	if (strcmp(s, "nvmeof-tcp") != 0) {
		err_set(e, rc, "corrupt stage record %s: unknown protocol_type \"%s\"", path, s);
		goto out;
	}
	if (!(s = req_str(root, "access_type", path, e)))
		goto out;
	if (strcmp(s, "filesystem") && strcmp(s, "block")) {
		err_set(e, rc, "corrupt stage record %s: unknown access_type \"%s\"", path, s);
		goto out;
	}
	str_copy(r->access_type, sizeof(r->access_type), s);
	if (!strcmp(s, "filesystem")) {
		if (!(s = req_str(root, "fs_type", path, e)))
			goto out;
		str_copy(r->fs_type, sizeof(r->fs_type), s);
	}
	nv = cJSON_GetObjectItemCaseSensitive(root, "nvmeof");
	if (!cJSON_IsObject(nv)) {
		err_set(e, rc, "corrupt stage record %s: \"nvmeof\" is missing or not an object",
		        path);
		goto out;
	}
	if (!(s = req_str(nv, "subsys_nqn", path, e)))
		goto out;
	str_copy(r->subsys_nqn, sizeof(r->subsys_nqn), s);
	if (!(s = req_str(nv, "address", path, e)))
		goto out;
	str_copy(r->address, sizeof(r->address), s);
	if (!(s = req_str(nv, "port", path, e)))
		goto out;
	str_copy(r->port, sizeof(r->port), s);
	if (opt_str(root, "volume_id", r->volume_id, sizeof(r->volume_id), path, e) < 0 ||
	    opt_str(root, "staging_path", r->staging_path, sizeof(r->staging_path), path, e) < 0 ||
	    opt_str(root, "namespace_uuid", r->namespace_uuid, sizeof(r->namespace_uuid), path, e) <
	        0 ||
	    opt_str(root, "namespace_nguid", r->namespace_nguid, sizeof(r->namespace_nguid), path,
	            e) < 0 ||
	    opt_str(root, "staged_at", r->staged_at, sizeof(r->staged_at), path, e) < 0)
		goto out;
	rc = 0;
out:
	cJSON_Delete(root);
	return rc;
}

int node_record_read(const char *state_dir, const char *id, struct node_record *r, struct err *e)
{
	char path[PATH_MAX];
	int rc;
	if (node_record_path(state_dir, id, path, sizeof(path), NULL) < 0)
		return -ENOENT; /* no record can exist for a malformed ID */
	rc = parse_file(path, r, e);
	if (rc == 0 && r->volume_id[0] && strcmp(r->volume_id, id) != 0)
		return err_set(e, -EBADMSG, "corrupt stage record %s: it belongs to volume \"%s\"",
		               path, r->volume_id);
	return rc;
}

int node_record_write(const char *state_dir, struct node_record *r, struct err *e)
{
	char path[PATH_MAX];
	cJSON *root, *nv;
	int rc;

	if ((rc = node_record_path(state_dir, r->volume_id, path, sizeof(path), e)) < 0)
		return rc;
	if (!r->staged_at[0]) {
		time_t t = time(NULL);
		struct tm tm;
		gmtime_r(&t, &tm);
		strftime(r->staged_at, sizeof(r->staged_at), "%Y-%m-%dT%H:%M:%SZ", &tm);
	}
	if ((rc = file_mkdir_p(state_dir, 0700, e)) < 0)
		return rc;
	root = cJSON_CreateObject();
	nv = cJSON_CreateObject();
	bool fs = !strcmp(r->access_type, "filesystem");
	const struct {
		cJSON *o;
		const char *key, *value;
	} m[] = {{root, "protocol_type", r->protocol_type},
	         {root, "access_type", r->access_type},
	         {root, "fs_type", fs ? r->fs_type : NULL},
	         {nv, "subsys_nqn", r->subsys_nqn},
	         {nv, "address", r->address},
	         {nv, "port", r->port},
	         {root, "volume_id", r->volume_id},
	         {root, "staging_path", r->staging_path},
	         {root, "namespace_uuid", r->namespace_uuid},
	         {root, "namespace_nguid", r->namespace_nguid},
	         {root, "staged_at", r->staged_at}};
	bool ok = root && nv;
	for (size_t i = 0; ok && i < sizeof(m) / sizeof(m[0]); i++)
		ok = !m[i].value || json_add(m[i].o, m[i].key, cJSON_CreateString(m[i].value));
	if (ok)
		ok = json_add(root, "nvmeof", nv);
	else
		cJSON_Delete(nv);
	nv = NULL; /* in root, or freed */
	if (!ok) { /* never a record with a member missing */
		cJSON_Delete(root);
		return err_set(e, -ENOMEM, "write stage record %s: out of memory", path);
	}
	rc = json_write_file(path, root, 0600, e);
	cJSON_Delete(root);
	if (rc == 0)
		r->legacy = false;
	return rc;
}

int node_record_delete(const char *state_dir, const char *id, struct err *e)
{
	char path[PATH_MAX];
	int rc = node_record_path(state_dir, id, path, sizeof(path), e);
	return rc < 0 ? rc : file_remove_durable(path, e);
}

int node_records_sweep(const char *state_dir, struct err *e)
{
	char path[PATH_MAX];
	struct dirent *de;
	struct node_record r;
	struct stat st;
	int removed = 0;
	DIR *d = opendir(state_dir);
	if (!d)
		return errno == ENOENT
		           ? 0
		           : err_set(e, -errno, "read %s: %s", state_dir, strerror(errno));
	while ((de = readdir(d)) != NULL) {
		struct err pe = {0};
		size_t l = strlen(de->d_name);
		if (de->d_name[0] == '.' || l < 6 || strcmp(de->d_name + l - 5, ".json"))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", state_dir, de->d_name) >=
		    (int)sizeof(path))
			continue;
		if (parse_file(path, &r, &pe) < 0) {
			log_warn("keeping unreadable stage record", "path", path, "error", pe.msg);
			continue;
		}
		if (r.legacy || !r.staging_path[0])
			continue;
		if (stat(r.staging_path, &st) < 0 && errno == ENOENT) {
			log_info("deleting stage record of a staging path kubelet no longer has",
			         "volume", r.volume_id, "staging_path", r.staging_path);
			if (file_remove_durable(path, &pe) == 0)
				removed++;
		}
	}
	closedir(d);
	return removed;
}
