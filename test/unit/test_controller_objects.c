/* PillarStore, PillarProtocol and PillarStorageClass reconcilers (crds.md §4.2, §5.2, §6.2,
 * §6.3, §14): conditions with their reasons and messages, capacity refreshed only on request,
 * no status write when nothing changed, the generated StorageClass (fields, in-place patch that
 * keeps user labels, delete-and-recreate with the carry-over annotation, finishing from the
 * annotation after a restart, a foreign StorageClass never adopted), finalizers and the
 * "Deletion blocked: ..." messages with their 10-name limit. */
#include <unistd.h>

#include "controller/reconcile.h"
#include "ctl_fixture.h"

static const char agent_ready_status[] =
    "{\"resolvedAddress\":\"10.0.0.5:9500\",\"conditions\":[{\"type\":\"Ready\",\"status\":"
    "\"True\",\"reason\":\"AgentConnected\",\"message\":\"\"}],\"capabilities\":{\"backends\":"
    "[\"zfs-zvol\",\"file\"],\"protocols\":[\"nvmeof-tcp\"]},\"discoveredPools\":[{\"name\":"
    "\"tank\",\"type\":\"zfs\",\"parentDataset\":\"k8s\"},{\"name\":\"files\",\"type\":"
    "\"file\"}]}";

static const char *msg_of(const cJSON *o, const char *type)
{
	return json_get_str(cond_get(cJSON_GetObjectItem(o, "status"), type), "message");
}

static void expect(const char *kind, const char *name, const char *type, const char *status,
                   const char *reason, const char *message)
{
	cJSON *o = fx_get(kind, name);
	ck_assert_msg(o != NULL, "%s %s missing", kind, name);
	ck_assert_msg(!strcmp(cond_status(o, type), status) &&
	                  !strcmp(cond_reason(o, type), reason),
	              "%s %s %s: %s/%s, want %s/%s (%s)", kind, name, type, cond_status(o, type),
	              cond_reason(o, type), status, reason, msg_of(o, type));
	if (message)
		ck_assert_str_eq(msg_of(o, type), message);
	cJSON_Delete(o);
}

static void del(const char *kind, const char *name)
{
	ck_assert_int_eq(store_delete(fx_st, store_kind_lookup(kind), NULL, name, NULL, NULL, NULL),
	                 0);
}

static void labeled_vol(const char *name, const char *label, const char *value)
{
	char meta[300];
	snprintf(meta, sizeof(meta), "\"labels\":{\"%s\":\"%s\"}", label, value);
	fx_put("PillarVolumeState", NULL, name, meta, "{\"agentRef\":\"storage-1\"}", NULL);
}

START_TEST(test_store_conditions_and_capacity)
{
	struct err e = {0};
	fx_put("PillarStore", NULL, "tank", NULL,
	       "{\"agentRef\":\"storage-1\",\"backend\":{\"zfs\":{\"pool\":\"tank\","
	       "\"parentDataset\":\"k8s\"}}}",
	       NULL);
	ck_assert_int_eq(reconcile_store(&fx_c, "tank", false, &e), 0);
	expect("PillarStore", "tank", "AgentReady", "False", "AgentNotFound",
	       "PillarAgent \"storage-1\" not found");
	expect("PillarStore", "tank", "PoolDiscovered", "False", "WaitingForAgentData", NULL);
	expect("PillarStore", "tank", "BackendSupported", "Unknown", "WaitingForAgentData", NULL);
	expect("PillarStore", "tank", "Ready", "False", "AgentNotFound", NULL);
	cJSON *o = fx_get("PillarStore", "tank");
	ck_assert_str_eq(
	    cJSON_GetArrayItem(
	        cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "finalizers"), 0)
	        ->valuestring,
	    RULES_FINALIZER_STORE);
	cJSON_Delete(o);

	fx_put("PillarAgent", NULL, "storage-1", NULL,
	       "{\"external\":{\"address\":\"10.0.0.5\",\"port\":9500}}", agent_ready_status);
	ck_assert_int_eq(reconcile_store(&fx_c, "tank", false, &e), 0);
	expect("PillarStore", "tank", "Ready", "True", "StoreReady", "");
	expect("PillarStore", "tank", "PoolDiscovered", "True", "PoolFound", "");
	expect("PillarStore", "tank", "BackendSupported", "True", "BackendSupported", "");
	ck_assert_str_eq(fake_agent_log(fx_fa), "GetCapacity");
	const PillarCsi__Agent__V1__GetCapacityRequest *cq =
	    (const void *)fake_agent_call(fx_fa, 0)->req;
	ck_assert_str_eq(cq->pool_name, "tank");
	ck_assert_int_eq(cq->backend_type,
	                 PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_ZFS_ZVOL);
	ck_assert_str_eq(fake_agent_call(fx_fa, 0)->address, "10.0.0.5:9500");
	o = fx_get("PillarStore", "tank");
	cJSON *cap = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "status"), "capacity");
	ck_assert_str_eq(json_get_str(cap, "total"), "100Gi");
	ck_assert_str_eq(json_get_str(cap, "available"), "60Gi");
	ck_assert_str_eq(json_get_str(cap, "used"), "40Gi");
	uint64_t rv = store_meta_rv(o);
	cJSON_Delete(o);
	/* nothing changed, no refresh asked: no call, no write */
	ck_assert_int_eq(reconcile_store(&fx_c, "tank", false, &e), 0);
	ck_assert_uint_eq(fake_agent_ncalls(fx_fa), 1);
	o = fx_get("PillarStore", "tank");
	ck_assert_uint_eq(store_meta_rv(o), rv);
	cJSON_Delete(o);
	ck_assert_int_eq(reconcile_store(&fx_c, "tank", true, &e), 0);
	ck_assert_uint_eq(fake_agent_count(fx_fa, "GetCapacity"), 2);

	/* layout mismatch; an lvm store the agent does not know; a file store */
	fx_put("PillarStore", NULL, "tank2", NULL,
	       "{\"agentRef\":\"storage-1\",\"backend\":{\"zfs\":{\"pool\":\"tank\","
	       "\"parentDataset\":\"other\"}}}",
	       NULL);
	ck_assert_int_eq(reconcile_store(&fx_c, "tank2", false, &e), 0);
	expect("PillarStore", "tank2", "PoolDiscovered", "False", "BackendLayoutMismatch",
	       "store parentDataset \"other\" does not match agent config parentDataset \"k8s\"");
	expect("PillarStore", "tank2", "Ready", "False", "BackendLayoutMismatch", NULL);
	fx_put("PillarStore", NULL, "vg", NULL,
	       "{\"agentRef\":\"storage-1\",\"backend\":{\"lvm\":{\"volumeGroup\":\"vg0\"}}}",
	       NULL);
	ck_assert_int_eq(reconcile_store(&fx_c, "vg", false, &e), 0);
	expect("PillarStore", "vg", "PoolDiscovered", "False", "PoolNotFound", NULL);
	expect("PillarStore", "vg", "BackendSupported", "False", "BackendNotSupported",
	       "agent \"storage-1\" does not list the lvm-lv backend");
	expect("PillarStore", "vg", "Ready", "False", "PoolNotFound", NULL);
	fx_put("PillarStore", NULL, "files", NULL,
	       "{\"agentRef\":\"storage-1\",\"backend\":{\"file\":{\"pool\":\"files\"}}}", NULL);
	ck_assert_int_eq(reconcile_store(&fx_c, "files", false, &e), 0);
	expect("PillarStore", "files", "Ready", "True", "StoreReady", NULL);
	const PillarCsi__Agent__V1__GetCapacityRequest *fq =
	    (const void *)fake_agent_call(fx_fa, fake_agent_ncalls(fx_fa) - 1)->req;
	ck_assert_int_eq(fq->backend_type, PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_FILE);

	/* the agent goes not Ready */
	del("PillarAgent", "storage-1");
	fx_put("PillarAgent", NULL, "storage-1", NULL,
	       "{\"external\":{\"address\":\"10.0.0.5\",\"port\":9500}}",
	       "{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"reason\":"
	       "\"AgentNotConnected\",\"message\":\"\"}]}");
	ck_assert_int_eq(reconcile_store(&fx_c, "tank", false, &e), 0);
	expect("PillarStore", "tank", "AgentReady", "False", "AgentNotReady",
	       "PillarAgent \"storage-1\" is not Ready: AgentNotConnected");
	expect("PillarStore", "tank", "PoolDiscovered", "False", "WaitingForAgentData", NULL);
}
END_TEST

START_TEST(test_store_deletion)
{
	struct err e = {0};
	char name[32];
	fx_put("PillarStore", NULL, "tank", NULL,
	       "{\"agentRef\":\"storage-1\",\"backend\":{\"zfs\":{\"pool\":\"tank\"}}}", NULL);
	ck_assert_int_eq(reconcile_store(&fx_c, "tank", false, &e), 0);
	fx_put("PillarStorageClass", NULL, "fast", NULL,
	       "{\"storeRef\":\"tank\",\"protocolRef\":\"tcp\"}", NULL);
	for (int i = 1; i <= 12; i++) {
		snprintf(name, sizeof(name), "vol-%02d", i);
		labeled_vol(name, RULES_LABEL_STORE, "tank");
	}
	del("PillarStore", "tank");
	ck_assert_int_eq(reconcile_store(&fx_c, "tank", false, &e), 0);
	expect("PillarStore", "tank", "Ready", "False", "DeletionBlocked",
	       "Deletion blocked: PillarStorageClass \"fast\"; 12 volumes (vol-01, vol-02, vol-03, "
	       "vol-04, vol-05, vol-06, vol-07, vol-08, vol-09, vol-10 and 2 more)");
	del("PillarStorageClass", "fast");
	for (int i = 1; i <= 12; i++) {
		snprintf(name, sizeof(name), "vol-%02d", i);
		del("PillarVolumeState", name);
	}
	/* a volume whose record cannot be read may be the store's: the deletion waits for it */
	char broken[700];
	tu_write(fx_dir, "pillarvolumestates/vol-broken.json", "{\"apiVersion\":\"pill");
	ck_assert_int_eq(reconcile_store(&fx_c, "tank", false, &e), 0);
	expect("PillarStore", "tank", "Ready", "False", "DeletionBlocked",
	       "Deletion blocked: 1 volume (vol-broken)");
	snprintf(broken, sizeof(broken), "%s/pillarvolumestates/vol-broken.json", fx_dir);
	ck_assert_int_eq(unlink(broken), 0);
	ck_assert_int_eq(reconcile_store(&fx_c, "tank", false, &e), 0);
	ck_assert_ptr_null(fx_get("PillarStore", "tank"));
}
END_TEST

START_TEST(test_protocol)
{
	struct err e = {0};
	fx_put("PillarProtocol", NULL, "tcp", NULL, "{\"protocol\":{\"nvmeofTcp\":{}}}", NULL);
	ck_assert_int_eq(reconcile_protocol(&fx_c, "tcp", &e), 0);
	expect("PillarProtocol", "tcp", "Ready", "True", "ProtocolReady", "");
	fx_put("PillarAgent", NULL, "b-agent", NULL, "{}", NULL);
	fx_put("PillarAgent", NULL, "a-agent", NULL, "{}", NULL);
	fx_put("PillarStore", NULL, "s1", NULL, "{\"agentRef\":\"b-agent\"}", NULL);
	fx_put("PillarStore", NULL, "s2", NULL, "{\"agentRef\":\"a-agent\"}", NULL);
	fx_put("PillarStore", NULL, "s3", NULL, "{\"agentRef\":\"gone-agent\"}", NULL);
	fx_put("PillarStorageClass", NULL, "fast", NULL,
	       "{\"storeRef\":\"s1\",\"protocolRef\":\"tcp\"}", NULL);
	fx_put("PillarStorageClass", NULL, "slow", NULL,
	       "{\"storeRef\":\"s2\",\"protocolRef\":\"tcp\"}", NULL);
	fx_put("PillarStorageClass", NULL, "odd", NULL,
	       "{\"storeRef\":\"s3\",\"protocolRef\":\"tcp\"}", NULL);
	fx_put("PillarStorageClass", NULL, "x", NULL,
	       "{\"storeRef\":\"s1\",\"protocolRef\":\"udp\"}", NULL);
	ck_assert_int_eq(reconcile_protocol(&fx_c, "tcp", &e), 0);
	cJSON *o = fx_get("PillarProtocol", "tcp");
	cJSON *st = cJSON_GetObjectItem(o, "status");
	ck_assert_int_eq((int)cJSON_GetNumberValue(cJSON_GetObjectItem(st, "storageClassCount")),
	                 3);
	char *aa = cJSON_PrintUnformatted(cJSON_GetObjectItem(st, "activeAgents"));
	ck_assert_str_eq(aa, "[\"a-agent\",\"b-agent\"]");
	free(aa);
	cJSON_Delete(o);
	del("PillarProtocol", "tcp");
	ck_assert_int_eq(reconcile_protocol(&fx_c, "tcp", &e), 0);
	expect("PillarProtocol", "tcp", "Ready", "False", "DeletionBlocked",
	       "Deletion blocked: PillarStorageClass \"fast\", \"odd\", \"slow\"");
	del("PillarStorageClass", "fast");
	del("PillarStorageClass", "slow");
	del("PillarStorageClass", "odd");
	ck_assert_int_eq(reconcile_protocol(&fx_c, "tcp", &e), 0);
	ck_assert_ptr_null(fx_get("PillarProtocol", "tcp"));
}
END_TEST

START_TEST(test_protocol_node_topology)
{
	/* NodeTopology: from the topology keys kubelet registered on the CSINodes */
	struct err e = {0};
	fx_put("PillarProtocol", NULL, "tcp", NULL, "{\"protocol\":{\"nvmeofTcp\":{}}}", NULL);
	fx_put("CSINode", NULL, "w0", NULL, "{\"drivers\":[]}", NULL);
	ck_assert_int_eq(reconcile_protocol(&fx_c, "tcp", &e), 0);
	expect("PillarProtocol", "tcp", "NodeTopology", "Unknown", "NoNodeRegistered",
	       "no CSINode registers driver pillar-csi.bhyoo.com (the node plugin is not running "
	       "anywhere yet)");
	/* the node plugin runs on two workers, nvme_tcp loaded on neither: no topology key */
	fx_put("CSINode", NULL, "w1", NULL,
	       "{\"drivers\":[{\"name\":\"pillar-csi.bhyoo.com\",\"nodeID\":\"w1\"}]}", NULL);
	fx_put("CSINode", NULL, "w2", NULL,
	       "{\"drivers\":[{\"name\":\"pillar-csi.bhyoo.com\",\"nodeID\":\"w2\","
	       "\"topologyKeys\":[]}]}",
	       NULL);
	ck_assert_int_eq(reconcile_protocol(&fx_c, "tcp", &e), 0);
	expect("PillarProtocol", "tcp", "NodeTopology", "False", "NvmeTcpNotLoaded",
	       "no node can reach NVMe/TCP storage: none of the 2 node(s) running the node plugin "
	       "has the kernel module nvme_tcp loaded, so no CSINode carries topology key "
	       "pillar-csi.bhyoo.com/nvmeof and provisioning fails with \"no available topology "
	       "found\"; run \"modprobe nvme_tcp\" on the workers (and list it in "
	       "/etc/modules-load.d), then restart the pillar-csi node pod there");
	expect("PillarProtocol", "tcp", "Ready", "True", "ProtocolReady", "");
	/* loaded on one of them: kubelet re-registered it with the key */
	cJSON *o = fx_get("CSINode", "w2");
	cJSON_ReplaceItemInObject(
	    o, "spec",
	    fx_parse("{\"drivers\":[{\"name\":\"pillar-csi.bhyoo.com\",\"nodeID\":\"w2\","
	             "\"topologyKeys\":[\"pillar-csi.bhyoo.com/nvmeof\"]}]}"));
	ck_assert_int_eq(store_update(fx_st, o, NULL, &e), 0);
	cJSON_Delete(o);
	ck_assert_int_eq(reconcile_protocol(&fx_c, "tcp", &e), 0);
	expect("PillarProtocol", "tcp", "NodeTopology", "True", "NodesReachable",
	       "1 of 2 node(s) carry topology key pillar-csi.bhyoo.com/nvmeof");
}
END_TEST

static cJSON *sc(const char *name)
{
	return fx_get("StorageClass", name);
}

static void psc_spec(const char *name, const char *spec)
{
	cJSON *o = fx_get("PillarStorageClass", name);
	cJSON_ReplaceItemInObject(o, "spec", fx_parse(spec));
	struct err e = {0};
	ck_assert_msg(store_update(fx_st, o, NULL, &e) == 0, "%s", e.msg);
	cJSON_Delete(o);
}

START_TEST(test_psc_generated_storage_class)
{
	struct err e = {0};
	fx_put("PillarAgent", NULL, "storage-1", NULL,
	       "{\"external\":{\"address\":\"10.0.0.5\",\"port\":9500}}", agent_ready_status);
	fx_put("PillarStore", NULL, "tank", NULL,
	       "{\"agentRef\":\"storage-1\",\"backend\":{\"zfs\":{\"pool\":\"tank\","
	       "\"parentDataset\":\"k8s\"}}}",
	       NULL);
	fx_put("PillarProtocol", NULL, "tcp", NULL, "{\"protocol\":{\"nvmeofTcp\":{}}}", NULL);
	fx_put("PillarStorageClass", NULL, "fast", NULL,
	       "{\"storeRef\":\"tank\",\"protocolRef\":\"tcp\",\"storageClass\":{\"reclaimPolicy\":"
	       "\"Retain\"},\"filesystem\":{\"fsType\":\"xfs\",\"mountOptions\":[\"noatime\"]}}",
	       NULL);
	ck_assert_int_eq(reconcile_psc(&fx_c, "fast", &e), 0);
	expect("PillarStorageClass", "fast", "StoreReady", "False", "PoolNotReady",
	       "PillarStore \"tank\" is not Ready yet");
	expect("PillarStorageClass", "fast", "ProtocolValid", "True", "ProtocolValid", "");
	expect("PillarStorageClass", "fast", "Compatible", "True", "Compatible", "");
	expect("PillarStorageClass", "fast", "StorageClassCreated", "True", "StorageClassCreated",
	       "");
	expect("PillarStorageClass", "fast", "Ready", "False", "PoolNotReady", NULL);
	ck_assert_int_eq(reconcile_store(&fx_c, "tank", false, &e), 0);
	ck_assert_int_eq(reconcile_psc(&fx_c, "fast", &e), 0);
	expect("PillarStorageClass", "fast", "Ready", "True", "StorageClassAvailable", "");
	cJSON *o = fx_get("PillarStorageClass", "fast");
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(o, "status"), "storageClassName"),
	                 "fast");
	const char *uid = store_meta_str(o, "uid");
	cJSON *s = sc("fast");
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(s, "metadata"), "uid");
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(s, "metadata"), "resourceVersion");
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(s, "metadata"), "generation");
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(s, "metadata"), "creationTimestamp");
	char want[2048];
	snprintf(want, sizeof(want),
	         "{\"apiVersion\":\"storage.k8s.io/v1\",\"kind\":\"StorageClass\",\"metadata\":{"
	         "\"name\":\"fast\",\"labels\":{\"app.kubernetes.io/managed-by\":\"pillar-csi\","
	         "\"pillar-csi.bhyoo.com/pillar-storage-class\":\"fast\"},\"ownerReferences\":[{"
	         "\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarStorageClass\","
	         "\"name\":\"fast\",\"uid\":\"%s\",\"controller\":true}]},\"provisioner\":"
	         "\"pillar-csi.bhyoo.com\",\"parameters\":{\"pillar-csi.bhyoo.com/storage-class\":"
	         "\"fast\",\"csi.storage.k8s.io/fstype\":\"xfs\"},\"mountOptions\":[\"noatime\"],"
	         "\"reclaimPolicy\":\"Retain\",\"volumeBindingMode\":\"Immediate\","
	         "\"allowVolumeExpansion\":true}",
	         uid);
	cJSON *w = fx_parse(want);
	ck_assert_msg(cJSON_Compare(s, w, true), "got %s", cJSON_PrintUnformatted(s));
	cJSON_Delete(w);
	cJSON_Delete(s);
	cJSON_Delete(o);

	/* a user adds a label, an annotation and topologies */
	s = sc("fast");
	cJSON_AddStringToObject(cJSON_GetObjectItem(cJSON_GetObjectItem(s, "metadata"), "labels"),
	                        "team", "db");
	cJSON_AddItemToObject(cJSON_GetObjectItem(s, "metadata"), "annotations",
	                      fx_parse("{\"note\":\"keep\"}"));
	cJSON_AddItemToObject(s, "allowedTopologies",
	                      fx_parse("[{\"matchLabelExpressions\":[{\"key\":\"zone\","
	                               "\"values\":[\"a\"]}]}]"));
	ck_assert_int_eq(store_update(fx_st, s, NULL, NULL), 0);
	char sc_uid[64];
	snprintf(sc_uid, sizeof(sc_uid), "%s", store_meta_str(s, "uid"));
	cJSON_Delete(s);
	/* in place: mountOptions and allowVolumeExpansion */
	psc_spec("fast",
	         "{\"storeRef\":\"tank\",\"protocolRef\":\"tcp\",\"storageClass\":{"
	         "\"reclaimPolicy\":\"Retain\",\"allowVolumeExpansion\":false},\"filesystem\":"
	         "{\"fsType\":\"xfs\",\"mountOptions\":[\"noatime\",\"discard\"]}}");
	ck_assert_int_eq(reconcile_psc(&fx_c, "fast", &e), 0);
	s = sc("fast");
	ck_assert_str_eq(store_meta_str(s, "uid"), sc_uid);
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(s, "allowVolumeExpansion")));
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(s, "mountOptions")), 2);
	ck_assert_str_eq(
	    json_get_str(cJSON_GetObjectItem(cJSON_GetObjectItem(s, "metadata"), "labels"), "team"),
	    "db");
	cJSON_Delete(s);
	/* reclaimPolicy changes: delete and recreate, carrying the user's items */
	psc_spec("fast",
	         "{\"storeRef\":\"tank\",\"protocolRef\":\"tcp\",\"filesystem\":{\"fsType\":"
	         "\"xfs\"}}");
	ck_assert_int_eq(reconcile_psc(&fx_c, "fast", &e), 0);
	s = sc("fast");
	ck_assert_str_ne(store_meta_str(s, "uid"), sc_uid);
	ck_assert_str_eq(json_get_str(s, "reclaimPolicy"), "Delete");
	ck_assert_ptr_null(cJSON_GetObjectItem(s, "mountOptions"));
	cJSON *meta = cJSON_GetObjectItem(s, "metadata");
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(meta, "labels"), "team"), "db");
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(meta, "labels"), RULES_LABEL_PSC),
	                 "fast");
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(meta, "annotations"), "note"), "keep");
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(s, "allowedTopologies")), 1);
	cJSON_Delete(s);
	o = fx_get("PillarStorageClass", "fast");
	/* restart between delete and create: finish from the annotation */
	ck_assert_ptr_null(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "annotations"));
	cJSON *ann = cJSON_AddObjectToObject(cJSON_GetObjectItem(o, "metadata"), "annotations");
	cJSON_AddStringToObject(ann, RULES_ANN_SC_CARRY_OVER,
	                        "{\"labels\":{\"team\":\"web\"},\"annotations\":{},"
	                        "\"allowedTopologies\":[]}");
	ck_assert_int_eq(store_update(fx_st, o, NULL, NULL), 0);
	cJSON_Delete(o);
	del("StorageClass", "fast");
	ck_assert_int_eq(reconcile_psc(&fx_c, "fast", &e), 0);
	s = sc("fast");
	ck_assert_str_eq(
	    json_get_str(cJSON_GetObjectItem(cJSON_GetObjectItem(s, "metadata"), "labels"), "team"),
	    "web");
	cJSON_Delete(s);
	o = fx_get("PillarStorageClass", "fast");
	ck_assert_ptr_null(cJSON_GetObjectItem(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "annotations"),
	    RULES_ANN_SC_CARRY_OVER));
	cJSON_Delete(o);

	/* deletion waits for PVCs of the class and its volumes, then removes the StorageClass */
	fx_put("PersistentVolumeClaim", "default", "claim-1", NULL,
	       "{\"storageClassName\":\"fast\"}", NULL);
	labeled_vol("vol-a", RULES_LABEL_PSC, "fast");
	del("PillarStorageClass", "fast");
	ck_assert_int_eq(reconcile_psc(&fx_c, "fast", &e), 0);
	expect("PillarStorageClass", "fast", "Ready", "False", "DeletionBlocked",
	       "Deletion blocked: PersistentVolumeClaim \"default/claim-1\"; 1 volume (vol-a)");
	ck_assert_int_eq(store_delete(fx_st, store_kind_lookup("PersistentVolumeClaim"), "default",
	                              "claim-1", NULL, NULL, NULL),
	                 0);
	del("PillarVolumeState", "vol-a");
	ck_assert_int_eq(reconcile_psc(&fx_c, "fast", &e), 0);
	ck_assert_ptr_null(fx_get("PillarStorageClass", "fast"));
	ck_assert_ptr_null(sc("fast"));
}
END_TEST

START_TEST(test_psc_conflict_and_incompatible)
{
	struct err e = {0};
	fx_put("PillarStore", NULL, "tank", NULL,
	       "{\"agentRef\":\"storage-1\",\"backend\":{\"zfs\":{\"pool\":\"tank\"}}}", NULL);
	fx_put("PillarProtocol", NULL, "tcp", NULL, "{\"protocol\":{\"nvmeofTcp\":{}}}", NULL);
	fx_put("StorageClass", NULL, "standard", NULL, NULL, NULL);
	fx_put("PillarStorageClass", NULL, "mine", NULL,
	       "{\"storeRef\":\"tank\",\"protocolRef\":\"tcp\",\"storageClass\":{\"name\":"
	       "\"standard\"}}",
	       NULL);
	ck_assert_int_eq(reconcile_psc(&fx_c, "mine", &e), 0);
	expect("PillarStorageClass", "mine", "StorageClassCreated", "False", "StorageClassConflict",
	       "StorageClass \"standard\" exists and was not generated for PillarStorageClass "
	       "\"mine\"; it is never adopted or overwritten");
	cJSON *s = sc("standard");
	ck_assert_ptr_null(cJSON_GetObjectItem(s, "provisioner"));
	cJSON_Delete(s);

	fx_put(
	    "PillarStorageClass", NULL, "bad", NULL,
	    "{\"storeRef\":\"tank\",\"protocolRef\":\"tcp\",\"overrides\":{\"backend\":{\"lvm\":{"
	    "\"provisioningMode\":\"thin\"}}}}",
	    NULL);
	ck_assert_int_eq(reconcile_psc(&fx_c, "bad", &e), 0);
	expect("PillarStorageClass", "bad", "Compatible", "False", "BackendOverrideMismatch", NULL);
	expect("PillarStorageClass", "bad", "StorageClassCreated", "Unknown", "WaitingForStore",
	       NULL);
	ck_assert_ptr_null(sc("bad"));

	fx_put("PillarStorageClass", NULL, "lost", NULL,
	       "{\"storeRef\":\"nope\",\"protocolRef\":\"nada\"}", NULL);
	ck_assert_int_eq(reconcile_psc(&fx_c, "lost", &e), 0);
	expect("PillarStorageClass", "lost", "StoreReady", "False", "PoolNotFound",
	       "PillarStore \"nope\" not found");
	expect("PillarStorageClass", "lost", "ProtocolValid", "False", "ProtocolNotFound",
	       "PillarProtocol \"nada\" not found");
	expect("PillarStorageClass", "lost", "Compatible", "Unknown", "WaitingForStore", NULL);
	expect("PillarStorageClass", "lost", "Ready", "False", "PoolNotFound", NULL);
	ck_assert_ptr_null(sc("lost"));
}
END_TEST

static const char *node_label_of(const char *node)
{
	static char v[16];
	cJSON *n = fx_get("Node", node);
	const char *l =
	    json_get_str(cJSON_GetObjectItem(cJSON_GetObjectItem(n, "metadata"), "labels"),
	                 RULES_LABEL_AGENT_NODE);
	snprintf(v, sizeof(v), "%s", l ? l : "");
	cJSON_Delete(n);
	return v;
}

START_TEST(test_agent_node_label)
{
	struct err e = {0};
	int rq;
	fx_put("Node", NULL, "w1", "\"labels\":{\"zone\":\"a\"}", NULL,
	       "{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.1.2.3\"}]}");
	fx_put("PillarAgent", NULL, "sa", NULL, "{\"nodeRef\":{\"name\":\"w1\"}}", NULL);
	fx_put("PillarAgent", NULL, "sb", NULL, "{\"nodeRef\":{\"name\":\"w1\"}}", NULL);
	fx_put("PillarAgent", NULL, "ext", NULL,
	       "{\"external\":{\"address\":\"10.0.0.9\",\"port\":9500}}", NULL);
	ck_assert_int_eq(reconcile_agent(&fx_c, "sa", &rq, &e), 0);
	ck_assert_str_eq(node_label_of("w1"), "true");
	ck_assert_int_eq(reconcile_agent(&fx_c, "sb", &rq, &e), 0);
	ck_assert_int_eq(reconcile_agent(&fx_c, "ext", &rq, &e), 0);
	cJSON *n = fx_get("Node", "w1");
	ck_assert_str_eq(
	    json_get_str(cJSON_GetObjectItem(cJSON_GetObjectItem(n, "metadata"), "labels"), "zone"),
	    "a");
	cJSON_Delete(n);
	/* another agent still references the Node: the label stays */
	del("PillarAgent", "sa");
	ck_assert_int_eq(reconcile_agent(&fx_c, "sa", &rq, &e), 0);
	ck_assert_ptr_null(fx_get("PillarAgent", "sa"));
	ck_assert_str_eq(node_label_of("w1"), "true");
	del("PillarAgent", "sb");
	ck_assert_int_eq(reconcile_agent(&fx_c, "sb", &rq, &e), 0);
	ck_assert_ptr_null(fx_get("PillarAgent", "sb"));
	ck_assert_str_eq(node_label_of("w1"), "");
	/* a missing Node is reported by NodeExists, not an error */
	fx_put("PillarAgent", NULL, "sc", NULL, "{\"nodeRef\":{\"name\":\"w9\"}}", NULL);
	ck_assert_int_eq(reconcile_agent(&fx_c, "sc", &rq, &e), 0);
	expect("PillarAgent", "sc", "NodeExists", "False", "NodeNotFound", NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("controller_objects");
	TCase *t = tcase_create("objects");
	tcase_add_checked_fixture(t, fx_setup, fx_teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_store_conditions_and_capacity);
	tcase_add_test(t, test_store_deletion);
	tcase_add_test(t, test_protocol);
	tcase_add_test(t, test_protocol_node_topology);
	tcase_add_test(t, test_psc_generated_storage_class);
	tcase_add_test(t, test_psc_conflict_and_incompatible);
	tcase_add_test(t, test_agent_node_label);
	suite_add_tcase(s, t);
	return tu_run(s);
}
