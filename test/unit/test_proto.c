/* protobuf-c round trips of one message from each service we serve (CSI Identity, Controller,
 * Node; the agent), plus refusal of malformed bytes.  Field numbers are checked on the wire
 * against hand-encoded bytes so a renumbered field cannot pass. */
#include <stdlib.h>
#include <string.h>

#include "csi.pb-c.h"
#include "pillar_csi/agent/v1/agent.pb-c.h"
#include "testutil.h"

START_TEST(test_identity_plugin_info)
{
	Csi__V1__GetPluginInfoResponse m = CSI__V1__GET_PLUGIN_INFO_RESPONSE__INIT, *back;
	Csi__V1__GetPluginInfoResponse__ManifestEntry e =
	    CSI__V1__GET_PLUGIN_INFO_RESPONSE__MANIFEST_ENTRY__INIT;
	Csi__V1__GetPluginInfoResponse__ManifestEntry *ents[] = {&e};
	uint8_t buf[256];
	size_t n;

	m.name = "pillar-csi.bhyoo.com";
	m.vendor_version = "0.1.0";
	e.key = "commit";
	e.value = "abc";
	m.n_manifest = 1;
	m.manifest = ents;
	n = csi__v1__get_plugin_info_response__pack(&m, buf);
	ck_assert_uint_eq(n, csi__v1__get_plugin_info_response__get_packed_size(&m));
	/* field 1, wire type 2, then the name */
	ck_assert_int_eq(buf[0], 0x0a);
	ck_assert_int_eq(buf[1], 20);
	ck_assert(memcmp(buf + 2, "pillar-csi.bhyoo.com", 20) == 0);
	back = csi__v1__get_plugin_info_response__unpack(NULL, n, buf);
	ck_assert_ptr_nonnull(back);
	ck_assert_str_eq(back->name, "pillar-csi.bhyoo.com");
	ck_assert_str_eq(back->vendor_version, "0.1.0");
	ck_assert_uint_eq(back->n_manifest, 1);
	ck_assert_str_eq(back->manifest[0]->key, "commit");
	ck_assert_str_eq(back->manifest[0]->value, "abc");
	csi__v1__get_plugin_info_response__free_unpacked(back, NULL);
}
END_TEST

START_TEST(test_controller_create_volume)
{
	Csi__V1__CreateVolumeRequest m = CSI__V1__CREATE_VOLUME_REQUEST__INIT, *back;
	Csi__V1__CapacityRange cr = CSI__V1__CAPACITY_RANGE__INIT;
	Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
	Csi__V1__VolumeCapability__MountVolume mv = CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	Csi__V1__VolumeCapability__AccessMode am = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
	Csi__V1__VolumeCapability *caps[] = {&cap};
	Csi__V1__CreateVolumeRequest__ParametersEntry p =
	    CSI__V1__CREATE_VOLUME_REQUEST__PARAMETERS_ENTRY__INIT;
	Csi__V1__CreateVolumeRequest__ParametersEntry *ps[] = {&p};
	char *flags[] = {"noatime"};
	uint8_t buf[512];
	size_t n;

	m.name = "pvc-123";
	cr.required_bytes = 1 << 30;
	m.capacity_range = &cr;
	mv.fs_type = "xfs";
	mv.n_mount_flags = 1;
	mv.mount_flags = flags;
	cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap.mount = &mv;
	am.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER;
	cap.access_mode = &am;
	m.n_volume_capabilities = 1;
	m.volume_capabilities = caps;
	p.key = "pillar-csi.bhyoo.com/pool";
	p.value = "tank";
	m.n_parameters = 1;
	m.parameters = ps;
	n = csi__v1__create_volume_request__pack(&m, buf);
	back = csi__v1__create_volume_request__unpack(NULL, n, buf);
	ck_assert_ptr_nonnull(back);
	ck_assert_str_eq(back->name, "pvc-123");
	ck_assert_int_eq(back->capacity_range->required_bytes, 1 << 30);
	ck_assert_uint_eq(back->n_volume_capabilities, 1);
	ck_assert_int_eq(back->volume_capabilities[0]->access_type_case,
	                 CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT);
	ck_assert_str_eq(back->volume_capabilities[0]->mount->fs_type, "xfs");
	ck_assert_str_eq(back->volume_capabilities[0]->mount->mount_flags[0], "noatime");
	ck_assert_int_eq(back->volume_capabilities[0]->access_mode->mode, 7);
	ck_assert_str_eq(back->parameters[0]->value, "tank");
	csi__v1__create_volume_request__free_unpacked(back, NULL);
}
END_TEST

START_TEST(test_node_stage_volume)
{
	/* Hand-encoded: volume_id (1) = "v", staging_target_path (3) = "/s",
	 * volume_capability (4) = { block (1) = {}, access_mode (3) = { mode (1) = 1 } } */
	static const uint8_t wire[] = {0x0a, 0x01, 'v',  0x1a, 0x02, '/',  's', 0x22,
	                               0x06, 0x0a, 0x00, 0x1a, 0x02, 0x08, 0x01};
	Csi__V1__NodeStageVolumeRequest *m =
	    csi__v1__node_stage_volume_request__unpack(NULL, sizeof(wire), wire);
	uint8_t buf[64];
	ck_assert_ptr_nonnull(m);
	ck_assert_str_eq(m->volume_id, "v");
	ck_assert_str_eq(m->staging_target_path, "/s");
	ck_assert_int_eq(m->volume_capability->access_type_case,
	                 CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK);
	ck_assert_int_eq(m->volume_capability->access_mode->mode,
	                 CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER);
	ck_assert_uint_eq(csi__v1__node_stage_volume_request__pack(m, buf), sizeof(wire));
	ck_assert(memcmp(buf, wire, sizeof(wire)) == 0);
	csi__v1__node_stage_volume_request__free_unpacked(m, NULL);
}
END_TEST

START_TEST(test_agent_reconcile_state)
{
	PillarCsi__Agent__V1__ReconcileStateRequest
	    m = PILLAR_CSI__AGENT__V1__RECONCILE_STATE_REQUEST__INIT,
	    *back;
	PillarCsi__Agent__V1__VolumeDesiredState v =
	    PILLAR_CSI__AGENT__V1__VOLUME_DESIRED_STATE__INIT;
	PillarCsi__Agent__V1__VolumeDesiredState *vs[] = {&v};
	PillarCsi__Agent__V1__ExportDesiredState x =
	    PILLAR_CSI__AGENT__V1__EXPORT_DESIRED_STATE__INIT;
	PillarCsi__Agent__V1__ExportDesiredState *xs[] = {&x};
	PillarCsi__Agent__V1__ExportParams ep = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__INIT;
	PillarCsi__Agent__V1__NvmeofTcpExportParams tcp =
	    PILLAR_CSI__AGENT__V1__NVMEOF_TCP_EXPORT_PARAMS__INIT;
	PillarCsi__Agent__V1__FencingToken f = PILLAR_CSI__AGENT__V1__FENCING_TOKEN__INIT;
	char *hosts[] = {"nqn.2014-08.org.nvmexpress:uuid:1b4e28ba-2fa1-11d2-883f-0016d3cca427"};
	uint8_t *buf;
	size_t n;

	tcp.bind_address = "192.0.2.10";
	tcp.port = 4420;
	tcp.in_capsule_data_size = 16384;
	ep.params_case = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__PARAMS_NVMEOF_TCP;
	ep.nvmeof_tcp = &tcp;
	x.protocol_type = PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP;
	x.export_params = &ep;
	x.n_allowed_initiators = 1;
	x.allowed_initiators = hosts;
	x.acl_enabled = 1;
	f.volume_uid = "0b6c3c1e-uid";
	f.generation = 42;
	v.volume_id = "tank/pvc-1";
	v.backend_type = PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_ZFS_ZVOL;
	v.n_exports = 1;
	v.exports = xs;
	v.fence = &f;
	m.n_volumes = 1;
	m.volumes = vs;
	m.complete = 1;
	n = pillar_csi__agent__v1__reconcile_state_request__get_packed_size(&m);
	buf = malloc(n);
	pillar_csi__agent__v1__reconcile_state_request__pack(&m, buf);
	/* complete is field 2 (varint): the last two bytes */
	ck_assert_int_eq(buf[n - 2], 0x10);
	ck_assert_int_eq(buf[n - 1], 0x01);
	back = pillar_csi__agent__v1__reconcile_state_request__unpack(NULL, n, buf);
	free(buf);
	ck_assert_ptr_nonnull(back);
	ck_assert(back->complete);
	ck_assert_str_eq(back->volumes[0]->volume_id, "tank/pvc-1");
	ck_assert_int_eq(back->volumes[0]->backend_type, 1);
	ck_assert_uint_eq(back->volumes[0]->fence->generation, 42);
	ck_assert_str_eq(back->volumes[0]->fence->volume_uid, "0b6c3c1e-uid");
	ck_assert_int_eq(
	    back->volumes[0]->exports[0]->export_params->nvmeof_tcp->in_capsule_data_size, 16384);
	ck_assert(back->volumes[0]->exports[0]->acl_enabled);
	ck_assert_str_eq(back->volumes[0]->exports[0]->allowed_initiators[0], hosts[0]);
	pillar_csi__agent__v1__reconcile_state_request__free_unpacked(back, NULL);
}
END_TEST

START_TEST(test_malformed_bytes_are_refused)
{
	static const uint8_t truncated[] = {0x0a, 0x10, 'a', 'b'}; /* length 16, 2 bytes present */
	static const uint8_t badwire[] = {0x0f, 0x01};             /* wire type 7 */
	static const uint8_t badutf8[] = {0x0a, 0x02, 0xc3, 0x28}; /* invalid UTF-8 in a string */
	ck_assert_ptr_null(
	    csi__v1__node_stage_volume_request__unpack(NULL, sizeof(truncated), truncated));
	ck_assert_ptr_null(
	    csi__v1__node_stage_volume_request__unpack(NULL, sizeof(badwire), badwire));
	Csi__V1__NodeStageVolumeRequest *m =
	    csi__v1__node_stage_volume_request__unpack(NULL, sizeof(badutf8), badutf8);
	/* protobuf-c does not validate UTF-8; whatever it returns must be freeable */
	csi__v1__node_stage_volume_request__free_unpacked(m, NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("proto");
	TCase *t = tcase_create("roundtrip");
	tcase_add_test(t, test_identity_plugin_info);
	tcase_add_test(t, test_controller_create_volume);
	tcase_add_test(t, test_node_stage_volume);
	tcase_add_test(t, test_agent_reconcile_state);
	tcase_add_test(t, test_malformed_bytes_are_refused);
	suite_add_tcase(s, t);
	return tu_run(s);
}
