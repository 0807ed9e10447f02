/* A string of a gRPC request is the bytes that were sent (grpc/strcheck.h): the wire walk over
 * every field shape, and the server refusing such a request before any handler runs. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "csi.pb-c.h"
#include "grpc/client.h"
#include "grpc/server.h"
#include "grpc/strcheck.h"
#include "pillar_csi/agent/v1/agent.pb-c.h"
#include "testutil.h"

/* Packs m, then turns every byte 0xfe of the wire into a NUL byte: protobuf-c packs a C string
 * by strlen, so a NUL can only be put on the wire this way (the length prefixes stay right, and
 * none of these small messages has a length or tag byte 0xfe). */
static size_t pack_nul(const ProtobufCMessage *m, uint8_t *buf, size_t cap)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	ck_assert_uint_le(n, cap);
	protobuf_c_message_pack(m, buf);
	for (size_t i = 0; i < n; i++)
		if (buf[i] == 0xfe)
			buf[i] = '\0';
	return n;
}

static const char *check(const ProtobufCMessage *m)
{
	static char msg[256];
	uint8_t buf[1024];
	size_t n = pack_nul(m, buf, sizeof(buf));
	int r = grpc_strcheck(m->descriptor, buf, n, msg, sizeof(msg));
	ck_assert_int_eq(r, msg[0] ? -EILSEQ : 0);
	return msg;
}

START_TEST(test_strcheck_fields)
{
	Csi__V1__DeleteVolumeRequest dv = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
	dv.volume_id = "fp/pvc-1";
	ck_assert_str_eq(check(&dv.base), "");
	dv.volume_id = "fp/pvc-1\xfejunk";
	ck_assert_str_eq(check(&dv.base), "field volume_id contains a NUL byte");
	dv.volume_id = "fp/pvc-\xc0\xaf";
	ck_assert_str_eq(check(&dv.base), "field volume_id is not valid UTF-8");
	dv.volume_id = "fp/\xc3\xa9t\xc3\xa9";
	ck_assert_str_eq(check(&dv.base), "");

	/* nested messages in a repeated field, a repeated string, map values and keys */
	Csi__V1__VolumeCapability__MountVolume mount =
	    CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	Csi__V1__VolumeCapability cap0 = CSI__V1__VOLUME_CAPABILITY__INIT, cap1 = cap0;
	Csi__V1__VolumeCapability *caps[] = {&cap0, &cap1};
	Csi__V1__CreateVolumeRequest__ParametersEntry pe =
	    CSI__V1__CREATE_VOLUME_REQUEST__PARAMETERS_ENTRY__INIT;
	Csi__V1__CreateVolumeRequest__ParametersEntry *params[] = {&pe};
	Csi__V1__CreateVolumeRequest__SecretsEntry se =
	    CSI__V1__CREATE_VOLUME_REQUEST__SECRETS_ENTRY__INIT;
	Csi__V1__CreateVolumeRequest__SecretsEntry *secrets[] = {&se};
	Csi__V1__CreateVolumeRequest cv = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	char *flags[] = {"noatime", "discard\xfe"};
	cv.name = "pvc-1";
	cv.n_volume_capabilities = 2;
	cv.volume_capabilities = caps;
	cap1.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap1.mount = &mount;
	mount.fs_type = "ext4";
	cv.n_parameters = 1;
	cv.parameters = params;
	pe.key = "pillar-csi.bhyoo.com/pool";
	pe.value = "tank";
	cv.n_secrets = 1;
	cv.secrets = secrets;
	se.key = "password";
	se.value = "s3cret";
	ck_assert_str_eq(check(&cv.base), "");
	cv.name = "n\xfex";
	ck_assert_str_eq(check(&cv.base), "field name contains a NUL byte");
	cv.name = "pvc-1";
	mount.fs_type = "ext4\xfe";
	ck_assert_str_eq(check(&cv.base),
	                 "field volume_capabilities[1].mount.fs_type contains a NUL byte");
	mount.fs_type = "ext4";
	mount.n_mount_flags = 2;
	mount.mount_flags = flags;
	ck_assert_str_eq(check(&cv.base),
	                 "field volume_capabilities[1].mount.mount_flags[1] contains a NUL byte");
	mount.n_mount_flags = 1;
	pe.value = "tank\xfex";
	ck_assert_str_eq(check(&cv.base),
	                 "field parameters[\"pillar-csi.bhyoo.com/pool\"] contains a NUL byte");
	pe.value = "tank";
	pe.key = "pool\xfe";
	ck_assert_str_eq(check(&cv.base), "a key of field parameters contains a NUL byte");
	pe.key = "pool";
	se.value = "s3cret\xff"; /* the secret's key is not printed */
	ck_assert_str_eq(check(&cv.base), "field secrets[...] is not valid UTF-8");
	se.value = "s3cret";
	ck_assert_str_eq(check(&cv.base), "");

	/* a map whose values are messages (the agent's ListExports answer has one) */
	PillarCsi__Agent__V1__ExportInfo info = PILLAR_CSI__AGENT__V1__EXPORT_INFO__INIT;
	PillarCsi__Agent__V1__ListExportsResponse__ExportsEntry ee =
	    PILLAR_CSI__AGENT__V1__LIST_EXPORTS_RESPONSE__EXPORTS_ENTRY__INIT;
	PillarCsi__Agent__V1__ListExportsResponse__ExportsEntry *ents[] = {&ee};
	PillarCsi__Agent__V1__ListExportsResponse le =
	    PILLAR_CSI__AGENT__V1__LIST_EXPORTS_RESPONSE__INIT;
	le.n_exports = 1;
	le.exports = ents;
	ee.key = "fp/v1";
	ee.value = &info;
	info.address = "10.0.0.1\xfe";
	ck_assert_str_eq(check(&le.base), "field exports[\"fp/v1\"].address contains a NUL byte");
}
END_TEST

/* Fields the descriptor does not know, and bytes that are not the wire format, are the
 * unpacker's business: the walk neither refuses nor reads past them. */
START_TEST(test_strcheck_unknown_and_truncated)
{
	char msg[128];
	/* field 15 (unknown to DeleteVolumeRequest) holding a NUL, then volume_id "v" */
	static const uint8_t unknown[] = {0x7a, 2, 'a', 0, 0x0a, 1, 'v'};
	ck_assert_int_eq(grpc_strcheck(&csi__v1__delete_volume_request__descriptor, unknown,
	                               sizeof(unknown), msg, sizeof(msg)),
	                 0);
	/* a length running past the end, a varint that never ends, a group */
	static const uint8_t cut[] = {0x0a, 9, 'v', 0};
	static const uint8_t endless[] = {0x08, 0xff, 0xff, 0xff};
	static const uint8_t group[] = {0x0b, 0x0c};
	ck_assert_int_eq(grpc_strcheck(&csi__v1__delete_volume_request__descriptor, cut,
	                               sizeof(cut), msg, sizeof(msg)),
	                 0);
	ck_assert_int_eq(grpc_strcheck(&csi__v1__delete_volume_request__descriptor, endless,
	                               sizeof(endless), msg, sizeof(msg)),
	                 0);
	ck_assert_int_eq(grpc_strcheck(&csi__v1__delete_volume_request__descriptor, group,
	                               sizeof(group), msg, sizeof(msg)),
	                 0);
	/* the last of two occurrences holds the NUL: protobuf-c would keep "v" */
	static const uint8_t twice[] = {0x0a, 1, 'w', 0x0a, 3, 'v', 0, 'x'};
	ck_assert_int_eq(grpc_strcheck(&csi__v1__delete_volume_request__descriptor, twice,
	                               sizeof(twice), msg, sizeof(msg)),
	                 -EILSEQ);
	ck_assert_str_eq(msg, "field volume_id contains a NUL byte");
}
END_TEST

/* ---- the server: refused before the handler ---------------------------------------------- */

static atomic_int handled;

static int h_delete(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                    void *ctx)
{
	Csi__V1__DeleteVolumeResponse *r = grpc_call_alloc(call, sizeof(*r));
	(void)req;
	(void)ctx;
	atomic_fetch_add(&handled, 1);
	csi__v1__delete_volume_response__init(r);
	*resp = &r->base;
	return GRPC_OK;
}

static const struct grpc_method methods[] = {
    {.name = "DeleteVolume",
     .unary = h_delete,
     .req = &csi__v1__delete_volume_request__descriptor,
     .resp = &csi__v1__delete_volume_response__descriptor},
};
static const struct grpc_service controller = {
    .name = "csi.v1.Controller", .methods = methods, .n_methods = 1};

/* A request whose field 1 carries the n bytes at s, whatever the method's message: an unknown
 * field of an empty message, which protobuf-c packs as it is. */
static int raw_call(struct grpc_channel *ch, const char *path, const char *s, size_t n,
                    const ProtobufCMessageDescriptor *resp_desc, struct grpc_status *st)
{
	Csi__V1__GetPluginInfoRequest carrier = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	uint8_t data[128] = {(uint8_t)n}; /* an unknown field's data starts with its length */
	ck_assert_uint_lt(n, 128);
	memcpy(data + 1, s, n);
	ProtobufCMessageUnknownField f = {.tag = 1,
	                                  .wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED,
	                                  .len = n + 1,
	                                  .data = data};
	ProtobufCMessage *resp = NULL;
	carrier.base.n_unknown_fields = 1;
	carrier.base.unknown_fields = &f;
	int code = grpc_channel_call(ch, path, &carrier.base, resp_desc, &resp, 5000, NULL, st);
	if (resp)
		protobuf_c_message_free_unpacked(resp, NULL);
	return code;
}

START_TEST(test_server_refuses_before_handler)
{
	const char *dir = tu_mkdtemp();
	char url[512];
	const char *listen[] = {url, NULL};
	struct grpc_server_opts o;
	struct grpc_server *s;
	struct grpc_channel *ch;
	struct grpc_status st;
	struct err e = {0};

	snprintf(url, sizeof(url), "unix://%s/g.sock", dir);
	grpc_server_opts_init(&o);
	o.listen = listen;
	o.workers = 1;
	ck_assert_int_eq(grpc_server_new(&s, &o, &e), 0);
	ck_assert_int_eq(grpc_server_add_service(s, &controller, &e), 0);
	ck_assert_msg(grpc_server_start(s, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(grpc_channel_new(&ch, url, NULL, &e), 0);
	atomic_store(&handled, 0);

	const char *del = "/csi.v1.Controller/DeleteVolume";
	ck_assert_int_eq(
	    raw_call(ch, del, "fp/pvc-1", 8, &csi__v1__delete_volume_response__descriptor, &st),
	    GRPC_OK);
	ck_assert_int_eq(atomic_load(&handled), 1);
	ck_assert_int_eq(raw_call(ch, del, "fp/pvc-1\0junk", 13,
	                          &csi__v1__delete_volume_response__descriptor, &st),
	                 GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(st.msg, "field volume_id contains a NUL byte");
	ck_assert_int_eq(
	    raw_call(ch, del, "fp/\xff", 4, &csi__v1__delete_volume_response__descriptor, &st),
	    GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(st.msg, "field volume_id is not valid UTF-8");
	ck_assert_int_eq(atomic_load(&handled), 1); /* the handler never saw either */

	/* the built-in health service: "" (the server) must not answer for "\0x" */
	const char *health = "/grpc.health.v1.Health/Check";
	ck_assert_int_eq(
	    raw_call(ch, health, "", 0, &csi__v1__delete_volume_response__descriptor, &st),
	    GRPC_OK);
	ck_assert_int_eq(
	    raw_call(ch, health, "\0x", 2, &csi__v1__delete_volume_response__descriptor, &st),
	    GRPC_INVALID_ARGUMENT);
	ck_assert_str_eq(st.msg, "field service contains a NUL byte");
	grpc_channel_free(ch);
	grpc_server_free(s);
	tu_rmtree(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("grpc_strings");
	TCase *t = tcase_create("grpc_strings");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_strcheck_fields);
	tcase_add_test(t, test_strcheck_unknown_and_truncated);
	tcase_add_test(t, test_server_refuses_before_handler);
	suite_add_tcase(s, t);
	return tu_run(s);
}
