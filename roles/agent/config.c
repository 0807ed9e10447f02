/* The agent configuration file (agent-api.md §11.2 and the file backend of §14). */
#include "agent/config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/json.h"

void agent_config_clear(struct agent_config *c)
{
	for (size_t i = 0; i < c->n; i++)
		backend_config_clear(&c->backends[i]);
	free(c->backends);
	c->backends = NULL;
	c->n = 0;
}

static int only_keys(const cJSON *o, const char *path, const char *const *keys, struct err *e)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, o)
	{
		bool ok = false;
		for (const char *const *k = keys; *k && !ok; k++)
			ok = strcmp(it->string, *k) == 0;
		if (!ok)
			return err_set(e, -EINVAL, "config: unknown field \"%s%s%s\"", path,
			               *path ? "." : "", it->string);
	}
	return 0;
}

/* Optional string member: NULL when absent; -EINVAL on a wrong type. */
static int opt_str(const cJSON *o, const char *path, const char *key, const char **out,
                   struct err *e)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	*out = NULL;
	if (!v)
		return 0;
	if (!cJSON_IsString(v))
		return err_set(e, -EINVAL, "config: %s.%s: expected string", path, key);
	*out = v->valuestring;
	return 0;
}

static int set_str(char **dst, const char *v, struct err *e)
{
	if (!v || !*v)
		return 0;
	if (!(*dst = strdup(v)))
		return err_set(e, -ENOMEM, "config: out of memory");
	return 0;
}

static bool bad_name(const char *s)
{
	return strchr(s, '/') || strcmp(s, ".") == 0 || strcmp(s, "..") == 0 || strlen(s) > 128;
}

static int parse_zfs(const cJSON *z, const char *path, size_t i, struct backend_config *b,
                     struct err *e)
{
	static const char *const keys[] = {"pool", "parentDataset", "volumeType", "properties",
	                                   NULL};
	const char *pool, *parent, *vt;
	int r;
	if ((r = only_keys(z, path, keys, e)) < 0 || (r = opt_str(z, path, "pool", &pool, e)) < 0 ||
	    (r = opt_str(z, path, "parentDataset", &parent, e)) < 0 ||
	    (r = opt_str(z, path, "volumeType", &vt, e)) < 0)
		return r;
	if (cJSON_GetObjectItemCaseSensitive(z, "properties"))
		return err_set(e, -EINVAL,
		               "backends[%zu].zfs.properties: ZFS properties are set per volume "
		               "(PillarStore or PillarStorageClass), not in the agent config",
		               i);
	if (!pool || !*pool)
		return err_set(e, -EINVAL, "backends[%zu].zfs.pool is required", i);
	if (bad_name(pool))
		return err_set(e, -EINVAL, "backends[%zu].zfs.pool: invalid name \"%s\"", i, pool);
	if (vt && strcmp(vt, "zvol") != 0)
		return err_set(e, -EINVAL,
		               "backends[%zu].zfs.volumeType: only \"zvol\" is supported", i);
	b->kind = BACKEND_ZFS;
	if ((r = set_str(&b->pool, pool, e)) < 0 ||
	    (r = set_str(&b->parent_dataset, parent, e)) < 0)
		return r;
	return 0;
}

static int parse_lvm(const cJSON *l, const char *path, size_t i, struct backend_config *b,
                     struct err *e)
{
	static const char *const keys[] = {"volumeGroup", "thinPool", "provisioningMode", NULL};
	const char *vg, *thin, *mode;
	int r;
	if ((r = only_keys(l, path, keys, e)) < 0 ||
	    (r = opt_str(l, path, "volumeGroup", &vg, e)) < 0 ||
	    (r = opt_str(l, path, "thinPool", &thin, e)) < 0 ||
	    (r = opt_str(l, path, "provisioningMode", &mode, e)) < 0)
		return r;
	if (!vg || !*vg)
		return err_set(e, -EINVAL, "backends[%zu].lvm.volumeGroup is required", i);
	if (bad_name(vg) || (thin && bad_name(thin)))
		return err_set(e, -EINVAL, "backends[%zu].lvm: invalid name", i);
	if (mode && strcmp(mode, "linear") != 0 && strcmp(mode, "thin") != 0)
		return err_set(e, -EINVAL,
		               "backends[%zu].lvm.provisioningMode: must be \"linear\" or \"thin\"",
		               i);
	b->kind = BACKEND_LVM;
	b->thin_default = mode && strcmp(mode, "thin") == 0;
	if (b->thin_default && (!thin || !*thin))
		return err_set(e, -EINVAL,
		               "backends[%zu].lvm: provisioningMode thin requires thinPool", i);
	if ((r = set_str(&b->pool, vg, e)) < 0 || (r = set_str(&b->thin_pool, thin, e)) < 0)
		return r;
	return 0;
}

static int parse_file(const cJSON *f, const char *path, size_t i, struct backend_config *b,
                      struct err *e)
{
	static const char *const keys[] = {"pool", "directory", "preallocate", NULL};
	const char *pool, *dir;
	int r;
	if ((r = only_keys(f, path, keys, e)) < 0 || (r = opt_str(f, path, "pool", &pool, e)) < 0 ||
	    (r = opt_str(f, path, "directory", &dir, e)) < 0)
		return r;
	const cJSON *pre = cJSON_GetObjectItemCaseSensitive(f, "preallocate");
	if (pre && !cJSON_IsBool(pre))
		return err_set(e, -EINVAL, "config: %s.preallocate: expected boolean", path);
	if (!pool || !*pool)
		return err_set(e, -EINVAL, "backends[%zu].file.pool is required", i);
	if (bad_name(pool))
		return err_set(e, -EINVAL, "backends[%zu].file.pool: invalid name \"%s\"", i, pool);
	if (!dir || !*dir)
		return err_set(e, -EINVAL, "backends[%zu].file.directory is required", i);
	if (dir[0] != '/')
		return err_set(e, -EINVAL, "backends[%zu].file.directory: must be an absolute path",
		               i);
	b->kind = BACKEND_FILE;
	b->preallocate = cJSON_IsTrue(pre);
	if ((r = set_str(&b->pool, pool, e)) < 0 || (r = set_str(&b->directory, dir, e)) < 0)
		return r;
	return 0;
}

static int parse_entry(const cJSON *it, size_t i, struct backend_config *b, struct err *e)
{
	static const char *const keys[] = {"zfs", "lvm", "file", NULL};
	char path[64];
	int members = 0, r;
	snprintf(path, sizeof(path), "backends[%zu]", i);
	if (!cJSON_IsObject(it))
		return err_set(e, -EINVAL, "config: %s: expected object", path);
	if ((r = only_keys(it, path, keys, e)) < 0)
		return r;
	for (const char *const *k = keys; *k; k++)
		members += cJSON_GetObjectItemCaseSensitive(it, *k) != NULL;
	if (members != 1)
		return err_set(e, -EINVAL, "backends[%zu]: exactly one of zfs or lvm must be set",
		               i);
	const cJSON *z = cJSON_GetObjectItemCaseSensitive(it, "zfs");
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(it, "lvm");
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(it, "file");
	const cJSON *m = z ? z : l ? l : f;
	snprintf(path, sizeof(path), "backends[%zu].%s", i, z ? "zfs" : l ? "lvm" : "file");
	if (!cJSON_IsObject(m))
		return err_set(e, -EINVAL, "config: %s: expected object", path);
	return z   ? parse_zfs(z, path, i, b, e)
	       : l ? parse_lvm(l, path, i, b, e)
	           : parse_file(f, path, i, b, e);
}

int agent_config_parse(const char *buf, size_t len, struct agent_config *out, struct err *e)
{
	static const char *const top[] = {"backends", NULL};
	const char *end = NULL;
	int r = 0;
	memset(out, 0, sizeof(*out));
	cJSON *root = cJSON_ParseWithLengthOpts(buf, len, &end, false);
	if (root && end) { /* one value filling the whole input, whitespace aside */
		while (end < buf + len &&
		       (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
			end++;
		if (end < buf + len) {
			cJSON_Delete(root);
			return err_set(e, -EINVAL, "config: invalid JSON near byte %zu",
			               (size_t)(end - buf));
		}
	}
	if (!root) {
		size_t off = end && end >= buf ? (size_t)(end - buf) : 0;
		if (!end) {
			const char *ep = cJSON_GetErrorPtr();
			off = ep && ep >= buf && ep <= buf + len ? (size_t)(ep - buf) : 0;
		}
		return err_set(e, -EINVAL, "config: invalid JSON near byte %zu", off);
	}
	if (json_check_strings(buf, len, e) < 0) { /* a pool "p\u0000x" would name pool "p" */
		cJSON_Delete(root);
		err_prefix(e, "config");
		return -EINVAL;
	}
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "backends");
	if (!cJSON_IsObject(root))
		r = err_set(e, -EINVAL, "config: (root): expected object");
	else if ((r = only_keys(root, "", top, e)) < 0)
		;
	else if (list && !cJSON_IsArray(list))
		r = err_set(e, -EINVAL, "config: backends: expected array");
	else if (!list || cJSON_GetArraySize(list) == 0)
		r = err_set(e, -EINVAL, "backends: at least one backend is required");
	if (r < 0)
		goto out;
	out->n = (size_t)cJSON_GetArraySize(list);
	out->backends = calloc(out->n, sizeof(*out->backends));
	if (!out->backends) {
		out->n = 0;
		r = err_set(e, -ENOMEM, "config: out of memory");
		goto out;
	}
	size_t i = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, list)
	{
		if ((r = parse_entry(it, i, &out->backends[i], e)) < 0)
			goto out;
		for (size_t j = 0; j < i; j++)
			if (strcmp(out->backends[j].pool, out->backends[i].pool) == 0) {
				r = err_set(
				    e, -EINVAL,
				    "duplicate pool/VG \"%s\" in backends[%zu] and backends[%zu]",
				    out->backends[i].pool, j, i);
				goto out;
			}
		i++;
	}
out:
	cJSON_Delete(root);
	if (r < 0)
		agent_config_clear(out);
	return r;
}

int agent_config_load(const char *path, struct agent_config *out, struct err *e)
{
	char *buf = NULL;
	size_t len = 0;
	struct err re = {0};
	memset(out, 0, sizeof(*out));
	int r = file_read_all(path, 1u << 20, &buf, &len, &re);
	if (r < 0)
		return err_set(e, r, "config: cannot read %s: %s", path, strerror(-r));
	r = agent_config_parse(buf, len, out, e);
	free(buf);
	return r;
}

int agent_config_check_dirs(const struct agent_config *c, struct err *e)
{
	for (size_t i = 0; i < c->n; i++) {
		const struct backend_config *b = &c->backends[i];
		char probe[4096];
		struct stat st;
		if (b->kind != BACKEND_FILE)
			continue;
		if (stat(b->directory, &st) < 0 || !S_ISDIR(st.st_mode))
			return err_set(e, -ENOENT, "backends[%zu].file.directory %s does not exist",
			               i, b->directory);
		snprintf(probe, sizeof(probe), "%s/.pillar-csi-probe", b->directory);
		int fd = open(probe, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
		if (fd < 0)
			return err_set(
			    e, -EINVAL,
			    "backends[%zu].file.directory %s does not support direct I/O (tmpfs?)",
			    i, b->directory);
		close(fd);
		unlink(probe);
	}
	return 0;
}
