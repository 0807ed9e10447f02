/* model/agent_config — the agent's configuration file and its rules (agent_config.h). */
#include "model/agent_config.h"

#include <errno.h>
#include <string.h>

#include "model/codec.h"

static bool bad_name(const char *s)
{
	return strchr(s, '/') || strcmp(s, ".") == 0 || strcmp(s, "..") == 0 ||
	       strlen(s) > MODEL_AGENT_NAME_MAX;
}

static bool empty(const char *s)
{
	return !s || !*s;
}

static int zfs_check(const void *obj, const char *path, const void *earlier, size_t index,
                     struct err *e)
{
	const struct model_agent_zfs *z = obj;
	(void)earlier, (void)index;
	if (z->has_properties)
		return err_set(e, -EINVAL,
		               "%s.properties: ZFS properties are set per volume (PillarStore or "
		               "PillarStorageClass), not in the agent config",
		               path);
	if (empty(z->pool))
		return err_set(e, -EINVAL, "%s.pool is required", path);
	if (bad_name(z->pool))
		return err_set(e, -EINVAL, "%s.pool: invalid name \"%s\"", path, z->pool);
	if (z->volume_type && strcmp(z->volume_type, "zvol") != 0)
		return err_set(e, -EINVAL, "%s.volumeType: only \"zvol\" is supported", path);
	return 0;
}

static int lvm_check(const void *obj, const char *path, const void *earlier, size_t index,
                     struct err *e)
{
	const struct model_agent_lvm *l = obj;
	const char *mode = l->provisioning_mode;
	(void)earlier, (void)index;
	if (empty(l->volume_group))
		return err_set(e, -EINVAL, "%s.volumeGroup is required", path);
	if (bad_name(l->volume_group) || (l->thin_pool && bad_name(l->thin_pool)))
		return err_set(e, -EINVAL, "%s: invalid name", path);
	if (mode && strcmp(mode, "linear") != 0 && strcmp(mode, "thin") != 0)
		return err_set(e, -EINVAL, "%s.provisioningMode: must be \"linear\" or \"thin\"",
		               path);
	if (mode && strcmp(mode, "thin") == 0 && empty(l->thin_pool))
		return err_set(e, -EINVAL, "%s: provisioningMode thin requires thinPool", path);
	return 0;
}

static int file_check(const void *obj, const char *path, const void *earlier, size_t index,
                      struct err *e)
{
	const struct model_agent_file *f = obj;
	(void)earlier, (void)index;
	if (empty(f->pool))
		return err_set(e, -EINVAL, "%s.pool is required", path);
	if (bad_name(f->pool))
		return err_set(e, -EINVAL, "%s.pool: invalid name \"%s\"", path, f->pool);
	if (empty(f->directory))
		return err_set(e, -EINVAL, "%s.directory is required", path);
	if (f->directory[0] != '/')
		return err_set(e, -EINVAL, "%s.directory: must be an absolute path", path);
	return 0;
}

/* The name volumes route by: the pool, or the volume group. */
static const char *pool_of(const struct model_agent_backend *b)
{
	return b->has_zfs ? b->zfs.pool : b->has_lvm ? b->lvm.volume_group : b->file.pool;
}

static int backend_given(const void *obj, const char *path, struct err *e)
{
	const struct model_agent_backend *b = obj;
	if (b->has_zfs + b->has_lvm + b->has_file != 1)
		return err_set(e, -EINVAL, "%s: exactly one of zfs or lvm must be set", path);
	return 0;
}

static int backend_check(const void *obj, const char *path, const void *earlier, size_t index,
                         struct err *e)
{
	const struct model_agent_backend *before = earlier;
	const char *pool = pool_of(obj);
	(void)path;
	for (size_t j = 0; j < index; j++)
		if (strcmp(pool_of(&before[j]), pool) == 0)
			return err_set(
			    e, -EINVAL,
			    "duplicate pool/VG \"%s\" in backends[%zu] and backends[%zu]", pool, j,
			    index);
	return 0;
}

static int config_check(const void *obj, const char *path, const void *earlier, size_t index,
                        struct err *e)
{
	const struct model_agent_config *c = obj;
	(void)path, (void)earlier, (void)index;
	if (c->n_backends == 0)
		return err_set(e, -EINVAL, "backends: at least one backend is required");
	return 0;
}

#define T struct model_agent_zfs
static const struct model_field zfs_fields[] = {
    MODEL_F_STR("pool", pool),
    MODEL_F_STR("parentDataset", parent_dataset),
    MODEL_F_STR("volumeType", volume_type),
    MODEL_F_ANY("properties", properties),
};
#undef T
static const struct model_rules zfs_rules = {.check = zfs_check};
MODEL_TYPE_RULES(model_agent_zfs_type, struct model_agent_zfs, zfs_fields, &zfs_rules);

#define T struct model_agent_lvm
static const struct model_field lvm_fields[] = {
    MODEL_F_STR("volumeGroup", volume_group),
    MODEL_F_STR("thinPool", thin_pool),
    MODEL_F_STR("provisioningMode", provisioning_mode),
};
#undef T
static const struct model_rules lvm_rules = {.check = lvm_check};
MODEL_TYPE_RULES(model_agent_lvm_type, struct model_agent_lvm, lvm_fields, &lvm_rules);

#define T struct model_agent_file
static const struct model_field file_fields[] = {
    MODEL_F_STR("pool", pool),
    MODEL_F_STR("directory", directory),
    MODEL_F_BOOL("preallocate", preallocate),
};
#undef T
static const struct model_rules file_rules = {.check = file_check};
MODEL_TYPE_RULES(model_agent_file_type, struct model_agent_file, file_fields, &file_rules);

#define T struct model_agent_backend
static const struct model_field backend_fields[] = {
    MODEL_F_OBJ_HAS("zfs", zfs, &model_agent_zfs_type),
    MODEL_F_OBJ_HAS("lvm", lvm, &model_agent_lvm_type),
    MODEL_F_OBJ_HAS("file", file, &model_agent_file_type),
};
#undef T
static const struct model_rules backend_rules = {.given = backend_given, .check = backend_check};
MODEL_TYPE_RULES(model_agent_backend_type, struct model_agent_backend, backend_fields,
                 &backend_rules);

#define T struct model_agent_config
static const struct model_field config_fields[] = {
    MODEL_F_LIST("backends", backends, n_backends, &model_agent_backend_type),
};
#undef T
static const struct model_rules config_rules = {.check = config_check};
MODEL_TYPE_RULES(model_agent_config_type, struct model_agent_config, config_fields, &config_rules);

int model_agent_config_decode(const char *text, size_t len, struct model_agent_config *out,
                              struct err *e)
{
	return model_type_decode_strict(&model_agent_config_type, text, len, "config", out, e);
}
