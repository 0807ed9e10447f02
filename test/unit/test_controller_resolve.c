/* Configuration resolution against crds.md §8–§13: precedence of store/protocol, class
 * (PillarStorageClass or hand-written StorageClass documents) and PVC annotations; every
 * rejection message of §13; the mkfs allowlist of §12.1; the YAML document rules of §8; the
 * volume context keys of csi.md §3 (tunables present only when set). */
#include "base/yaml.h"
#include "controller/resolve.h"
#include "ctl_fixture.h"
#include "rules/mkfs.h"

static void setup(void)
{
	fx_setup();
	fx_objects(false);
}

static struct model_map P(const char *const *kv) {
	struct model_map m = {0};
	for (; kv && kv[0]; kv += 2)
		ck_assert_int_eq(model_map_set(&m, kv[0], kv[1]), 0);
	return m;
}

/* resolve with params (and a PVC default/claim when pvc_ann_json given) */
static int
R(const char *const *kv, bool block, const char *pvc_ann_json, struct resolve_out *o,
  struct grpc_status *gs)
{
	static int n;
	char pvc[64];
	struct model_map p = P(kv);
	if (pvc_ann_json) {
		char meta[4096];
		snprintf(pvc, sizeof(pvc), "claim-%d", ++n);
		snprintf(meta, sizeof(meta), "\"annotations\":%s", pvc_ann_json);
		fx_put("PersistentVolumeClaim", "default", pvc, meta, "{}", NULL);
		model_map_set(&p, "csi.storage.k8s.io/pvc/name", pvc);
		model_map_set(&p, "csi.storage.k8s.io/pvc/namespace", "default");
	}
	int r = resolve_volume(fx_st, &p, block, NULL, o, gs);
	model_map_clear(&p);
	return r;
}

#define SC_PSC  "pillar-csi.bhyoo.com/storage-class", "fast"
#define SC_REFS "pillar-csi.bhyoo.com/store-ref", "tank", "pillar-csi.bhyoo.com/protocol-ref", "tcp"

static void expect(const char *const *kv, bool block, const char *ann, int code, const char *msg)
{
	struct resolve_out o;
	struct grpc_status gs = {0};
	int r = R(kv, block, ann, &o, &gs);
	resolve_out_clear(&o);
	ck_assert_msg(r == code, "code %d, want %d (%s)", r, code, gs.msg);
	ck_assert_str_eq(gs.msg, msg);
}

static char *J(const cJSON *v)
{
	static char buf[2048];
	char *t = cJSON_PrintUnformatted(v);
	snprintf(buf, sizeof(buf), "%s", t ? t : "null");
	free(t);
	return buf;
}

/* The resolved configuration as JSON (the codec's encoding, as it is stored), or one member. */
static char *JR(const struct model_resolved *r, const char *member)
{
	static char buf[2048];
	char *t = model_type_encode_text(&model_resolved_type, r);
	cJSON *o = fx_parse(t ? t : "null");
	free(t);
	snprintf(buf, sizeof(buf), "%s", J(member ? cJSON_GetObjectItem(o, member) : o));
	cJSON_Delete(o);
	return buf;
}

/* A string map as a JSON object, in its order. */
static char *JM(const struct model_map *m)
{
	cJSON *o = cJSON_CreateObject();
	for (size_t i = 0; i < m->n; i++)
		cJSON_AddStringToObject(o, m->kv[i].key, m->kv[i].value);
	char *t = J(o);
	cJSON_Delete(o);
	return t;
}

START_TEST(test_precedence_psc_and_pvc)
{
	cJSON_Delete(NULL);
	fx_put("PillarStore", NULL, "z2", NULL,
	       "{\"agentRef\":\"storage-1\",\"backend\":{\"zfs\":{\"pool\":\"tank\","
	       "\"parentDataset\":\"k8s\","
	       "\"properties\":{\"compression\":\"lz4\",\"copies\":\"2\"}}}}",
	       NULL);
	fx_put("PillarProtocol", NULL, "p2", NULL,
	       "{\"protocol\":{\"nvmeofTcp\":{\"port\":4421,\"acl\":true,\"ctrlLossTmo\":600,"
	       "\"maxQueueSize\":64}}}",
	       NULL);
	fx_put("PillarStorageClass", NULL, "gold", NULL,
	       "{\"storeRef\":\"z2\",\"protocolRef\":\"p2\",\"filesystem\":{\"fsType\":\"xfs\","
	       "\"mountOptions\":[\"noatime\"],"
	       "\"mkfsOptions\":[\"-K\"]},\"overrides\":{\"backend\":{\"zfs\":{\"properties\":{"
	       "\"compression\":\"zstd\"}}},"
	       "\"protocol\":{\"nvmeofTcp\":{\"reconnectDelay\":5}}}}",
	       NULL);
	const char *const kv[] = {"pillar-csi.bhyoo.com/storage-class", "gold",
	                          "csi.storage.k8s.io/fstype", "xfs", NULL};
	struct resolve_out o;
	struct grpc_status gs = {0};
	ck_assert_int_eq(R(kv, false,
	                   "{\"pillar-csi.bhyoo.com/backend\":\"zfs: {properties: {volblocksize: "
	                   "16K, sync: on}}\","
	                   "\"pillar-csi.bhyoo.com/protocol\":\"nvmeofTcp: {ctrlLossTmo: -1}\","
	                   "\"pillar-csi.bhyoo.com/filesystem\":\"{mkfsOptions: [\\\"-L\\\", "
	                   "data], mountOptions: []}\","
	                   "\"other.example.com/x\":\"ignored\"}",
	                   &o, &gs),
	                 0);
	ck_assert_str_eq(o.store, "z2");
	ck_assert_str_eq(o.agent, "storage-1");
	ck_assert_str_eq(o.psc, "gold");
	ck_assert_str_eq(o.backend_type, "zfs-zvol");
	ck_assert_str_eq(o.pool, "tank");
	ck_assert_str_eq(
	    JR(&o.resolved, NULL),
	    "{\"backend\":{\"zfs\":{\"volumeType\":\"zvol\",\"pool\":\"tank\",\"parentDataset\":"
	    "\"k8s\",\"properties\":{\"copies\":\"2\",\"compression\":\"zstd\",\"volblocksize\":"
	    "\"16K\",\"sync\":\"on\"}}},\"protocol\":{\"nvmeofTcp\":{\"port\":4421,\"acl\":true,"
	    "\"maxQueueSize\":64,\"ctrlLossTmo\":-1,\"reconnectDelay\":5}},\"filesystem\":{"
	    "\"fsType\":\"xfs\",\"mkfsOptions\":[\"-L\",\"data\"],\"mountOptions\":[]}}");
	ck_assert_str_eq(o.pvc_name, "claim-1");
	ck_assert_int_eq(strlen(o.pvc_uid), 36);
	/* the volume context carries the tunables that are set */
	struct model_pvst pvst;
	struct model_map ctx;
	ck_assert_int_eq(
	    model_decode_text(&model_pvst_kind,
	                      "{\"status\":{\"exportInfo\":{\"targetID\":\"nqn.x\",\"address\":"
	                      "\"10.0.0.5\",\"port\":4421,\"volumeRef\":\"1\"}}}",
	                      &pvst, NULL),
	    0);
	pvst.spec.has_resolved = true;
	pvst.spec.resolved = o.resolved;
	memset(&o.resolved, 0, sizeof(o.resolved));
	ck_assert_int_eq(resolve_volume_context(&pvst, &ctx), 0);
	ck_assert_str_eq(
	    JM(&ctx),
	    "{\"target_id\":\"nqn.x\",\"address\":\"10.0.0.5\",\"port\":\"4421\","
	    "\"pillar-csi.bhyoo.com/protocol-type\":\"nvmeof-tcp\",\"pillar-csi.bhyoo.com/"
	    "volume-ref\":\"1\",\"pillar-csi.bhyoo.com/nvmeof-max-queue-size\":\"64\","
	    "\"pillar-csi.bhyoo.com/nvmeof-ctrl-loss-tmo\":\"-1\",\"pillar-csi.bhyoo.com/"
	    "nvmeof-reconnect-delay\":\"5\",\"pillar-csi.bhyoo.com/fs-type\":\"xfs\","
	    "\"pillar-csi.bhyoo.com/mkfs-options\":\"[\\\"-L\\\",\\\"data\\\"]\"}");
	model_map_clear(&ctx);
	model_clear(&model_pvst_kind, &pvst);
	resolve_out_clear(&o);
}
END_TEST

/* The volume context of a volume resolved into o carries the authentication mode want and
 * nothing else of dhchap (no key, hash or group: the node needs only the mode). */
static void dhchap_context(struct resolve_out *o, const char *want)
{
	struct model_pvst pvst;
	struct model_map ctx;
	ck_assert_int_eq(model_decode_text(&model_pvst_kind,
	                                   "{\"status\":{\"exportInfo\":{\"targetID\":\"nqn.x\","
	                                   "\"address\":\"10.0.0.5\",\"port\":4420}}}",
	                                   &pvst, NULL),
	                 0);
	pvst.spec.has_resolved = true;
	pvst.spec.resolved = o->resolved;
	memset(&o->resolved, 0, sizeof(o->resolved));
	ck_assert_int_eq(resolve_volume_context(&pvst, &ctx), 0);
	char exp[512];
	snprintf(exp, sizeof(exp),
	         "{\"target_id\":\"nqn.x\",\"address\":\"10.0.0.5\",\"port\":\"4420\","
	         "\"pillar-csi.bhyoo.com/protocol-type\":\"nvmeof-tcp\",\"pillar-csi.bhyoo.com/"
	         "volume-ref\":\"1\",\"pillar-csi.bhyoo.com/"
	         "dhchap\":\"%s\",\"pillar-csi.bhyoo.com/fs-type\":\"ext4\"}",
	         want);
	ck_assert_str_eq(JM(&ctx), exp);
	model_map_clear(&ctx);
	model_clear(&model_pvst_kind, &pvst);
}

/* nvmeofTcp.dhchap (docs/authentication.md): recorded in the volume with every default filled
 * in; structural (never per volume); and the volume context carries no key material. */
START_TEST(test_dhchap_resolved_with_defaults)
{
	fx_put("PillarProtocol", NULL, "auth", NULL,
	       "{\"protocol\":{\"nvmeofTcp\":{\"acl\":true,\"dhchap\":{}}}}", NULL);
	fx_put("PillarProtocol", NULL, "auth1", NULL,
	       "{\"protocol\":{\"nvmeofTcp\":{\"acl\":true,\"dhchap\":{\"bidirectional\":false,"
	       "\"hash\":\"sha512\",\"dhGroup\":\"null\"}}}}",
	       NULL);
	const char *const kv[] = {"pillar-csi.bhyoo.com/store-ref", "tank",
	                          "pillar-csi.bhyoo.com/protocol-ref", "auth", NULL};
	const char *const kv1[] = {"pillar-csi.bhyoo.com/store-ref", "tank",
	                           "pillar-csi.bhyoo.com/protocol-ref", "auth1", NULL};
	struct resolve_out o;
	struct grpc_status gs = {0};
	ck_assert_int_eq(R(kv, false, NULL, &o, &gs), 0);
	ck_assert_str_eq(JR(&o.resolved, "protocol"),
	                 "{\"nvmeofTcp\":{\"port\":4420,\"acl\":true,\"dhchap\":{"
	                 "\"bidirectional\":true,\"hash\":\"sha256\",\"dhGroup\":\"ffdhe2048\"}}}");
	dhchap_context(&o, "bidirectional");
	resolve_out_clear(&o);
	ck_assert_int_eq(R(kv1, false, NULL, &o, &gs), 0);
	ck_assert_str_eq(JR(&o.resolved, "protocol"),
	                 "{\"nvmeofTcp\":{\"port\":4420,\"acl\":true,\"dhchap\":{"
	                 "\"bidirectional\":false,\"hash\":\"sha512\",\"dhGroup\":\"null\"}}}");
	dhchap_context(&o, "unidirectional");
	resolve_out_clear(&o);
	expect(
	    kv, false, "{\"pillar-csi.bhyoo.com/protocol\":\"nvmeofTcp: {dhchap: {}}\"}",
	    GRPC_INVALID_ARGUMENT,
	    "pillar-csi.bhyoo.com/protocol: nvmeofTcp.dhchap is structural and cannot be set per "
	    "volume");
}
END_TEST

START_TEST(test_precedence_handwritten_and_block)
{
	const char *const kv[] = {SC_REFS,
	                          "pillar-csi.bhyoo.com/protocol",
	                          "{\"nvmeofTcp\": {\"reconnectDelay\": 3}}",
	                          "pillar-csi.bhyoo.com/filesystem",
	                          "fsType: xfs\nmountOptions: [discard]",
	                          "csi.storage.k8s.io/fstype",
	                          "xfs",
	                          "csi.storage.k8s.io/provisioner-secret-name",
	                          "ignored",
	                          NULL};
	struct resolve_out o;
	struct grpc_status gs = {0};
	ck_assert_int_eq(R(kv, false, NULL, &o, &gs), 0);
	ck_assert_str_eq(o.psc, "");
	ck_assert_str_eq(JR(&o.resolved, "protocol"),
	                 "{\"nvmeofTcp\":{\"port\":4420,\"acl\":false,\"reconnectDelay\":3}}");
	ck_assert_str_eq(JR(&o.resolved, "filesystem"),
	                 "{\"fsType\":\"xfs\",\"mkfsOptions\":[],\"mountOptions\":[\"discard\"]}");
	resolve_out_clear(&o);
	/* fstype alone acts as fsType; Block drops the filesystem axis silently */
	const char *const kv2[] = {SC_REFS, "csi.storage.k8s.io/fstype", "xfs", NULL};
	ck_assert_int_eq(R(kv2, false, NULL, &o, &gs), 0);
	ck_assert_str_eq(o.resolved.filesystem.fs_type, "xfs");
	resolve_out_clear(&o);
	ck_assert_int_eq(R(kv, true, NULL, &o, &gs), 0);
	ck_assert(!o.resolved.has_filesystem);
	ck_assert_str_eq(JR(&o.resolved, "filesystem"), "null");
	resolve_out_clear(&o);
	/* no PVC object in the store: no annotations apply */
	struct model_map p = P(kv2);
	model_map_set(&p, "csi.storage.k8s.io/pvc/name", "absent");
	model_map_set(&p, "csi.storage.k8s.io/pvc/namespace", "default");
	ck_assert_int_eq(resolve_volume(fx_st, &p, false, NULL, &o, &gs), 0);
	ck_assert_str_eq(o.pvc_uid, "");
	model_map_clear(&p);
	resolve_out_clear(&o);
	/* a direct caller passing both the parameter and the capability's fs_type: they must agree */
	p = P(kv2);
	ck_assert_int_eq(resolve_volume(fx_st, &p, false, "xfs", &o, &gs), 0);
	resolve_out_clear(&o);
	ck_assert_int_eq(resolve_volume(fx_st, &p, false, "ext4", &o, &gs), GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(gs.msg, "csi.storage.k8s.io/fstype \"xfs\" does not match the volume "
	                         "capability's fs_type \"ext4\"");
	resolve_out_clear(&o);
	model_map_clear(&p);
}
END_TEST

START_TEST(test_rejections)
{
	const char *const psc[] = {SC_PSC, NULL};
	const char *const refs[] = {SC_REFS, NULL};
	expect(psc, false, "{\"pillar-csi.bhyoo.com/backend-override\":\"x\"}",
	       GRPC_INVALID_ARGUMENT,
	       "unsupported PVC annotation \"pillar-csi.bhyoo.com/backend-override\"");
	expect(psc, false, "{\"pillar-csi.bhyoo.com/param.foo\":\"x\"}", GRPC_INVALID_ARGUMENT,
	       "unsupported PVC annotation \"pillar-csi.bhyoo.com/param.foo\"");
	const char *const old1[] = {SC_REFS, "zfs-prop.compression", "lz4", NULL};
	expect(old1, false, NULL, GRPC_INVALID_ARGUMENT,
	       "unsupported StorageClass parameter \"zfs-prop.compression\"");
	const char *const old2[] = {SC_REFS, "pillar-csi.bhyoo.com/backend-type", "zfs", NULL};
	expect(old2, false, NULL, GRPC_INVALID_ARGUMENT,
	       "unsupported StorageClass parameter \"pillar-csi.bhyoo.com/backend-type\"");
	const char *const mix[] = {SC_PSC, "pillar-csi.bhyoo.com/store-ref", "tank", NULL};
	expect(mix, false, NULL, GRPC_INVALID_ARGUMENT,
	       "unsupported StorageClass parameter \"pillar-csi.bhyoo.com/store-ref\"");
	const char *const nostore[] = {"pillar-csi.bhyoo.com/protocol-ref", "tcp", NULL};
	expect(nostore, false, NULL, GRPC_INVALID_ARGUMENT,
	       "StorageClass parameter \"pillar-csi.bhyoo.com/store-ref\" is required");
	const char *const noproto[] = {"pillar-csi.bhyoo.com/store-ref", "tank", NULL};
	expect(noproto, false, NULL, GRPC_INVALID_ARGUMENT,
	       "StorageClass parameter \"pillar-csi.bhyoo.com/protocol-ref\" is required");
	expect(refs, false, "{\"pillar-csi.bhyoo.com/backend\":\"zfs: {pool: other}\"}",
	       GRPC_INVALID_ARGUMENT,
	       "pillar-csi.bhyoo.com/backend: zfs.pool is structural and cannot be set per volume");
	expect(refs, false, "{\"pillar-csi.bhyoo.com/protocol\":\"nvmeofTcp: {acl: true}\"}",
	       GRPC_INVALID_ARGUMENT,
	       "pillar-csi.bhyoo.com/protocol: nvmeofTcp.acl is structural and cannot be set per "
	       "volume");
	expect(refs, false,
	       "{\"pillar-csi.bhyoo.com/protocol\":\"nvmeofTcp: {deletePodsAfterCtrlLoss: true}\"}",
	       GRPC_INVALID_ARGUMENT,
	       "pillar-csi.bhyoo.com/protocol: nvmeofTcp.deletePodsAfterCtrlLoss is structural and "
	       "cannot be set per volume");
	expect(refs, false,
	       "{\"pillar-csi.bhyoo.com/protocol\":\"nvmeofTcp: {ctrlLossTimeout: 5}\"}",
	       GRPC_INVALID_ARGUMENT,
	       "pillar-csi.bhyoo.com/protocol: unknown field \"nvmeofTcp.ctrlLossTimeout\"");
	expect(refs, false, "{\"pillar-csi.bhyoo.com/backend\":\"lvm: {provisioningMode: thin}\"}",
	       GRPC_INVALID_ARGUMENT,
	       "pillar-csi.bhyoo.com/backend: lvm overrides do not apply to a zfs-zvol backend");
	expect(
	    refs, true, "{\"pillar-csi.bhyoo.com/filesystem\":\"fsType: xfs\"}",
	    GRPC_INVALID_ARGUMENT,
	    "pillar-csi.bhyoo.com/filesystem: filesystem settings do not apply to a Block volume");
	expect(refs, false, "{\"pillar-csi.bhyoo.com/protocol\":\"nvmeofTcp: {maxQueueSize: 8}\"}",
	       GRPC_INVALID_ARGUMENT,
	       "pillar-csi.bhyoo.com/protocol: nvmeofTcp.maxQueueSize must be between 16 and 1024");
	expect(refs, false,
	       "{\"pillar-csi.bhyoo.com/protocol\":\"nvmeofTcp: {reconnectDelay: 0}\"}",
	       GRPC_INVALID_ARGUMENT,
	       "pillar-csi.bhyoo.com/protocol: nvmeofTcp.reconnectDelay must be at least 1");
	expect(refs, false, "{\"pillar-csi.bhyoo.com/protocol\":\"nvmeofTcp: {ctrlLossTmo: -2}\"}",
	       GRPC_INVALID_ARGUMENT,
	       "pillar-csi.bhyoo.com/protocol: nvmeofTcp.ctrlLossTmo must be at least -1");
	expect(refs, false,
	       "{\"pillar-csi.bhyoo.com/protocol\":\"nvmeofTcp: {inCapsuleDataSize: 512}\"}",
	       GRPC_INVALID_ARGUMENT,
	       "pillar-csi.bhyoo.com/protocol: nvmeofTcp.inCapsuleDataSize must be at least 1024");
	expect(refs, false, "{\"pillar-csi.bhyoo.com/filesystem\":\"mkfsOptions: [-c]\"}",
	       GRPC_INVALID_ARGUMENT,
	       "filesystem.mkfsOptions: mkfs option \"-c\" is not allowed for ext4");
	const char *const fsdis[] = {SC_REFS,       "pillar-csi.bhyoo.com/filesystem",
	                             "fsType: xfs", "csi.storage.k8s.io/fstype",
	                             "ext4",        NULL};
	expect(fsdis, false, NULL, GRPC_INVALID_ARGUMENT,
	       "csi.storage.k8s.io/fstype \"ext4\" does not match filesystem fsType \"xfs\"");
	expect(refs, false, "{\"pillar-csi.bhyoo.com/protocol\":\"nvmeofTcp: {a: 1\"}",
	       GRPC_INVALID_ARGUMENT,
	       "pillar-csi.bhyoo.com/protocol: invalid document: did not find expected ',' or '}' "
	       "at line 2 column 1");
	expect(refs, false, "{\"pillar-csi.bhyoo.com/backend\":\"zfs: &a {properties: {}}\"}",
	       GRPC_INVALID_ARGUMENT,
	       "pillar-csi.bhyoo.com/backend: invalid document: anchors are not allowed at line 1 "
	       "column 6");
	/* referenced objects */
	const char *const nopsc[] = {"pillar-csi.bhyoo.com/storage-class", "gone", NULL};
	expect(
	    nopsc, false, NULL, GRPC_NOT_FOUND,
	    "PillarStorageClass \"gone\" (named via pillar-csi.bhyoo.com/storage-class) not found");
	const char *const nost[] = {"pillar-csi.bhyoo.com/store-ref", "gone",
	                            "pillar-csi.bhyoo.com/protocol-ref", "tcp", NULL};
	expect(nost, false, NULL, GRPC_NOT_FOUND,
	       "PillarStore \"gone\" (named via pillar-csi.bhyoo.com/store-ref) not found");
	const char *const nopr[] = {"pillar-csi.bhyoo.com/store-ref", "tank",
	                            "pillar-csi.bhyoo.com/protocol-ref", "gone", NULL};
	expect(nopr, false, NULL, GRPC_NOT_FOUND,
	       "PillarProtocol \"gone\" (named via pillar-csi.bhyoo.com/protocol-ref) not found");
	fx_put("PillarStorageClass", NULL, "orphan", NULL,
	       "{\"storeRef\":\"gone\",\"protocolRef\":\"tcp\"}", NULL);
	const char *const orphan[] = {"pillar-csi.bhyoo.com/storage-class", "orphan", NULL};
	expect(orphan, false, NULL, GRPC_NOT_FOUND,
	       "PillarStore \"gone\" (named via PillarStorageClass \"orphan\") not found");
}
END_TEST

START_TEST(test_rejections_lvm_layout_agent)
{
	struct grpc_status gs = {0};
	fx_put("PillarStore", NULL, "vg", NULL,
	       "{\"agentRef\":\"storage-1\",\"backend\":{\"lvm\":{\"volumeGroup\":\"data-vg\"}}}",
	       NULL);
	const char *const kv[] = {"pillar-csi.bhyoo.com/store-ref", "vg",
	                          "pillar-csi.bhyoo.com/protocol-ref", "tcp", NULL};
	expect(
	    kv, false, "{\"pillar-csi.bhyoo.com/backend\":\"lvm: {provisioningMode: thin}\"}",
	    GRPC_INVALID_ARGUMENT,
	    "pillar-csi.bhyoo.com/backend: lvm.provisioningMode thin requires PillarStore \"vg\" "
	    "to set lvm.thinPool");
	expect(kv, false, "{\"pillar-csi.bhyoo.com/backend\":\"zfs: {properties: {a: b}}\"}",
	       GRPC_INVALID_ARGUMENT,
	       "pillar-csi.bhyoo.com/backend: zfs overrides do not apply to a lvm-lv backend");
	/* layout mismatch against the agent's reported pool */
	cJSON *pa = fx_get("PillarAgent", "storage-1");
	cJSON_ReplaceItemInObject(
	    pa, "status",
	    fx_parse("{\"resolvedAddress\":\"10.0.0.5:9500\",\"discoveredPools\":[{"
	             "\"name\":\"data-vg\",\"type\":\"lvm\",\"thinPool\":\"thin0\"}]}"));
	ck_assert_int_eq(store_update_status(fx_st, pa, NULL, NULL), 0);
	cJSON_Delete(pa);
	expect(
	    kv, false, NULL, GRPC_FAILED_PRECONDITION,
	    "PillarStore \"vg\" does not match agent \"storage-1\": thinPool \"\" vs agent config "
	    "\"thin0\"");
	/* agent named by a store missing (CreateVolume step 6) */
	fx_put("PillarStore", NULL, "lost", NULL,
	       "{\"agentRef\":\"nobody\",\"backend\":{\"zfs\":{\"pool\":\"tank\"}}}", NULL);
	const char *const lost[] = {"pillar-csi.bhyoo.com/store-ref", "lost",
	                            "pillar-csi.bhyoo.com/protocol-ref", "tcp", NULL};
	ck_assert_int_eq(fx_create("pvc-7", lost, false, NULL, 0, &gs), GRPC_NOT_FOUND);
	ck_assert_str_eq(gs.msg,
	                 "PillarAgent \"nobody\" (named via PillarStore \"lost\") not found");
	/* agent errors are returned verbatim: no space */
	fake_agent_fail(fx_fa, "CreateVolume", GRPC_RESOURCE_EXHAUSTED,
	                "pool \"tank\" has 10 bytes available; 1073741824 requested");
	const char *const refs[] = {SC_REFS, NULL};
	ck_assert_int_eq(fx_create("pvc-8", refs, false, NULL, 0, &gs), GRPC_RESOURCE_EXHAUSTED);
	ck_assert_str_eq(gs.msg, "pool \"tank\" has 10 bytes available; 1073741824 requested");
	cJSON *o = fx_get("PillarVolumeState", "pvc-8");
	ck_assert_str_eq(
	    json_get_str(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "status"), "partialFailure"),
	                 "reason"),
	    "BackendCreateFailed");
	cJSON_Delete(o);
}
END_TEST

/* A mkfsOptions list (JSON text) through the codec (a non-string element is refused there) and
 * the allowlist; 0 or -EINVAL with the message in *e. */
static int mk_e(const char *fs, const char *json, struct err *e)
{
	char doc[1024];
	struct model_filesystem f;
	size_t bad;
	snprintf(doc, sizeof(doc), "{\"mkfsOptions\":%s}", json);
	int r = model_type_decode_text(&model_filesystem_type, doc, &f, e);
	if (r == 0)
		r = rules_mkfs_check(fs, (const char *const *)f.mkfs_options.v, f.mkfs_options.n,
		                     &bad, e);
	model_type_clear(&model_filesystem_type, &f);
	return r;
}

static int mk(const char *fs, const char *json)
{
	struct err e = {0};
	return mk_e(fs, json, &e);
}

START_TEST(test_mkfs_allowlist)
{
	ck_assert_int_eq(mk("ext4", "[\"-L\",\"data\"]"), 0);
	ck_assert_int_eq(mk("ext4", "[\"-Ldata\",\"-q\",\"-j\"]"), 0);
	ck_assert_int_eq(mk("ext4", "[\"-E\",\"stride=4,stripe-width=8,nodiscard\"]"), 0);
	ck_assert_int_eq(mk("ext4", "[\"-Jsize=64\"]"), 0);
	ck_assert_int_eq(mk("xfs", "[\"-d\",\"su=64k,sw=4\",\"-m\",\"crc=1\",\"-K\"]"), 0);
	ck_assert_int_eq(mk("xfs", "[\"-i\",\"size=512\",\"-l\",\"lazy-count=1\"]"), 0);
	static const char *const bad[][2] = {{"ext4", "[\"-Fq\"]"},
	                                     {"ext4", "[\"-qj\"]"},
	                                     {"ext4", "[\"-c\"]"},
	                                     {"ext4", "[\"--lazy\"]"},
	                                     {"ext4", "[\"data\"]"},
	                                     {"ext4", "[\"-d\",\"x\"]"},
	                                     {"ext4", "[\"-J\",\"device=/dev/sdb\"]"},
	                                     {"ext4", "[\"-E\",\"foo=1\"]"},
	                                     {"ext4", "[\"-L\",\"-x\"]"},
	                                     {"ext4", "[\"-L\"]"},
	                                     {"ext4", "[\"-z\",\"u\"]"},
	                                     {"xfs", "[\"-d\",\"file=1\"]"},
	                                     {"xfs", "[\"-c\",\"options=x\"]"},
	                                     {"xfs", "[\"-f\"]"},
	                                     {"xfs", "[\"-l\",\"logdev=/x\"]"},
	                                     {"xfs", "[\"-r\",\"rtdev=/x\"]"},
	                                     {"xfs", "[\"-j\"]"},
	                                     {"ext4", "[1]"}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(mk(bad[i][0], bad[i][1]) == -EINVAL, "%s %s accepted", bad[i][0],
		              bad[i][1]);
	struct err e = {0};
	ck_assert_int_eq(mk_e("ext4", "[\"-L\",\"ok\",\"-E\",\"stride=1,bogus\"]", &e), -EINVAL);
	ck_assert_str_eq(
	    e.msg,
	    "filesystem.mkfsOptions: mkfs option \"stride=1,bogus\" is not allowed for ext4");
}
END_TEST

static const char *yerr(const char *text)
{
	static struct err e;
	cJSON *o = NULL;
	memset(&e, 0, sizeof(e));
	if (yaml_doc_parse(text, strlen(text), &o, &e) == 0) {
		cJSON_Delete(o);
		return "";
	}
	return e.msg;
}

START_TEST(test_yaml_documents)
{
	static const char J[] = "{\"a\": {\"b\": [1, \"x\", true]}}", Y[] = "p: {x: on, y: \"16\"}";
	cJSON *o = NULL;
	ck_assert_int_eq(yaml_doc_parse(J, strlen(J), &o, NULL), 0);
	cJSON *b = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "a"), "b");
	ck_assert(cJSON_IsRaw(cJSON_GetArrayItem(b, 0)));
	ck_assert(cJSON_IsString(cJSON_GetArrayItem(b, 1)));
	cJSON_Delete(o);
	ck_assert_int_eq(yaml_doc_parse(Y, strlen(Y), &o, NULL), 0);
	ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "p"), "x")->valuestring, "on");
	cJSON_Delete(o);
	ck_assert_str_eq(yerr("a: 1\n---\nb: 2\n"),
	                 "invalid document: multiple documents are not allowed at line 2 column 1");
	ck_assert_str_eq(yerr("a: !!str 1"),
	                 "invalid document: tags are not allowed at line 1 column 4");
	ck_assert_str_eq(yerr("a: &x 1\nb: *x"),
	                 "invalid document: anchors are not allowed at line 1 column 4");
	ck_assert_str_eq(
	    yerr("- 1\n- 2"),
	    "invalid document: the document root must be a mapping at line 1 column 1");
	ck_assert_str_eq(yerr("a: 1\na: 2"),
	                 "invalid document: duplicate key \"a\" at line 2 column 1");
	ck_assert_str_eq(
	    yerr(""), "invalid document: the document is empty; its root must be a mapping at line "
	              "1 column 1");
}
END_TEST

START_TEST(test_psc_compatible)
{
	char reason[64], msg[512];
	struct model_pst pst;
	struct model_pstr pstr;
	struct model_psc psc;
	ck_assert_int_eq(model_get(fx_st, &model_pst_kind, NULL, "tank", &pst, NULL), 0);
	ck_assert_int_eq(model_get(fx_st, &model_pstr_kind, NULL, "tcp", &pstr, NULL), 0);
	ck_assert_int_eq(model_decode_text(&model_psc_kind,
	                                   "{\"spec\":{\"overrides\":{\"backend\":{\"lvm\":{"
	                                   "\"provisioningMode\":\"thin\"}}}}}",
	                                   &psc, NULL),
	                 0);
	ck_assert_int_eq(
	    resolve_psc_compatible(&psc, &pst, &pstr, reason, sizeof(reason), msg, sizeof(msg)),
	    -EINVAL);
	ck_assert_str_eq(reason, "BackendOverrideMismatch");
	ck_assert_str_eq(msg, "lvm overrides do not apply to a zfs-zvol backend");
	model_clear(&model_psc_kind, &psc);
	ck_assert_int_eq(model_decode_text(&model_psc_kind,
	                                   "{\"spec\":{\"filesystem\":{\"mkfsOptions\":[\"-F\"]}}}",
	                                   &psc, NULL),
	                 0);
	ck_assert_int_eq(
	    resolve_psc_compatible(&psc, &pst, &pstr, reason, sizeof(reason), msg, sizeof(msg)),
	    -EINVAL);
	ck_assert_str_eq(reason, "InvalidFilesystem");
	ck_assert_str_eq(msg, "filesystem.mkfsOptions: mkfs option \"-F\" is not allowed for ext4");
	model_clear(&model_psc_kind, &psc);
	ck_assert_int_eq(
	    model_decode_text(
	        &model_psc_kind,
	        "{\"spec\":{\"overrides\":{\"protocol\":{\"nvmeofTcp\":{\"ctrlLossTmo\":-1}}}}}",
	        &psc, NULL),
	    0);
	ck_assert_int_eq(
	    resolve_psc_compatible(&psc, &pst, &pstr, reason, sizeof(reason), msg, sizeof(msg)), 0);
	model_clear(&model_psc_kind, &psc);
	model_clear(&model_pst_kind, &pst);
	model_clear(&model_pstr_kind, &pstr);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("controller_resolve");
	TCase *t = tcase_create("resolve");
	tcase_add_checked_fixture(t, setup, fx_teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_precedence_psc_and_pvc);
	tcase_add_test(t, test_precedence_handwritten_and_block);
	tcase_add_test(t, test_dhchap_resolved_with_defaults);
	tcase_add_test(t, test_rejections);
	tcase_add_test(t, test_rejections_lvm_layout_agent);
	tcase_add_test(t, test_mkfs_allowlist);
	tcase_add_test(t, test_yaml_documents);
	tcase_add_test(t, test_psc_compatible);
	suite_add_tcase(s, t);
	return tu_run(s);
}
