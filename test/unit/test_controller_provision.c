/* CreateVolume as csi-provisioner 5.2 calls it (test/unit/sidecar.h): the StorageClass's fstype
 * reaches the controller only as the capability's mount.fs_type, and crds.md §11/§13 still
 * apply — fstype is layer 1 of the filesystem axis (xfs from the StorageClass lands in the
 * volume context and in spec.resolved), a filesystem document that disagrees is rejected with
 * the §13 message, a PVC annotation (layer 2) wins, nothing anywhere gives ext4.  Also: the
 * capabilities the emulation assumes are the ones the controller reports. */
#include "ctl_fixture.h"
#include "sidecar.h"

#define P "pillar-csi.bhyoo.com/"

/* Two workers with nvme_tcp loaded: their CSINodes carry our topology key and node ID, their
 * Nodes the label kubelet copied from NodeGetInfo. */
#define NODE(n)                                                                               \
	"{\"metadata\":{\"name\":\"" n "\",\"labels\":{\"kubernetes.io/hostname\":\"" n "\"," \
	"\"" P "nvmeof\":\"true\"}}}"
#define CSINODE(n)                                                                                \
	"{\"metadata\":{\"name\":\"" n "\"},\"spec\":{\"drivers\":[{\"name\":\"pillar-csi.bhyoo." \
	"com\",\"nodeID\":\"" n "\",\"topologyKeys\":[\"" P "nvmeof\"]}]}}"
static const char *const CLUSTER = "{\"nodes\":[" NODE("node-a") "," NODE(
    "node-b") "],"
              "\"csinodes\":[" CSINODE("node-a") "," CSINODE("node-b") "]}";

#define PVC_UID "0f2d4c6e-8a1b-4c3d-9e5f-7a6b5c4d3e2f"

static void setup(void)
{
	fx_setup();
	fx_objects(false);
}

/* The PersistentVolumeClaim "data" in namespace default (put_pvc writes it to the store, where
 * the controller reads its annotations). */
static const char *pvc_json(const char *mode)
{
	static char buf[512];
	snprintf(buf, sizeof(buf),
	         "{\"metadata\":{\"name\":\"data\",\"namespace\":\"default\",\"uid\":\"" PVC_UID
	         "\"},\"spec\":{\"accessModes\":[\"ReadWriteOnce\"],\"volumeMode\":\"%s\","
	         "\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}}}",
	         mode);
	return buf;
}

static void put_pvc(const char *annotations)
{
	char meta[512];
	snprintf(meta, sizeof(meta), "%s%s", annotations ? "\"annotations\":" : "",
	         annotations ? annotations : "");
	fx_put("PersistentVolumeClaim", "default", "data", annotations ? meta : NULL, "{}", NULL);
}

/* Provisions through the emulated provisioner; returns the code, fills *resp on OK. */
static int provision(const char *sc, const char *pvc, Csi__V1__CreateVolumeResponse **resp,
                     struct grpc_status *gs)
{
	char err[256] = "";
	Csi__V1__CreateVolumeRequest *q =
	    sidecar_create_volume(&sidecar_deployed, sc, pvc, CLUSTER, NULL, err, sizeof(err));
	ck_assert_msg(q, "provisioner refused: %s", err);
	*resp = NULL;
	int r =
	    FX_CALL(csi_create_volume, q, resp, &csi__v1__create_volume_response__descriptor, gs);
	protobuf_c_message_free_unpacked(&q->base, NULL);
	return r;
}

static const char *ctx_get(const Csi__V1__CreateVolumeResponse *resp, const char *key)
{
	for (size_t i = 0; i < resp->volume->n_volume_context; i++)
		if (!strcmp(resp->volume->volume_context[i]->key, key))
			return resp->volume->volume_context[i]->value;
	return NULL;
}

static const char *stored_fstype(void)
{
	static char buf[16];
	cJSON *o = fx_get("PillarVolumeState", "pvc-" PVC_UID);
	ck_assert_ptr_nonnull(o);
	const cJSON *fs = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "spec"),
	                                     "resolved"),
	    "filesystem");
	snprintf(buf, sizeof(buf), "%s", json_get_str(fs, "fsType") ?: "(none)");
	cJSON_Delete(o);
	return buf;
}

static void expect_fstype(const char *sc, const char *pvc, const char *want)
{
	Csi__V1__CreateVolumeResponse *resp = NULL;
	struct grpc_status gs = {0};
	ck_assert_msg(provision(sc, pvc, &resp, &gs) == 0, "%s", gs.msg);
	ck_assert_str_eq(ctx_get(resp, P "fs-type"), want);
	ck_assert_str_eq(stored_fstype(), want);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}

START_TEST(test_request_shape)
{
	/* what reaches the driver: no csi.storage.k8s.io/fstype, fs only in the capability,
	 * the extra metadata, RWO as SINGLE_NODE_MULTI_WRITER, the topology of both workers */
	char err[256] = "";
	Csi__V1__CreateVolumeRequest *q = sidecar_create_volume(
	    &sidecar_deployed,
	    "{\"parameters\":{\"" P "storage-class\":\"fast\",\"csi.storage.k8s.io/fstype\":"
	    "\"xfs\"},\"mountOptions\":[\"noatime\"]}",
	    pvc_json("Filesystem"), CLUSTER, NULL, err, sizeof(err));
	ck_assert_msg(q, "%s", err);
	ck_assert_str_eq(q->name, "pvc-" PVC_UID);
	ck_assert_int_eq(q->n_parameters, 4);
	for (size_t i = 0; i < q->n_parameters; i++)
		ck_assert_str_ne(q->parameters[i]->key, "csi.storage.k8s.io/fstype");
	ck_assert_str_eq(q->parameters[1]->key, "csi.storage.k8s.io/pvc/name");
	ck_assert_str_eq(q->parameters[1]->value, "data");
	ck_assert_str_eq(q->parameters[3]->key, "csi.storage.k8s.io/pv/name");
	ck_assert_int_eq(q->n_volume_capabilities, 1);
	ck_assert_str_eq(q->volume_capabilities[0]->mount->fs_type, "xfs");
	ck_assert_int_eq(q->volume_capabilities[0]->mount->n_mount_flags, 1);
	ck_assert_int_eq(q->volume_capabilities[0]->access_mode->mode,
	                 CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER);
	ck_assert_int_eq(q->capacity_range->required_bytes, 1LL << 30);
	ck_assert_ptr_nonnull(q->accessibility_requirements);
	ck_assert_int_eq(q->accessibility_requirements->n_requisite, 1);
	ck_assert_str_eq(q->accessibility_requirements->requisite[0]->segments[0]->key, P "nvmeof");
	protobuf_c_message_free_unpacked(&q->base, NULL);
	/* no worker carries the key: the provisioner fails before calling the driver */
	q = sidecar_create_volume(&sidecar_deployed, "{\"parameters\":{}}", pvc_json("Filesystem"),
	                          "{\"nodes\":[],\"csinodes\":[{\"metadata\":{\"name\":\"node-a\"},"
	                          "\"spec\":{\"drivers\":[{\"name\":\"pillar-csi.bhyoo.com\","
	                          "\"nodeID\":\"node-a\"}]}}]}",
	                          NULL, err, sizeof(err));
	ck_assert_ptr_null(q);
	ck_assert_str_eq(err, "no available topology found");
}
END_TEST

/* A ReadWriteMany claim: the provisioner maps it to MULTI_NODE_MULTI_WRITER, which a volume
 * on one storage node attached over NVMe/TCP cannot honour. */
START_TEST(test_rwx_claim_refused)
{
	char pvc[512];
	snprintf(pvc, sizeof(pvc),
	         "{\"metadata\":{\"name\":\"data\",\"namespace\":\"default\",\"uid\":\"" PVC_UID
	         "\"},\"spec\":{\"accessModes\":[\"ReadWriteMany\"],\"volumeMode\":\"Filesystem\","
	         "\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}}}");
	put_pvc(NULL);
	Csi__V1__CreateVolumeResponse *resp = NULL;
	struct grpc_status gs = {0};
	ck_assert_int_eq(
	    provision("{\"parameters\":{\"" P "storage-class\":\"fast\"}}", pvc, &resp, &gs),
	    GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(gs.msg, "access mode MULTI_NODE_MULTI_WRITER is not supported");
	ck_assert_ptr_null(resp);
	ck_assert_ptr_null(fx_get("PillarVolumeState", "pvc-" PVC_UID));
}
END_TEST

START_TEST(test_fstype_xfs_from_storageclass)
{
	put_pvc(NULL);
	/* generated StorageClass of a PillarStorageClass without a filesystem section */
	expect_fstype("{\"parameters\":{\"" P "storage-class\":\"fast\","
	              "\"csi.storage.k8s.io/fstype\":\"xfs\"}}",
	              pvc_json("Filesystem"), "xfs");
}
END_TEST

START_TEST(test_fstype_xfs_handwritten)
{
	put_pvc(NULL);
	expect_fstype("{\"parameters\":{\"" P "store-ref\":\"tank\",\"" P "protocol-ref\":\"tcp\","
	              "\"csi.storage.k8s.io/fstype\":\"xfs\"}}",
	              pvc_json("Filesystem"), "xfs");
}
END_TEST

START_TEST(test_fstype_mismatch_document)
{
	Csi__V1__CreateVolumeResponse *resp = NULL;
	struct grpc_status gs = {0};
	put_pvc(NULL);
	ck_assert_int_eq(
	    provision("{\"parameters\":{\"" P "store-ref\":\"tank\",\"" P "protocol-ref\":\"tcp\","
	              "\"" P
	              "filesystem\":\"fsType: ext4\",\"csi.storage.k8s.io/fstype\":\"xfs\"}}",
	              pvc_json("Filesystem"), &resp, &gs),
	    GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(
	    gs.msg, "csi.storage.k8s.io/fstype \"xfs\" does not match filesystem fsType \"ext4\"");
	ck_assert_ptr_null(resp);
	ck_assert_ptr_null(fx_get("PillarVolumeState", "pvc-" PVC_UID));
	/* the same through a PillarStorageClass whose filesystem says ext4 */
	fx_put(
	    "PillarStorageClass", NULL, "ext", NULL,
	    "{\"storeRef\":\"tank\",\"protocolRef\":\"tcp\",\"filesystem\":{\"fsType\":\"ext4\"}}",
	    NULL);
	ck_assert_int_eq(provision("{\"parameters\":{\"" P "storage-class\":\"ext\","
	                           "\"csi.storage.k8s.io/fstype\":\"xfs\"}}",
	                           pvc_json("Filesystem"), &resp, &gs),
	                 GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(
	    gs.msg, "csi.storage.k8s.io/fstype \"xfs\" does not match filesystem fsType \"ext4\"");
}
END_TEST

START_TEST(test_fstype_default_and_pvc_wins)
{
	put_pvc("{\"" P "filesystem\":\"fsType: xfs\"}");
	/* PVC annotation (layer 2) over the StorageClass's ext4 (layer 1) */
	expect_fstype("{\"parameters\":{\"" P "storage-class\":\"fast\","
	              "\"csi.storage.k8s.io/fstype\":\"ext4\"}}",
	              pvc_json("Filesystem"), "xfs");
}
END_TEST

START_TEST(test_fstype_nothing_anywhere)
{
	put_pvc(NULL);
	expect_fstype("{\"parameters\":{\"" P "store-ref\":\"tank\",\"" P
	              "protocol-ref\":\"tcp\"}}",
	              pvc_json("Filesystem"), "ext4");
}
END_TEST

START_TEST(test_fstype_block_ignored)
{
	Csi__V1__CreateVolumeResponse *resp = NULL;
	struct grpc_status gs = {0};
	put_pvc(NULL);
	ck_assert_int_eq(provision("{\"parameters\":{\"" P "storage-class\":\"fast\","
	                           "\"csi.storage.k8s.io/fstype\":\"xfs\"}}",
	                           pvc_json("Block"), &resp, &gs),
	                 0);
	ck_assert_ptr_null(ctx_get(resp, P "fs-type"));
	ck_assert_str_eq(stored_fstype(), "(none)");
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}
END_TEST

/* csi.md §7.4: an xfs volume under 300 MiB is refused at CreateVolume (not later at mkfs on the
 * node), whichever layer chose xfs; ext4 and block volumes of that size are provisioned. */
static const char *pvc_sized(const char *mode, const char *storage)
{
	static char buf[512];
	snprintf(buf, sizeof(buf),
	         "{\"metadata\":{\"name\":\"data\",\"namespace\":\"default\",\"uid\":\"" PVC_UID
	         "\"},\"spec\":{\"accessModes\":[\"ReadWriteOnce\"],\"volumeMode\":\"%s\","
	         "\"resources\":{\"requests\":{\"storage\":\"%s\"}}}}",
	         mode, storage);
	return buf;
}

START_TEST(test_xfs_minimum_size)
{
	static const char *const sc_xfs = "{\"parameters\":{\"" P "storage-class\":\"fast\","
	                                  "\"csi.storage.k8s.io/fstype\":\"xfs\"}}";
	Csi__V1__CreateVolumeResponse *resp = NULL;
	struct grpc_status gs = {0};
	put_pvc(NULL);
	ck_assert_int_eq(provision(sc_xfs, pvc_sized("Filesystem", "299Mi"), &resp, &gs),
	                 GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(gs.msg, "xfs volumes must be at least 300 MiB");
	ck_assert_ptr_null(resp);
	ck_assert_ptr_null(fx_get("PillarVolumeState", "pvc-" PVC_UID));
	ck_assert_int_eq(fake_agent_ncalls(fx_fa), 0);
	/* raw block: no filesystem, no minimum */
	ck_assert_msg(provision(sc_xfs, pvc_sized("Block", "100Mi"), &resp, &gs) == 0, "%s",
	              gs.msg);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}
END_TEST

/* PillarAgent storage-1's capabilities.nvmeTargetAuth (absent: unknown). */
static void agent_target_auth(const char *value)
{
	cJSON *o = NULL;
	struct err e = {0};
	char status[200];
	ck_assert_int_eq(
	    store_get(fx_st, store_kind_lookup("PillarAgent"), NULL, "storage-1", &o, &e), 0);
	snprintf(status, sizeof(status),
	         "{\"resolvedAddress\":\"10.0.0.5:9500\",\"capabilities\":{%s%s}}",
	         value ? "\"nvmeTargetAuth\":" : "", value ? value : "");
	cJSON_DeleteItemFromObject(o, "status");
	cJSON_AddItemToObject(o, "status", fx_parse(status));
	ck_assert_msg(store_update_status(fx_st, o, NULL, &e) == 0, "%s", e.msg);
	cJSON_Delete(o);
}

/* docs/authentication.md: a protocol with nvmeofTcp.dhchap is refused at CreateVolume, before
 * anything is created or any agent called, where no grant could carry its keys: a storage
 * node whose kernel has no target authentication (or not yet known), naming the kernel option;
 * a controller without --dhchap; an agent reached without mTLS (unless plaintext is allowed). */
START_TEST(test_dhchap_refused_not_exported)
{
	Csi__V1__CreateVolumeResponse *resp = NULL;
	struct grpc_status gs = {0};
	const char *sc =
	    "{\"parameters\":{\"" P "store-ref\":\"tank\",\"" P "protocol-ref\":\"auth\"}}";
	fx_put("PillarProtocol", NULL, "auth", NULL,
	       "{\"protocol\":{\"nvmeofTcp\":{\"acl\":true,\"dhchap\":{}}}}", NULL);
	put_pvc(NULL);
	fx_c.dhchap_enabled = true;
	fake_agent_set_mtls(fx_fa, true);
	const char *states[] = {NULL, "false"};
	for (size_t i = 0; i < 2; i++) {
		agent_target_auth(states[i]);
		ck_assert_int_eq(provision(sc, pvc_sized("Filesystem", "1Gi"), &resp, &gs),
		                 GRPC_FAILED_PRECONDITION);
		ck_assert_str_eq(
		    gs.msg, "PillarAgent \"storage-1\": the storage node's kernel has no NVMe "
		            "in-band authentication (CONFIG_NVME_TARGET_AUTH); the PillarProtocol "
		            "asks for nvmeofTcp.dhchap: use a storage node whose kernel has it "
		            "(Debian 12: bookworm-backports' 6.12) or a protocol without dhchap");
	}
	agent_target_auth("true");
	fx_c.dhchap_enabled = false;
	ck_assert_int_eq(provision(sc, pvc_sized("Filesystem", "1Gi"), &resp, &gs),
	                 GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(gs.msg,
	                 "the volume asks for NVMe in-band authentication but the "
	                 "controller runs without --dhchap (the chart's dhchap.enabled), so "
	                 "it reads no worker's keys (docs/authentication.md)");
	fx_c.dhchap_enabled = true;
	fake_agent_set_mtls(fx_fa, false);
	ck_assert_int_eq(provision(sc, pvc_sized("Filesystem", "1Gi"), &resp, &gs),
	                 GRPC_FAILED_PRECONDITION);
	ck_assert_str_eq(gs.msg, "refusing to send DH-HMAC-CHAP keys to agent \"storage-1\" "
	                         "without mTLS: configure --agent-tls-cert, --agent-tls-key and "
	                         "--agent-tls-ca (chart mtls.enabled) or, on a trusted network "
	                         "only, --dhchap-allow-plaintext");
	ck_assert_ptr_null(resp);
	ck_assert_ptr_null(fx_get("PillarVolumeState", "pvc-" PVC_UID));
	ck_assert_int_eq(fake_agent_ncalls(fx_fa), 0);
}
END_TEST

/* ... and created where they can: the volume context names the mode for the node, the volume
 * records the resolved settings and no secret; mTLS or --dhchap-allow-plaintext. */
START_TEST(test_dhchap_created)
{
	Csi__V1__CreateVolumeResponse *resp = NULL;
	struct grpc_status gs = {0};
	const char *sc =
	    "{\"parameters\":{\"" P "store-ref\":\"tank\",\"" P "protocol-ref\":\"auth\"}}";
	fx_put("PillarProtocol", NULL, "auth", NULL,
	       "{\"protocol\":{\"nvmeofTcp\":{\"acl\":true,\"dhchap\":{\"bidirectional\":"
	       "false}}}}",
	       NULL);
	put_pvc(NULL);
	agent_target_auth("true");
	fx_c.dhchap_enabled = true;
	fake_agent_set_mtls(fx_fa, false);
	fx_c.dhchap_plaintext = true;
	ck_assert_msg(provision(sc, pvc_sized("Filesystem", "1Gi"), &resp, &gs) == 0, "%s", gs.msg);
	ck_assert_str_eq(ctx_get(resp, P "dhchap"), "unidirectional");
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	cJSON *o = fx_get("PillarVolumeState", "pvc-" PVC_UID);
	ck_assert_ptr_nonnull(o);
	char *text = cJSON_PrintUnformatted(o);
	ck_assert_ptr_nonnull(strstr(text, "\"dhchap\":{\"bidirectional\":false,\"hash\":"
	                                   "\"sha256\",\"dhGroup\":\"ffdhe2048\"}"));
	ck_assert_ptr_null(strstr(text, "DHHC-1"));
	free(text);
	cJSON_Delete(o);
}
END_TEST

START_TEST(test_xfs_minimum_size_from_claim)
{
	Csi__V1__CreateVolumeResponse *resp = NULL;
	struct grpc_status gs = {0};
	/* xfs from the claim's annotation (layer 2) over an ext4 StorageClass */
	put_pvc("{\"" P "filesystem\":\"fsType: xfs\"}");
	ck_assert_int_eq(provision("{\"parameters\":{\"" P "storage-class\":\"fast\","
	                           "\"csi.storage.k8s.io/fstype\":\"ext4\"}}",
	                           pvc_sized("Filesystem", "100Mi"), &resp, &gs),
	                 GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(gs.msg, "xfs volumes must be at least 300 MiB");
	ck_assert_ptr_null(fx_get("PillarVolumeState", "pvc-" PVC_UID));
}
END_TEST

START_TEST(test_xfs_minimum_size_met)
{
	Csi__V1__CreateVolumeResponse *resp = NULL;
	struct grpc_status gs = {0};
	put_pvc(NULL);
	ck_assert_msg(provision("{\"parameters\":{\"" P "storage-class\":\"fast\","
	                        "\"csi.storage.k8s.io/fstype\":\"xfs\"}}",
	                        pvc_sized("Filesystem", "300Mi"), &resp, &gs) == 0,
	              "%s", gs.msg);
	ck_assert_int_eq(resp->volume->capacity_bytes, 300LL << 20);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}
END_TEST

static bool has_ctl_cap(const Csi__V1__ControllerGetCapabilitiesResponse *r, int type)
{
	for (size_t i = 0; i < r->n_capabilities; i++)
		if (r->capabilities[i]->rpc && (int)r->capabilities[i]->rpc->type == type)
			return true;
	return false;
}

START_TEST(test_sidecar_caps_match)
{
	Csi__V1__ControllerGetCapabilitiesResponse *cr = NULL;
	Csi__V1__GetPluginCapabilitiesResponse *pr = NULL;
	struct grpc_status gs = {0};
	ck_assert_int_eq(FX_CALL(csi_controller_capabilities, NULL, &cr,
	                         &csi__v1__controller_get_capabilities_response__descriptor, &gs),
	                 0);
	ck_assert_int_eq(
	    has_ctl_cap(
	        cr, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER),
	    sidecar_deployed.snmw);
	ck_assert_int_eq(
	    has_ctl_cap(cr, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_READONLY),
	    sidecar_deployed.publish_ro);
	protobuf_c_message_free_unpacked(&cr->base, NULL);
	ck_assert_int_eq(FX_CALL(csi_get_plugin_capabilities, NULL, &pr,
	                         &csi__v1__get_plugin_capabilities_response__descriptor, &gs),
	                 0);
	bool topo = false;
	for (size_t i = 0; i < pr->n_capabilities; i++)
		topo |=
		    pr->capabilities[i]->service &&
		    pr->capabilities[i]->service->type ==
		        CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__VOLUME_ACCESSIBILITY_CONSTRAINTS;
	ck_assert_int_eq(topo, sidecar_deployed.topology);
	protobuf_c_message_free_unpacked(&pr->base, NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("controller_provision");
	TCase *t = tcase_create("provisioner");
	tcase_add_checked_fixture(t, setup, fx_teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_request_shape);
	tcase_add_test(t, test_rwx_claim_refused);
	tcase_add_test(t, test_fstype_xfs_from_storageclass);
	tcase_add_test(t, test_fstype_xfs_handwritten);
	tcase_add_test(t, test_fstype_mismatch_document);
	tcase_add_test(t, test_fstype_default_and_pvc_wins);
	tcase_add_test(t, test_fstype_nothing_anywhere);
	tcase_add_test(t, test_fstype_block_ignored);
	tcase_add_test(t, test_sidecar_caps_match);
	tcase_add_test(t, test_xfs_minimum_size);
	tcase_add_test(t, test_xfs_minimum_size_from_claim);
	tcase_add_test(t, test_xfs_minimum_size_met);
	tcase_add_test(t, test_dhchap_refused_not_exported);
	tcase_add_test(t, test_dhchap_created);
	suite_add_tcase(s, t);
	return tu_run(s);
}
