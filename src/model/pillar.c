/* model pillar: PillarAgent, PillarProtocol, PillarStore and PillarStorageClass (crds.md §3–§6):
 * field tables, validation with the spec's messages, and defaults. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/codec.h"
#include "model/pillar.h"

#define GROUP "pillar-csi.bhyoo.com/v1alpha1"

/* ---- PillarAgent --------------------------------------------------------------------------- */

#define T struct model_pa_node_ref
static const struct model_field pa_node_ref_fields[] = {
    MODEL_F_STR("name", name),
    MODEL_F_STR("addressType", address_type),
    MODEL_F_STR("addressSelector", address_selector),
    MODEL_F_INT("port", port),
};
#undef T
static MODEL_TYPE(pa_node_ref_type, struct model_pa_node_ref, pa_node_ref_fields);

#define T struct model_pa_external
static const struct model_field pa_external_fields[] = {
    MODEL_F_STR("address", address),
    MODEL_F_INT("port", port),
};
#undef T
static MODEL_TYPE(pa_external_type, struct model_pa_external, pa_external_fields);

#define T __typeof__(((struct model_pa *)0)->spec)
static const struct model_field pa_spec_fields[] = {
    MODEL_F_OBJ_HAS("nodeRef", node_ref, &pa_node_ref_type),
    MODEL_F_OBJ_HAS("external", external, &pa_external_type),
};
#undef T
static MODEL_TYPE(pa_spec_type, __typeof__(((struct model_pa *)0)->spec), pa_spec_fields);

#define T struct model_pa_caps
static const struct model_field pa_caps_fields[] = {
    MODEL_F_STRS("backends", backends),
    MODEL_F_STRS("protocols", protocols),
    MODEL_F_BOOL("nvmeTargetAuth", nvme_target_auth),
};
#undef T
static MODEL_TYPE(pa_caps_type, struct model_pa_caps, pa_caps_fields);

#define T struct model_pa_pool
static const struct model_field pa_pool_fields[] = {
    MODEL_F_STR("name", name),
    MODEL_F_STR("type", type),
    MODEL_F_QTY("total", total),
    MODEL_F_QTY("available", available),
    MODEL_F_STR("parentDataset", parent_dataset),
    MODEL_F_STR("thinPool", thin_pool),
};
#undef T
static MODEL_TYPE(pa_pool_type, struct model_pa_pool, pa_pool_fields);

#define T struct model_pa_dhchap_node
static const struct model_field pa_dhchap_node_fields[] = {
    MODEL_F_STR("node", node),
    MODEL_F_INT("generation", generation),
};
#undef T
static MODEL_TYPE(pa_dhchap_node_type, struct model_pa_dhchap_node, pa_dhchap_node_fields);

#define T struct model_pa_dhchap
static const struct model_field pa_dhchap_fields[] = {
    MODEL_F_LIST("installed", installed, n_installed, &pa_dhchap_node_type),
};
#undef T
static MODEL_TYPE(pa_dhchap_type, struct model_pa_dhchap, pa_dhchap_fields);

void model_pa_dhchap_clear(struct model_pa_dhchap *d)
{
	model_type_clear(&pa_dhchap_type, d);
	memset(d, 0, sizeof(*d));
}

#define T __typeof__(((struct model_pa *)0)->status)
static const struct model_field pa_status_fields[] = {
    MODEL_F_STR("resolvedAddress", resolved_address),
    MODEL_F_STR("agentVersion", agent_version),
    MODEL_F_OBJ_HAS("capabilities", capabilities, &pa_caps_type),
    MODEL_F_LIST("discoveredPools", pools, n_pools, &pa_pool_type),
    MODEL_F_INT("volumes", volumes),
    MODEL_F_INT("publishedVolumes", published_volumes),
    MODEL_F_INT("connectedHosts", connected_hosts),
    MODEL_F_INT("outageBudgetSeconds", outage_budget_seconds),
    MODEL_F_OBJ_HAS("dhchap", dhchap, &pa_dhchap_type),
    MODEL_F_CONDS("conditions", conditions),
};
#undef T
static MODEL_TYPE(pa_status_type, __typeof__(((struct model_pa *)0)->status), pa_status_fields);

#define T struct model_pa
static const struct model_field pa_fields[] = {
    MODEL_F_META(),
    MODEL_F_OBJ("spec", spec, &pa_spec_type),
    MODEL_F_OBJ("status", status, &pa_status_type),
};
#undef T
static MODEL_TYPE(pa_type, struct model_pa, pa_fields);
static int pa_validate(const void *obj, struct err *e)
{
	return model_pa_validate(obj, e);
}

static int pa_validate_update(const void *old, const void *obj, struct err *e)
{
	return model_pa_validate_update(old, obj, e);
}

const struct model_kind model_pa_kind = {"PillarAgent",      GROUP, &pa_type, pa_validate,
                                         pa_validate_update, NULL};

static bool dns_label(const char *s, size_t max)
{
	size_t n = s ? strlen(s) : 0;
	if (n < 1 || n > max || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

static bool ip_literal(const char *s)
{
	unsigned char buf[16];
	return s && (inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1);
}

static bool cidr(const char *s)
{
	char ip[64], *end;
	const char *slash = strchr(s, '/');
	if (!slash || (size_t)(slash - s) >= sizeof(ip) || !slash[1])
		return false;
	snprintf(ip, sizeof(ip), "%.*s", (int)(slash - s), s);
	long bits = strtol(slash + 1, &end, 10);
	unsigned char buf[16];
	if (*end || bits < 0)
		return false;
	if (inet_pton(AF_INET, ip, buf) == 1)
		return bits <= 32;
	return inet_pton(AF_INET6, ip, buf) == 1 && bits <= 128;
}

static int port_check(bool has, int64_t port, const char *path, struct err *e)
{
	if (has && (port < 1 || port > 65535))
		return err_set(e, -EINVAL, "%s must be between 1 and 65535", path);
	return 0;
}

int model_pa_validate(const struct model_pa *pa, struct err *e)
{
	const struct model_pa_node_ref *n = &pa->spec.node_ref;
	const struct model_pa_external *x = &pa->spec.external;
	if (pa->spec.has_node_ref == pa->spec.has_external)
		return err_set(e, -EINVAL,
		               "exactly one of spec.nodeRef or spec.external must be set");
	if (!dns_label(pa->meta.name, 63))
		return err_set(e, -EINVAL,
		               "PillarAgent name must be a DNS label of at most 63 characters");
	if (pa->spec.has_node_ref) {
		if (!n->name || !*n->name)
			return err_set(e, -EINVAL, "spec.nodeRef.name must not be empty");
		if (n->address_type && strcmp(n->address_type, "InternalIP") &&
		    strcmp(n->address_type, "ExternalIP"))
			return err_set(e, -EINVAL,
			               "spec.nodeRef.addressType must be InternalIP or ExternalIP");
		if (n->address_selector && !cidr(n->address_selector))
			return err_set(e, -EINVAL,
			               "spec.nodeRef.addressSelector must be a CIDR such as "
			               "10.0.0.0/24");
		return port_check(n->has_port, n->port, "spec.nodeRef.port", e);
	}
	if (!ip_literal(x->address))
		return err_set(e, -EINVAL, "spec.external.address must be an IP address");
	if (!x->has_port)
		return err_set(e, -EINVAL, "spec.external.port is required");
	return port_check(true, x->port, "spec.external.port", e);
}

const char *model_pa_address_type(const struct model_pa *pa)
{
	return pa->spec.node_ref.address_type ? pa->spec.node_ref.address_type : "InternalIP";
}

int64_t model_pa_node_port(const struct model_pa *pa, int64_t default_port)
{
	return pa->spec.node_ref.has_port ? pa->spec.node_ref.port : default_port;
}

/* ---- PillarProtocol ------------------------------------------------------------------------ */

#define T __typeof__(((struct model_pstr *)0)->spec)
static const struct model_field pstr_spec_fields[] = {
    MODEL_F_OBJ_HAS("protocol", protocol, &model_protocol_type),
};
#undef T
static MODEL_TYPE(pstr_spec_type, __typeof__(((struct model_pstr *)0)->spec), pstr_spec_fields);

#define T __typeof__(((struct model_pstr *)0)->status)
static const struct model_field pstr_status_fields[] = {
    MODEL_F_INT("storageClassCount", storage_class_count),
    MODEL_F_STRS("activeAgents", active_agents),
    MODEL_F_CONDS("conditions", conditions),
};
#undef T
static MODEL_TYPE(pstr_status_type, __typeof__(((struct model_pstr *)0)->status),
                  pstr_status_fields);

#define T struct model_pstr
static const struct model_field pstr_fields[] = {
    MODEL_F_META(),
    MODEL_F_OBJ("spec", spec, &pstr_spec_type),
    MODEL_F_OBJ("status", status, &pstr_status_type),
};
#undef T
static MODEL_TYPE(pstr_type, struct model_pstr, pstr_fields);
static int pstr_validate(const void *obj, struct err *e)
{
	return model_pstr_validate(obj, e);
}

static int pstr_validate_update(const void *old, const void *obj, struct err *e)
{
	return model_pstr_validate_update(old, obj, e);
}

const struct model_kind model_pstr_kind = {"PillarProtocol",     GROUP, &pstr_type, pstr_validate,
                                           pstr_validate_update, NULL};

/* Members set: nvmeofTcp plus any member this version does not know. */
static size_t members(const struct model_protocol *p)
{
	return (size_t)p->has_nvmeof_tcp + model_unknown_count(&model_protocol_type, p);
}

int model_pstr_validate(const struct model_pstr *p, struct err *e)
{
	const struct model_protocol *pr = &p->spec.protocol;
	if (!p->spec.has_protocol || members(pr) != 1)
		return err_set(e, -EINVAL, "spec.protocol must set exactly one member (nvmeofTcp)");
	const struct model_nvmeof_tcp *n = &pr->nvmeof_tcp;
	if (port_check(n->has_port, n->port, "spec.protocol.nvmeofTcp.port", e) < 0)
		return -EINVAL;
	return model_nvmeof_tcp_validate(n, "spec.protocol.", e);
}

/* ---- PillarStore --------------------------------------------------------------------------- */

#define T __typeof__(((struct model_pst *)0)->spec)
static const struct model_field pst_spec_fields[] = {
    MODEL_F_STR("agentRef", agent_ref),
    MODEL_F_OBJ_HAS("backend", backend, &model_backend_type),
};
#undef T
static MODEL_TYPE(pst_spec_type, __typeof__(((struct model_pst *)0)->spec), pst_spec_fields);

#define T __typeof__(((struct model_pst *)0)->status.capacity)
static const struct model_field pst_capacity_fields[] = {
    MODEL_F_QTY("total", total),
    MODEL_F_QTY("available", available),
    MODEL_F_QTY("used", used),
};
#undef T
static MODEL_TYPE(pst_capacity_type, __typeof__(((struct model_pst *)0)->status.capacity),
                  pst_capacity_fields);

#define T __typeof__(((struct model_pst *)0)->status)
static const struct model_field pst_status_fields[] = {
    MODEL_F_OBJ_HAS("capacity", capacity, &pst_capacity_type),
    MODEL_F_CONDS("conditions", conditions),
};
#undef T
static MODEL_TYPE(pst_status_type, __typeof__(((struct model_pst *)0)->status), pst_status_fields);

#define T struct model_pst
static const struct model_field pst_fields[] = {
    MODEL_F_META(),
    MODEL_F_OBJ("spec", spec, &pst_spec_type),
    MODEL_F_OBJ("status", status, &pst_status_type),
};
#undef T
static MODEL_TYPE(pst_type, struct model_pst, pst_fields);
static int pst_validate(const void *obj, struct err *e)
{
	return model_pst_validate(obj, e);
}

static int pst_validate_update(const void *old, const void *obj, struct err *e)
{
	return model_pst_validate_update(old, obj, e);
}

const struct model_kind model_pst_kind = {"PillarStore",       GROUP, &pst_type, pst_validate,
                                          pst_validate_update, NULL};

static int no_volsize(const struct model_map *props, const char *prefix, struct err *e)
{
	if (model_map_get(props, "volsize"))
		return err_set(e, -EINVAL,
		               "%szfs.properties: volsize is managed by the volume capacity",
		               prefix);
	return 0;
}

static int lvm_mode_check(const struct model_lvm *l, struct err *e)
{
	const char *m = l->provisioning_mode;
	if (m && strcmp(m, "linear") && strcmp(m, "thin"))
		return err_set(e, -EINVAL, "lvm.provisioningMode must be linear or thin");
	return 0;
}

int model_pst_validate(const struct model_pst *p, struct err *e)
{
	const struct model_backend *b = &p->spec.backend;
	if (!p->spec.agent_ref || !*p->spec.agent_ref)
		return err_set(e, -EINVAL, "spec.agentRef is required");
	if (b->has_zfs + b->has_lvm + b->has_file != 1)
		return err_set(e, -EINVAL, "spec.backend must set exactly one of zfs or lvm");
	if (b->has_zfs) {
		const char *pd = b->zfs.parent_dataset;
		if (!b->zfs.pool || !*b->zfs.pool)
			return err_set(e, -EINVAL, "spec.backend.zfs.pool is required");
		if (strcmp(model_zfs_volume_type(&b->zfs), "zvol"))
			return err_set(e, -EINVAL, "spec.backend.zfs.volumeType must be zvol");
		if (pd && pd[0] == '/')
			return err_set(e, -EINVAL,
			               "spec.backend.zfs.parentDataset must be a relative dataset "
			               "path");
		return no_volsize(&b->zfs.properties, "", e);
	}
	if (b->has_lvm) {
		if (!b->lvm.volume_group || !*b->lvm.volume_group)
			return err_set(e, -EINVAL, "spec.backend.lvm.volumeGroup is required");
		if (lvm_mode_check(&b->lvm, e) < 0)
			return -EINVAL;
		if (!strcmp(model_lvm_mode(&b->lvm), "thin") && !b->lvm.thin_pool)
			return err_set(e, -EINVAL,
			               "lvm.provisioningMode thin requires lvm.thinPool");
		return 0;
	}
	if (!b->file.pool || !*b->file.pool)
		return err_set(e, -EINVAL, "spec.backend.file.pool is required");
	return 0;
}

/* ---- PillarStorageClass -------------------------------------------------------------------- */

#define T __typeof__(((struct model_psc *)0)->spec.storage_class)
static const struct model_field psc_sc_fields[] = {
    MODEL_F_STR("name", name),
    MODEL_F_STR("reclaimPolicy", reclaim_policy),
    MODEL_F_STR("volumeBindingMode", volume_binding_mode),
    MODEL_F_BOOL("allowVolumeExpansion", allow_volume_expansion),
};
#undef T
static MODEL_TYPE(psc_sc_type, __typeof__(((struct model_psc *)0)->spec.storage_class),
                  psc_sc_fields);

#define T __typeof__(((struct model_psc *)0)->spec.overrides)
static const struct model_field psc_overrides_fields[] = {
    MODEL_F_OBJ_HAS("backend", backend, &model_backend_type),
    MODEL_F_OBJ_HAS("protocol", protocol, &model_protocol_type),
};
#undef T
static MODEL_TYPE(psc_overrides_type, __typeof__(((struct model_psc *)0)->spec.overrides),
                  psc_overrides_fields);

#define T __typeof__(((struct model_psc *)0)->spec)
static const struct model_field psc_spec_fields[] = {
    MODEL_F_STR("storeRef", store_ref),
    MODEL_F_STR("protocolRef", protocol_ref),
    MODEL_F_OBJ_HAS("storageClass", storage_class, &psc_sc_type),
    MODEL_F_OBJ_HAS("filesystem", filesystem, &model_filesystem_type),
    MODEL_F_OBJ_HAS("overrides", overrides, &psc_overrides_type),
};
#undef T
static MODEL_TYPE(psc_spec_type, __typeof__(((struct model_psc *)0)->spec), psc_spec_fields);

#define T __typeof__(((struct model_psc *)0)->status)
static const struct model_field psc_status_fields[] = {
    MODEL_F_STR("storageClassName", storage_class_name),
    MODEL_F_CONDS("conditions", conditions),
};
#undef T
static MODEL_TYPE(psc_status_type, __typeof__(((struct model_psc *)0)->status), psc_status_fields);

#define T struct model_psc
static const struct model_field psc_fields[] = {
    MODEL_F_META(),
    MODEL_F_OBJ("spec", spec, &psc_spec_type),
    MODEL_F_OBJ("status", status, &psc_status_type),
};
#undef T
static MODEL_TYPE(psc_type, struct model_psc, psc_fields);
static int psc_validate(const void *obj, struct err *e)
{
	return model_psc_validate(obj, e);
}

static int psc_validate_update(const void *old, const void *obj, struct err *e)
{
	return model_psc_validate_update(old, obj, e);
}

const struct model_kind model_psc_kind = {"PillarStorageClass", GROUP, &psc_type, psc_validate,
                                          psc_validate_update,  NULL};

static bool one_of(const char *v, const char *a, const char *b)
{
	return !v || !strcmp(v, a) || !strcmp(v, b);
}

int model_psc_validate(const struct model_psc *p, struct err *e)
{
	const __typeof__(p->spec.storage_class) *sc = &p->spec.storage_class;
	const struct model_backend *ob = &p->spec.overrides.backend;
	if (!p->spec.store_ref || !*p->spec.store_ref)
		return err_set(e, -EINVAL, "spec.storeRef is required");
	if (!p->spec.protocol_ref || !*p->spec.protocol_ref)
		return err_set(e, -EINVAL, "spec.protocolRef is required");
	if (sc->name && store_validate_name("spec.storageClass.name", sc->name, e) < 0)
		return -EINVAL;
	if (!one_of(sc->reclaim_policy, "Delete", "Retain"))
		return err_set(e, -EINVAL,
		               "spec.storageClass.reclaimPolicy must be Delete or Retain");
	if (!one_of(sc->volume_binding_mode, "Immediate", "WaitForFirstConsumer"))
		return err_set(e, -EINVAL,
		               "spec.storageClass.volumeBindingMode must be Immediate or "
		               "WaitForFirstConsumer");
	if (!one_of(p->spec.filesystem.fs_type, "ext4", "xfs"))
		return err_set(e, -EINVAL, "spec.filesystem.fsType must be ext4 or xfs");
	if (ob->has_zfs + ob->has_lvm + ob->has_file > 1)
		return err_set(e, -EINVAL,
		               "spec.overrides.backend must set at most one of zfs or lvm");
	if (ob->has_zfs && no_volsize(&ob->zfs.properties, "", e) < 0)
		return -EINVAL;
	if (ob->has_lvm && lvm_mode_check(&ob->lvm, e) < 0)
		return -EINVAL;
	if (p->spec.overrides.protocol.nvmeof_tcp.has_dhchap)
		return err_set(
		    e, -EINVAL,
		    "spec.overrides.protocol.nvmeofTcp.dhchap cannot be overridden; set it "
		    "in the PillarProtocol");
	return model_nvmeof_tcp_validate(&p->spec.overrides.protocol.nvmeof_tcp,
	                                 "spec.overrides.protocol.", e);
}

const char *model_psc_sc_name(const struct model_psc *p)
{
	const char *n = p->spec.storage_class.name;
	return n && *n ? n : p->meta.name;
}

const char *model_psc_reclaim_policy(const struct model_psc *p)
{
	return p->spec.storage_class.reclaim_policy ?: "Delete";
}

const char *model_psc_binding_mode(const struct model_psc *p)
{
	return p->spec.storage_class.volume_binding_mode ?: "Immediate";
}

bool model_psc_allow_expansion(const struct model_psc *p)
{
	return !p->spec.storage_class.has_allow_volume_expansion ||
	       p->spec.storage_class.allow_volume_expansion;
}

const char *model_psc_fs_type(const struct model_psc *p)
{
	return p->spec.filesystem.fs_type ?: "ext4";
}

/* ---- transition rules (the CRDs' CEL rules on oldSelf) --------------------------------------- */

static bool same_str(const char *a, const char *b)
{
	return a && b ? strcmp(a, b) == 0 : a == b;
}

int model_pa_validate_update(const struct model_pa *old, const struct model_pa *pa, struct err *e)
{
	if (old->spec.has_node_ref != pa->spec.has_node_ref)
		return err_set(e, -EINVAL, "spec.nodeRef and spec.external cannot be switched");
	if (pa->spec.has_node_ref && !same_str(old->spec.node_ref.name, pa->spec.node_ref.name))
		return err_set(e, -EINVAL, "spec.nodeRef.name is immutable");
	return 0;
}

int model_pstr_validate_update(const struct model_pstr *old, const struct model_pstr *p,
                               struct err *e)
{
	const struct model_nvmeof_tcp *a = &old->spec.protocol.nvmeof_tcp;
	const struct model_nvmeof_tcp *b = &p->spec.protocol.nvmeof_tcp;

	if (!old->spec.protocol.has_nvmeof_tcp || !p->spec.protocol.has_nvmeof_tcp)
		return 0;
	if (model_nvmeof_tcp_port(a) != model_nvmeof_tcp_port(b))
		return err_set(e, -EINVAL, "spec.protocol.nvmeofTcp.port is immutable");
	if ((a->has_acl && a->acl) != (b->has_acl && b->acl))
		return err_set(e, -EINVAL, "spec.protocol.nvmeofTcp.acl is immutable");
	return 0;
}

int model_pst_validate_update(const struct model_pst *old, const struct model_pst *p, struct err *e)
{
	const struct model_backend *a = &old->spec.backend, *b = &p->spec.backend;

	if (!same_str(old->spec.agent_ref, p->spec.agent_ref))
		return err_set(e, -EINVAL, "spec.agentRef is immutable");
	if (a->has_zfs != b->has_zfs || a->has_lvm != b->has_lvm || a->has_file != b->has_file)
		return err_set(e, -EINVAL, "spec.backend cannot switch between zfs and lvm");
	if (b->has_zfs && (!same_str(a->zfs.pool, b->zfs.pool) ||
	                   !same_str(a->zfs.parent_dataset, b->zfs.parent_dataset) ||
	                   strcmp(model_zfs_volume_type(&a->zfs), model_zfs_volume_type(&b->zfs))))
		return err_set(e, -EINVAL,
		               "backend.zfs.pool, parentDataset and volumeType are immutable");
	if (b->has_lvm && (!same_str(a->lvm.volume_group, b->lvm.volume_group) ||
	                   !same_str(a->lvm.thin_pool, b->lvm.thin_pool)))
		return err_set(e, -EINVAL, "backend.lvm.volumeGroup and thinPool are immutable");
	if (b->has_file && !same_str(a->file.pool, b->file.pool))
		return err_set(e, -EINVAL, "backend.file.pool is immutable");
	return 0;
}

int model_psc_validate_update(const struct model_psc *old, const struct model_psc *p, struct err *e)
{
	const char *a = old->spec.storage_class.name, *b = p->spec.storage_class.name;

	if (!same_str(old->spec.store_ref, p->spec.store_ref))
		return err_set(e, -EINVAL, "spec.storeRef is immutable");
	if (!same_str(old->spec.protocol_ref, p->spec.protocol_ref))
		return err_set(e, -EINVAL, "spec.protocolRef is immutable");
	if (strcmp(a ? a : "", b ? b : ""))
		return err_set(e, -EINVAL, "spec.storageClass.name is immutable");
	return 0;
}
