/* JSON <-> protobuf-c by reflection (src/pbjson): every field shape our protos use. */
#include <errno.h>
#include <string.h>

#include "base/json.h"
#include "csi.pb-c.h"
#include "pbjson/pbjson.h"
#include "pillar_csi/agent/v1/agent.pb-c.h"
#include "testutil.h"

static cJSON *parse(const char *s)
{
	cJSON *j;
	ck_assert_int_eq(json_parse_strict(s, strlen(s), &j, NULL), 0);
	return j;
}

START_TEST(test_roundtrip_agent_request)
{
	cJSON *j = parse(
	    "{\"volumes\":[{\"volume_id\":\"fp/v1\",\"backend_type\":\"BACKEND_TYPE_FILE\","
	    "\"backend_params\":{\"file\":{\"pool\":\"fp\",\"preallocate\":true}},"
	    "\"exports\":[{\"protocol_type\":1,\"allowedInitiators\":[\"nqn.a\",\"nqn.b\"],"
	    "\"export_params\":{\"nvmeof_tcp\":{\"bind_address\":\"10.0.0.1\",\"port\":4420}}}],"
	    "\"fence\":{\"volume_uid\":\"u\",\"generation\":\"18446744073709551615\"}}],"
	    "\"complete\":true}");
	ProtobufCMessage *m;
	struct err e = {0};
	ck_assert_int_eq(
	    pbjson_to_message(&pillar_csi__agent__v1__reconcile_state_request__descriptor, j, &m,
	                      &e),
	    0);
	PillarCsi__Agent__V1__ReconcileStateRequest *r = (void *)m;
	ck_assert(r->complete);
	ck_assert_uint_eq(r->n_volumes, 1);
	ck_assert_int_eq(r->volumes[0]->backend_type, 6);
	ck_assert_int_eq(r->volumes[0]->backend_params->params_case,
	                 PILLAR_CSI__AGENT__V1__BACKEND_PARAMS__PARAMS_FILE);
	ck_assert(r->volumes[0]->backend_params->file->preallocate);
	ck_assert_str_eq(r->volumes[0]->exports[0]->allowed_initiators[1], "nqn.b");
	ck_assert_int_eq(r->volumes[0]->exports[0]->export_params->nvmeof_tcp->port, 4420);
	ck_assert_uint_eq(r->volumes[0]->fence->generation, UINT64_MAX);
	/* and back: the same document in JSON names (lowerCamelCase at every depth), enum
	 * names, the big number as a string */
	cJSON *back = pbjson_from_message(m, 0);
	const cJSON *v0 = cJSON_GetArrayItem(cJSON_GetObjectItem(back, "volumes"), 0);
	ck_assert_str_eq(json_get_str(v0, "volumeId"), "fp/v1");
	ck_assert_str_eq(json_get_str(v0, "backendType"), "BACKEND_TYPE_FILE");
	ck_assert_ptr_null(cJSON_GetObjectItem(v0, "backend_type"));
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(v0, "fence"), "generation"),
	                 "18446744073709551615");
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(v0, "fence"), "volumeUid"), "u");
	ck_assert_ptr_nonnull(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(v0, "backendParams"), "file"));
	ck_assert_ptr_null(cJSON_GetObjectItem(cJSON_GetObjectItem(v0, "backendParams"), "zfs"));
	const cJSON *x0 = cJSON_GetArrayItem(cJSON_GetObjectItem(v0, "exports"), 0);
	ck_assert_str_eq(json_get_str(x0, "protocolType"), "PROTOCOL_TYPE_NVMEOF_TCP");
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(x0, "allowedInitiators")), 2);
	ck_assert_str_eq(
	    json_get_str(cJSON_GetObjectItem(cJSON_GetObjectItem(x0, "exportParams"), "nvmeofTcp"),
	                 "bindAddress"),
	    "10.0.0.1");
	cJSON_Delete(back);
	/* PBJSON_PROTO_NAMES: the .proto names, as before */
	back = pbjson_from_message(m, PBJSON_PROTO_NAMES);
	v0 = cJSON_GetArrayItem(cJSON_GetObjectItem(back, "volumes"), 0);
	ck_assert_str_eq(json_get_str(v0, "backend_type"), "BACKEND_TYPE_FILE");
	ck_assert_ptr_null(cJSON_GetObjectItem(v0, "backendType"));
	ck_assert_ptr_nonnull(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(v0, "backend_params"), "file"));
	cJSON_Delete(back);
	protobuf_c_message_free_unpacked(m, NULL);
	cJSON_Delete(j);
}
END_TEST

START_TEST(test_maps_bytes_and_errors)
{
	cJSON *j = parse("{\"name\":\"pvc-1\",\"parameters\":{\"a\":\"1\",\"b\":\"2\"},"
	                 "\"volume_capabilities\":[{\"mount\":{\"fs_type\":\"xfs\"},\"access_"
	                 "mode\":{\"mode\":\"SINGLE_NODE_WRITER\"}}]}");
	ProtobufCMessage *m;
	struct err e = {0};
	ck_assert_int_eq(pbjson_to_message(&csi__v1__create_volume_request__descriptor, j, &m, &e),
	                 0);
	Csi__V1__CreateVolumeRequest *r = (void *)m;
	ck_assert_uint_eq(r->n_parameters, 2);
	ck_assert_str_eq(r->parameters[1]->key, "b");
	ck_assert_str_eq(r->volume_capabilities[0]->mount->fs_type, "xfs");
	cJSON *back = pbjson_from_message(m, 0);
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(back, "parameters"), "a"), "1");
	cJSON_Delete(back);
	protobuf_c_message_free_unpacked(m, NULL);
	cJSON_Delete(j);

	j = parse("{\"sequence\":3,\"data\":\"aGVsbG8=\",\"eof\":true}");
	ck_assert_int_eq(
	    pbjson_to_message(&pillar_csi__agent__v1__send_volume_chunk__descriptor, j, &m, &e), 0);
	ck_assert_uint_eq(((PillarCsi__Agent__V1__SendVolumeChunk *)m)->data.len, 5);
	back = pbjson_from_message(m, 0);
	ck_assert_str_eq(json_get_str(back, "data"), "aGVsbG8=");
	cJSON_Delete(back);
	protobuf_c_message_free_unpacked(m, NULL);
	cJSON_Delete(j);

	static const char *bad[] = {
	    "{\"nope\":1}",      "{\"sequence\":-1}",  "{\"sequence\":1.5}",
	    "{\"eof\":\"yes\"}", "{\"data\":\"***\"}", "[]",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		j = parse(bad[i]);
		ck_assert_msg(
		    pbjson_to_message(&pillar_csi__agent__v1__send_volume_chunk__descriptor, j, &m,
		                      &e) == -EINVAL,
		    "accepted %s", bad[i]);
		ck_assert_ptr_null(m);
		cJSON_Delete(j);
	}
	j = parse("{\"backend_type\":\"NO_SUCH\"}");
	ck_assert_int_eq(
	    pbjson_to_message(&pillar_csi__agent__v1__create_volume_request__descriptor, j, &m, &e),
	    -EINVAL);
	ck_assert_str_eq(
	    e.msg, "field backend_type: unknown pillar_csi.agent.v1.BackendType value \"NO_SUCH\"");
	cJSON_Delete(j);
}
END_TEST

START_TEST(test_wrappers_are_bare_values)
{
	cJSON *j = parse("{\"ready\":true}");
	ProtobufCMessage *m;
	struct err e = {0};
	ck_assert_int_eq(pbjson_to_message(&csi__v1__probe_response__descriptor, j, &m, &e), 0);
	ck_assert(((Csi__V1__ProbeResponse *)m)->ready->value);
	cJSON *back = pbjson_from_message(m, 0);
	char *s = cJSON_PrintUnformatted(back);
	ck_assert_str_eq(s, "{\"ready\":true}");
	cJSON_free(s);
	cJSON_Delete(back);
	protobuf_c_message_free_unpacked(m, NULL);
	cJSON_Delete(j);
	/* the object form is still read */
	j = parse("{\"ready\":{\"value\":false}}");
	ck_assert_int_eq(pbjson_to_message(&csi__v1__probe_response__descriptor, j, &m, &e), 0);
	back = pbjson_from_message(m, 0);
	s = cJSON_PrintUnformatted(back);
	ck_assert_str_eq(s, "{\"ready\":false}");
	cJSON_free(s);
	cJSON_Delete(back);
	protobuf_c_message_free_unpacked(m, NULL);
	cJSON_Delete(j);
}
END_TEST

/* Both spellings of every field on input, the JSON spelling on output; map keys untouched. */
START_TEST(test_json_names)
{
	static const struct {
		const char *proto, *json;
	} names[] = {
	    {"capacity_bytes", "capacityBytes"},
	    {"volume_id", "volumeId"},
	    {"nvmeof_tcp", "nvmeofTcp"},
	    {"ready", "ready"},
	    {"a_b_c", "aBC"},
	    {"x__y_", "xY"},
	    {"field_2x", "field2x"},
	};
	char buf[32];
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		ck_assert_uint_eq(pbjson_json_name(names[i].proto, buf, sizeof(buf)),
		                  strlen(names[i].json));
		ck_assert_str_eq(buf, names[i].json);
	}
	ck_assert_uint_eq(pbjson_json_name("capacity_bytes", buf, 5), 13); /* truncated */
	ck_assert_str_eq(buf, "capa");

	static const char *const in[] = {
	    "{\"volume_id\":\"p/"
	    "v\",\"capacity_bytes\":\"5\",\"backend_type\":\"BACKEND_TYPE_ZFS_ZVOL\","
	    "\"backend_params\":{\"zfs\":{\"pool\":\"tank\",\"parent_dataset\":\"k8s\","
	    "\"properties\":{\"com.x:some_key\":\"v\"}}}}",
	    "{\"volumeId\":\"p/v\",\"capacityBytes\":5,\"backendType\":\"BACKEND_TYPE_ZFS_ZVOL\","
	    "\"backendParams\":{\"zfs\":{\"pool\":\"tank\",\"parentDataset\":\"k8s\","
	    "\"properties\":{\"com.x:some_key\":\"v\"}}}}",
	};
	for (size_t i = 0; i < 2; i++) {
		cJSON *j = parse(in[i]);
		ProtobufCMessage *m;
		struct err e = {0};
		ck_assert_msg(
		    pbjson_to_message(&pillar_csi__agent__v1__create_volume_request__descriptor, j,
		                      &m, &e) == 0,
		    "%s: %s", in[i], e.msg);
		PillarCsi__Agent__V1__CreateVolumeRequest *r = (void *)m;
		ck_assert_str_eq(r->volume_id, "p/v");
		ck_assert_int_eq(r->capacity_bytes, 5);
		ck_assert_str_eq(r->backend_params->zfs->parent_dataset, "k8s");
		cJSON *back = pbjson_from_message(m, 0);
		char *s = cJSON_PrintUnformatted(back);
		ck_assert_str_eq(
		    s, "{\"volumeId\":\"p/v\",\"capacityBytes\":\"5\","
		       "\"backendType\":\"BACKEND_TYPE_ZFS_ZVOL\",\"backendParams\":{\"zfs\":{"
		       "\"pool\":\"tank\",\"parentDataset\":\"k8s\","
		       "\"properties\":{\"com.x:some_key\":\"v\"}}}}");
		cJSON_free(s);
		cJSON_Delete(back);
		protobuf_c_message_free_unpacked(m, NULL);
		cJSON_Delete(j);
	}
	/* a name that is neither spelling is refused, naming it */
	static const char *const bad[] = {"{\"Volume_id\":\"x\"}", "{\"volumeID\":\"x\"}",
	                                  "{\"volume_Id\":\"x\"}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cJSON *j = parse(bad[i]);
		ProtobufCMessage *m;
		struct err e = {0};
		ck_assert_int_eq(
		    pbjson_to_message(&pillar_csi__agent__v1__create_volume_request__descriptor, j,
		                      &m, &e),
		    -EINVAL);
		ck_assert_ptr_nonnull(strstr(e.msg, "has no field"));
		cJSON_Delete(j);
	}
}
END_TEST

/* Reads in into a message of d and prints it back; want NULL: the input must be refused. */
static void roundtrip(const ProtobufCMessageDescriptor *d, const char *in, const char *want)
{
	cJSON *j = parse(in);
	ProtobufCMessage *m;
	struct err e = {0};
	int r = pbjson_to_message(d, j, &m, &e);
	cJSON_Delete(j);
	if (!want) {
		ck_assert_msg(r == -EINVAL, "accepted %s", in);
		ck_assert_ptr_null(m);
		return;
	}
	ck_assert_msg(r == 0, "%s: %s", in, e.msg);
	cJSON *back = pbjson_from_message(m, 0);
	char *s = cJSON_PrintUnformatted(back);
	ck_assert_str_eq(s, want);
	cJSON_free(s);
	cJSON_Delete(back);
	protobuf_c_message_free_unpacked(m, NULL);
}

/* proto3 JSON: 64-bit integers are strings on output (numbers still read), Timestamp is RFC 3339 */
START_TEST(test_int64_and_timestamps)
{
	const ProtobufCMessageDescriptor *cv =
	    &pillar_csi__agent__v1__create_volume_response__descriptor;
	const ProtobufCMessageDescriptor *hc =
	    &pillar_csi__agent__v1__health_check_response__descriptor;
	roundtrip(cv, "{\"capacityBytes\":1}", "{\"capacityBytes\":\"1\"}");
	roundtrip(cv, "{\"capacity_bytes\":\"-9223372036854775808\"}",
	          "{\"capacityBytes\":\"-9223372036854775808\"}");
	/* numbers beyond 2^53 are read exactly too (base/json.h keeps their text) */
	roundtrip(cv, "{\"capacityBytes\":9007199254740993}",
	          "{\"capacityBytes\":\"9007199254740993\"}");
	roundtrip(cv, "{\"capacityBytes\":9223372036854775807}",
	          "{\"capacityBytes\":\"9223372036854775807\"}");
	roundtrip(cv, "{\"capacityBytes\":9223372036854775808}", NULL);
	roundtrip(cv, "{\"capacityBytes\":\"9223372036854775808\"}", NULL); /* was INT64_MIN */
	roundtrip(hc, "{\"checkedAt\":\"1970-01-01T00:00:00Z\"}",
	          "{\"checkedAt\":\"1970-01-01T00:00:00Z\"}");
	roundtrip(hc, "{\"checked_at\":{\"seconds\":1796282654,\"nanos\":250000000}}",
	          "{\"checkedAt\":\"2026-12-03T07:24:14.250Z\"}");
	roundtrip(hc, "{\"checkedAt\":\"2026-12-03T09:24:14.00025+02:00\"}",
	          "{\"checkedAt\":\"2026-12-03T07:24:14.000250Z\"}");
	roundtrip(hc, "{\"checkedAt\":\"2026-12-03T07:24:14.000000001-00:30\"}",
	          "{\"checkedAt\":\"2026-12-03T07:54:14.000000001Z\"}");
	roundtrip(hc, "{\"checkedAt\":\"0001-01-01T00:00:00Z\"}",
	          "{\"checkedAt\":\"0001-01-01T00:00:00Z\"}");
	roundtrip(hc, "{\"checkedAt\":\"9999-12-31T23:59:59.999999999Z\"}",
	          "{\"checkedAt\":\"9999-12-31T23:59:59.999999999Z\"}");
	static const char *const bad[] = {
	    "{\"checkedAt\":\"2026-12-03 07:24:14Z\"}",
	    "{\"checkedAt\":\"2026-12-03T07:24:14\"}",
	    "{\"checkedAt\":\"2026-12-03T07:24:14.Z\"}",
	    "{\"checkedAt\":\"2026-12-03T07:24:14.1234567891Z\"}",
	    "{\"checkedAt\":\"2026-12-03T07:24:14+2:00\"}",
	    "{\"checkedAt\":\"2026-12-03T07:24:14Zjunk\"}",
	    "{\"checkedAt\":\"9999-12-31T23:59:59-01:00\"}",
	    "{\"checkedAt\":5}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		roundtrip(hc, bad[i], NULL);
}
END_TEST

/* A field given twice — by either spelling — or two members of one oneof are refused, as
 * protobuf's own JSON parser refuses them (fuzz-brief found the first copy leaking in CI). */
START_TEST(test_field_given_twice)
{
	const ProtobufCMessageDescriptor *cv =
	    &pillar_csi__agent__v1__create_volume_request__descriptor;
	static const char *const bad[] = {
	    "{\"volume_id\":\"a\",\"volumeId\":\"b\"}",
	    "{\"backendParams\":{\"file\":{}},\"backend_params\":{\"file\":{}}}",
	    "{\"backendParams\":{\"zfs\":{\"pool\":\"t\"},\"lvm\":{}}}",
	    "{\"backendParams\":{\"file\":{\"pool\":\"a\",\"pool\":\"b\"}}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cJSON *j = cJSON_Parse(bad[i]);
		ProtobufCMessage *m = (void *)1;
		struct err e = {0};
		ck_assert_ptr_nonnull(j);
		ck_assert_int_eq(pbjson_to_message(cv, j, &m, &e), -EINVAL);
		ck_assert_ptr_null(m);
		ck_assert_msg(strstr(e.msg, "more than once") || strstr(e.msg, "one oneof"), "%s",
		              e.msg);
		cJSON_Delete(j);
	}
	/* a null member of a oneof is absent, so the other one may be given */
	roundtrip(cv, "{\"backendParams\":{\"zfs\":null,\"file\":{\"pool\":\"p\"}}}",
	          "{\"backendParams\":{\"file\":{\"pool\":\"p\"}}}");
}
END_TEST

/* `pillar-csi call ... '{"volumeId":"v\u0000x"}'` must not send volume "v". */
START_TEST(test_string_as_sent)
{
	const ProtobufCMessageDescriptor *dv = &csi__v1__delete_volume_request__descriptor;
	static const struct {
		const char *text, *msg;
	} bad[] = {
	    {"{\"volumeId\":\"fp/v1\\u0000junk\"}", "field volumeId contains a NUL byte"},
	    {"{\"secrets\":{\"k\":\"\xfe\"}}", "field secrets.k is not valid UTF-8"},
	    {"{\"secrets\":{\"k\\u0000\":\"v\"}}", "a key of secrets contains a NUL byte"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ProtobufCMessage *m = (void *)1;
		struct err e = {0};
		ck_assert_int_eq(pbjson_parse_text(dv, bad[i].text, strlen(bad[i].text), &m, &e),
		                 -EBADMSG);
		ck_assert_ptr_null(m);
		ck_assert_msg(strstr(e.msg, bad[i].msg), "%zu: %s", i, e.msg);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pbjson");
	TCase *t = tcase_create("pbjson");
	tcase_add_test(t, test_roundtrip_agent_request);
	tcase_add_test(t, test_maps_bytes_and_errors);
	tcase_add_test(t, test_wrappers_are_bare_values);
	tcase_add_test(t, test_json_names);
	tcase_add_test(t, test_int64_and_timestamps);
	tcase_add_test(t, test_field_given_twice);
	tcase_add_test(t, test_string_as_sent);
	suite_add_tcase(s, t);
	return tu_run(s);
}
