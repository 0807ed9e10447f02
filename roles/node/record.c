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
#include "base/log.h"
#include "base/str.h"
#include "grpc/status.h"
#include "model/records.h"
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

/* Copies the decoded record into r's fields (a member absent stays ""). */
static void record_copy(struct node_record *r, const struct model_stage_record *rec)
{
	const struct {
		char *dst;
		size_t cap;
		const char *src;
	} m[] = {{r->protocol_type, sizeof(r->protocol_type), rec->protocol_type},
	         {r->access_type, sizeof(r->access_type), rec->access_type},
	         {r->fs_type, sizeof(r->fs_type), rec->fs_type},
	         {r->subsys_nqn, sizeof(r->subsys_nqn), rec->nvmeof.subsys_nqn},
	         {r->address, sizeof(r->address), rec->nvmeof.address},
	         {r->port, sizeof(r->port), rec->nvmeof.port},
	         {r->volume_id, sizeof(r->volume_id), rec->volume_id},
	         {r->staging_path, sizeof(r->staging_path), rec->staging_path},
	         {r->namespace_uuid, sizeof(r->namespace_uuid), rec->namespace_uuid},
	         {r->namespace_nguid, sizeof(r->namespace_nguid), rec->namespace_nguid},
	         {r->staged_at, sizeof(r->staged_at), rec->staged_at}};
	memset(r, 0, sizeof(*r));
	if (rec->legacy) {
		r->legacy = true;
		str_copy(r->protocol_type, sizeof(r->protocol_type), "nvmeof-tcp");
		str_copy(r->subsys_nqn, sizeof(r->subsys_nqn), rec->subsys_nqn);
		return;
	}
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		if (m[i].src && (m[i].dst != r->fs_type || !strcmp(rec->access_type, "filesystem")))
			str_copy(m[i].dst, m[i].cap, m[i].src);
}

static int parse_file(const char *path, struct node_record *r, struct err *e)
{
	struct model_stage_record rec;
	struct err pe = {0};
	memset(r, 0, sizeof(*r));
	int rc = model_stage_record_read(path, &rec, &pe);
	if (rc == -ENOENT)
		return -ENOENT;
	if (rc == -EBADMSG)
		return err_set(e, -EBADMSG, "corrupt stage record %s: %s", path, pe.msg);
	if (rc < 0) /* unreadable now (out of memory, EIO), not corrupt */
		return err_set(e, rc, "%s", pe.msg);
	record_copy(r, &rec);
	model_type_clear(&model_stage_record_type, &rec);
	return 0;
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

/* One per process: the state directories of the nodes a process runs (one in production, a few
 * in the tests) are made durable as they come. */
static struct file_dir_once state_dir_once = FILE_DIR_ONCE_INIT;

int node_state_dir_ensure(const char *state_dir, struct err *e)
{
	return file_dir_once_ensure(&state_dir_once, state_dir, 0700, e);
}

int node_record_write(const char *state_dir, struct node_record *r, struct err *e)
{
	char path[PATH_MAX];
	int rc;

	if ((rc = node_record_path(state_dir, r->volume_id, path, sizeof(path), e)) < 0)
		return rc;
	if (!r->staged_at[0]) {
		time_t t = time(NULL);
		struct tm tm;
		gmtime_r(&t, &tm);
		strftime(r->staged_at, sizeof(r->staged_at), "%Y-%m-%dT%H:%M:%SZ", &tm);
	}
	if ((rc = node_state_dir_ensure(state_dir, e)) < 0)
		return rc;
	bool fs = !strcmp(r->access_type, "filesystem");
	struct model_stage_record rec = {
	    /* borrows r's strings; fs_type for filesystems only */
	    .protocol_type = r->protocol_type,
	    .access_type = r->access_type,
	    .fs_type = fs ? r->fs_type : NULL,
	    .volume_id = r->volume_id,
	    .staging_path = r->staging_path,
	    .namespace_uuid = r->namespace_uuid,
	    .namespace_nguid = r->namespace_nguid,
	    .staged_at = r->staged_at,
	    .has_nvmeof = true,
	    .nvmeof = {.subsys_nqn = r->subsys_nqn, .address = r->address, .port = r->port},
	};
	char *text = model_stage_record_text(&rec);
	if (!text) /* never a record with a member missing */
		return err_set(e, -ENOMEM, "write stage record %s: out of memory", path);
	rc = file_write_atomic(path, text, strlen(text), 0600, e);
	free(text);
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

int node_records_each(const char *state_dir, void (*fn)(const struct node_record *r, void *arg),
                      void *arg)
{
	char path[PATH_MAX];
	struct dirent *de;
	struct node_record r;
	int n = 0;
	DIR *d = opendir(state_dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);
		if (de->d_name[0] == '.' || l < 6 || strcmp(de->d_name + l - 5, ".json"))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", state_dir, de->d_name) >=
		        (int)sizeof(path) ||
		    parse_file(path, &r, NULL) < 0)
			continue;
		fn(&r, arg);
		n++;
	}
	closedir(d);
	return n;
}
