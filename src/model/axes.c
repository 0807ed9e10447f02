/* model axes: the backend, protocol and filesystem configuration documents (crds.md §8) and
 * the bounds of the nvmeofTcp tunables (crds.md §4.1, §13, §16). */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "model/codec.h"
#include "model/pillar.h"
#include "rules/bounds.h"
#include "rules/keys.h"

#define T struct model_zfs
static const struct model_field zfs_fields[] = {
    MODEL_F_STR("volumeType", volume_type),
    MODEL_F_STR("pool", pool),
    MODEL_F_STR("parentDataset", parent_dataset),
    MODEL_F_TEXTMAP_HAS("properties", properties),
};
#undef T
MODEL_TYPE(model_zfs_type, struct model_zfs, zfs_fields);

#define T struct model_lvm
static const struct model_field lvm_fields[] = {
    MODEL_F_STR("volumeGroup", volume_group),
    MODEL_F_STR("thinPool", thin_pool),
    MODEL_F_STR("provisioningMode", provisioning_mode),
};
#undef T
MODEL_TYPE(model_lvm_type, struct model_lvm, lvm_fields);

#define T struct model_file
static const struct model_field file_fields[] = {
    MODEL_F_STR("pool", pool),
    MODEL_F_BOOL("preallocate", preallocate),
};
#undef T
MODEL_TYPE(model_file_type, struct model_file, file_fields);

#define T struct model_backend
static const struct model_field backend_fields[] = {
    MODEL_F_OBJ_HAS("zfs", zfs, &model_zfs_type),
    MODEL_F_OBJ_HAS("lvm", lvm, &model_lvm_type),
    MODEL_F_OBJ_HAS("file", file, &model_file_type),
};
#undef T
MODEL_TYPE(model_backend_type, struct model_backend, backend_fields);

#define T struct model_dhchap
static const struct model_field dhchap_fields[] = {
    MODEL_F_BOOL("bidirectional", bidirectional),
    MODEL_F_STR("hash", hash),
    MODEL_F_STR("dhGroup", dh_group),
};
#undef T
MODEL_TYPE(model_dhchap_type, struct model_dhchap, dhchap_fields);

#define T struct model_nvmeof_tcp
static const struct model_field nvmeof_tcp_fields[] = {
    MODEL_F_INT("port", port),
    MODEL_F_BOOL("acl", acl),
    MODEL_F_BOOL("deletePodsAfterCtrlLoss", delete_pods_after_ctrl_loss),
    MODEL_F_INT("maxQueueSize", max_queue_size),
    MODEL_F_INT("inCapsuleDataSize", in_capsule_data_size),
    MODEL_F_INT("ctrlLossTmo", ctrl_loss_tmo),
    MODEL_F_INT("reconnectDelay", reconnect_delay),
    MODEL_F_OBJ_HAS("dhchap", dhchap, &model_dhchap_type),
};
#undef T
MODEL_TYPE(model_nvmeof_tcp_type, struct model_nvmeof_tcp, nvmeof_tcp_fields);

#define T struct model_protocol
static const struct model_field protocol_fields[] = {
    MODEL_F_OBJ_HAS("nvmeofTcp", nvmeof_tcp, &model_nvmeof_tcp_type),
};
#undef T
MODEL_TYPE(model_protocol_type, struct model_protocol, protocol_fields);

#define T struct model_filesystem
static const struct model_field filesystem_fields[] = {
    MODEL_F_STR("fsType", fs_type),
    MODEL_F_STRS_HAS("mkfsOptions", mkfs_options),
    MODEL_F_STRS_HAS("mountOptions", mount_options),
};
#undef T
MODEL_TYPE(model_filesystem_type, struct model_filesystem, filesystem_fields);

#define T struct model_resolved
static const struct model_field resolved_fields[] = {
    MODEL_F_OBJ_HAS("backend", backend, &model_backend_type),
    MODEL_F_OBJ_HAS("protocol", protocol, &model_protocol_type),
    MODEL_F_OBJ_HAS("filesystem", filesystem, &model_filesystem_type),
};
#undef T
MODEL_TYPE(model_resolved_type, struct model_resolved, resolved_fields);

/* ---- tunables ------------------------------------------------------------------------------ */

#define TUN(n, ctx, lo, hi, m)                                        \
	{                                                             \
		n, ctx, lo, hi, offsetof(struct model_nvmeof_tcp, m), \
		    offsetof(struct model_nvmeof_tcp, has_##m)        \
	}
const struct model_tunable model_tunables[MODEL_TUNABLES] = {
    TUN("maxQueueSize", RULES_CTX_MAX_QUEUE_SIZE, RULES_MAX_QUEUE_SIZE_MIN,
        RULES_MAX_QUEUE_SIZE_MAX, max_queue_size),
    TUN("inCapsuleDataSize", NULL, RULES_IN_CAPSULE_DATA_SIZE_MIN, RULES_IN_CAPSULE_DATA_SIZE_MAX,
        in_capsule_data_size),
    TUN("ctrlLossTmo", RULES_CTX_CTRL_LOSS_TMO, RULES_CTRL_LOSS_TMO_MIN, RULES_CTRL_LOSS_TMO_MAX,
        ctrl_loss_tmo),
    TUN("reconnectDelay", RULES_CTX_RECONNECT_DELAY, RULES_RECONNECT_DELAY_MIN,
        RULES_RECONNECT_DELAY_MAX, reconnect_delay),
};
#undef TUN

const struct model_tunable *model_tunable_find(const char *name)
{
	for (int i = 0; i < MODEL_TUNABLES; i++)
		if (!strcmp(model_tunables[i].name, name))
			return &model_tunables[i];
	return NULL;
}

int model_tunable_check(const struct model_tunable *t, int64_t v, const char *prefix, struct err *e)
{
	if (v >= t->min && v <= t->max)
		return 0;
	if (t->max != INT32_MAX) /* a range narrower than int32 */
		return err_set(e, -EINVAL, "%snvmeofTcp.%s must be between %lld and %lld", prefix,
		               t->name, (long long)t->min, (long long)t->max);
	if (v < t->min)
		return err_set(e, -EINVAL, "%snvmeofTcp.%s must be at least %lld", prefix, t->name,
		               (long long)t->min);
	return err_set(e, -EINVAL, "%snvmeofTcp.%s must be at most %lld", prefix, t->name,
	               (long long)t->max);
}

static const char *const dhchap_hashes[] = {"sha256", "sha384", "sha512", NULL};
static const char *const dhchap_groups[] = {"null",      "ffdhe2048", "ffdhe3072", "ffdhe4096",
                                            "ffdhe6144", "ffdhe8192", NULL};

bool model_dhchap_bidirectional(const struct model_dhchap *d)
{
	return !d->has_bidirectional || d->bidirectional;
}
const char *model_dhchap_hash(const struct model_dhchap *d)
{
	return d->hash ? d->hash : "sha256";
}
const char *model_dhchap_dh_group(const struct model_dhchap *d)
{
	return d->dh_group ? d->dh_group : "ffdhe2048";
}

static bool one_of(const char *v, const char *const *set)
{
	for (; *set; set++)
		if (strcmp(v, *set) == 0)
			return true;
	return false;
}

int model_dhchap_validate(const struct model_dhchap *d, const char *prefix, struct err *e)
{
	if (!one_of(model_dhchap_hash(d), dhchap_hashes))
		return err_set(e, -EINVAL,
		               "%snvmeofTcp.dhchap.hash must be one of sha256, sha384, sha512",
		               prefix);
	if (!one_of(model_dhchap_dh_group(d), dhchap_groups))
		return err_set(
		    e, -EINVAL,
		    "%snvmeofTcp.dhchap.dhGroup must be one of null, ffdhe2048, ffdhe3072, "
		    "ffdhe4096, ffdhe6144, ffdhe8192",
		    prefix);
	return 0;
}

int model_nvmeof_tcp_validate(const struct model_nvmeof_tcp *n, const char *prefix, struct err *e)
{
	for (int i = 0; i < MODEL_TUNABLES; i++) {
		const struct model_tunable *t = &model_tunables[i];
		if (!*(const bool *)((const char *)n + t->has_off))
			continue;
		int r =
		    model_tunable_check(t, *(const int64_t *)((const char *)n + t->off), prefix, e);
		if (r < 0)
			return r;
	}
	if (!n->has_dhchap)
		return 0;
	if (!(n->has_acl && n->acl))
		return err_set(
		    e, -EINVAL,
		    "%snvmeofTcp.dhchap needs acl: true (authentication is per allowed host)",
		    prefix);
	return model_dhchap_validate(&n->dhchap, prefix, e);
}

int64_t model_nvmeof_tcp_port(const struct model_nvmeof_tcp *n)
{
	return n->has_port ? n->port : 4420;
}

const char *model_lvm_mode(const struct model_lvm *l)
{
	return l->provisioning_mode ? l->provisioning_mode : "linear";
}

const char *model_zfs_volume_type(const struct model_zfs *z)
{
	return z->volume_type ? z->volume_type : "zvol";
}
