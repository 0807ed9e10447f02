/* Strict field validation of object files (model_strict_fields; `pillar-csi apply
 * --validate`): unknown and duplicate fields with the API server's paths, pruning as the API
 * server stores such an object, and the CRDs' schemas against the model's types — a field a CRD
 * declares is never called unknown. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"
#include "base/yaml.h"
#include "model/agent_config.h"
#include "model/kube.h"
#include "model/model.h"
#include "model/pillar.h"
#include "model/records.h"
#include "testutil.h"

static cJSON *parse(const char *s)
{
	cJSON *j = NULL;
	struct err e = {0};
	ck_assert_msg(json_parse_strict(s, strlen(s), &j, &e) == 0, "%s", e.msg);
	return j;
}

#define PA "\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarAgent\""

START_TEST(test_unknown_and_duplicate)
{
	char out[512];
	cJSON *o = parse("{" PA ",\"metadata\":{\"name\":\"s1\",\"managedFields\":[{\"x\":1}],"
	                 "\"labels\":{\"a\":\"1\",\"a\":\"2\"}},\"spec\":{\"nodeRef\":{\"name\":"
	                 "\"n\",\"bogus\":1},\"bogus\":{\"deeper\":1}},\"status\":{"
	                 "\"discoveredPools\":[{\"name\":\"p\"},{\"name\":\"q\",\"size\":1}]}}");
	ck_assert_int_eq(model_strict_fields(&model_pa_kind, o, false, out, sizeof(out)), 4);
	ck_assert_str_eq(out, "duplicate field \"metadata.labels.a\"\n"
	                      "unknown field \"spec.bogus\"\n"
	                      "unknown field \"spec.nodeRef.bogus\"\n"
	                      "unknown field \"status.discoveredPools[1].size\"");
	cJSON_Delete(o);

	/* a key given twice: found, and under pruning the last one stays (as the API server keeps
	 * it); unknown members are dropped */
	o = parse("{" PA ",\"metadata\":{\"name\":\"first\",\"name\":\"last\"},\"spec\":{"
	          "\"external\":{\"address\":\"10.0.0.1\",\"port\":1,\"bogus\":true}}}");
	ck_assert_int_eq(model_strict_fields(&model_pa_kind, o, true, out, sizeof(out)), 2);
	ck_assert_str_eq(out, "duplicate field \"metadata.name\"\n"
	                      "unknown field \"spec.external.bogus\"");
	char *text = json_dump(o);
	ck_assert_str_eq(text, "{" PA ",\"metadata\":{\"name\":\"last\"},\"spec\":{\"external\":{"
	                       "\"address\":\"10.0.0.1\",\"port\":1}}}");
	free(text);
	ck_assert_int_eq(model_strict_fields(&model_pa_kind, o, false, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "");
	cJSON_Delete(o);

	/* a protocol member this version does not know (NVMe/TCP TLS), and a member of dhchap that
	 * does not exist (docs/authentication.md: secrets are never fields of the protocol) */
	o = parse("{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarProtocol\","
	          "\"metadata\":{\"name\":\"tcp\"},\"spec\":{\"protocol\":{\"nvmeofTcp\":{"
	          "\"port\":4420,\"tls\":{\"psk\":\"s\"},\"dhchap\":{\"secret\":\"s\"}}}}}");
	ck_assert_int_eq(model_strict_fields(&model_pstr_kind, o, false, out, sizeof(out)), 2);
	ck_assert_str_eq(out, "unknown field \"spec.protocol.nvmeofTcp.tls\"\n"
	                      "unknown field \"spec.protocol.nvmeofTcp.dhchap.secret\"");
	cJSON_Delete(o);

	/* Kubernetes' own kinds, typed in part: duplicates only */
	o = parse(
	    "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n\"},"
	    "\"spec\":{\"podCIDR\":\"10.0.0.0/24\",\"taints\":[{\"key\":\"k\",\"key\":\"j\"}]}}");
	ck_assert_int_eq(model_strict_fields(&model_node_kind, o, false, out, sizeof(out)), 1);
	ck_assert_str_eq(out, "duplicate field \"spec.taints[0].key\"");
	cJSON_Delete(o);
}
END_TEST

/* Many findings: all are counted, the text ends at the buffer and stays terminated. */
START_TEST(test_many_findings)
{
	char out[64];
	char text[8192];
	size_t n = (size_t)snprintf(text, sizeof(text), "{" PA ",\"spec\":{");
	for (int i = 0; i < 100; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "%s\"bogus%d\":%d", i ? "," : "",
		                      i, i);
	snprintf(text + n, sizeof(text) - n, "}}");
	cJSON *o = parse(text);
	ck_assert_int_eq(model_strict_fields(&model_pa_kind, o, true, out, sizeof(out)), 100);
	ck_assert_uint_lt(strlen(out), sizeof(out));
	ck_assert(!strncmp(out, "unknown field \"spec.bogus0\"\n", 28));
	ck_assert_ptr_null(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "spec"), "bogus99"));
	cJSON_Delete(o);
}
END_TEST

/* An object of the CRD's schema with every property present: objects as {...} of their
 * properties, arrays as one element; scalars as 0. */
static cJSON *skeleton(const cJSON *schema)
{
	const char *type = json_get_str(schema, "type");
	const cJSON *props = cJSON_GetObjectItem(schema, "properties");
	if (type && !strcmp(type, "array"))
		return cJSON_CreateArray();
	if (!props)
		return cJSON_CreateNumber(0);
	cJSON *o = cJSON_CreateObject();
	const cJSON *p;
	cJSON_ArrayForEach(p, props)
	{
		const char *pt = json_get_str(p, "type");
		cJSON *v;
		if (pt && !strcmp(pt, "array")) {
			v = cJSON_CreateArray();
			cJSON_AddItemToArray(v, skeleton(cJSON_GetObjectItem(p, "items")));
		} else {
			v = skeleton(p);
		}
		cJSON_AddItemToObject(o, p->string, v);
	}
	return o;
}

/* The CRDs name a few leaf schemas with anchors (`total: &quantity {...}`, `available:
 * *quantity`), which yaml_doc_parse refuses: the anchor is dropped and an alias becomes {} — a
 * leaf either way, and only property names matter here. */
static void without_anchors(char *text)
{
	char *w = text, before[2] = {0, 0}; /* the two bytes read last (w may have overwritten) */
	for (const char *r = text; *r;) {
		if (before[0] == ':' && before[1] == ' ' && (*r == '&' || *r == '*')) {
			bool alias = *r == '*';
			do
				r++;
			while (*r && *r != ' ' && *r != '\n');
			if (alias)
				*w++ = '{', *w++ = '}';
			else if (*r == ' ')
				r++;
			before[0] = 0;
			continue;
		}
		before[0] = before[1];
		before[1] = *r;
		*w++ = *r++;
	}
	*w = '\0';
}

START_TEST(test_crd_fields_are_known)
{
	static const struct {
		const char *file;
		const struct model_kind *k;
	} crds[] = {
	    {"pillaragents.yaml", &model_pa_kind},
	    {"pillarprotocols.yaml", &model_pstr_kind},
	    {"pillarstores.yaml", &model_pst_kind},
	    {"pillarstorageclasses.yaml", &model_psc_kind},
	    {"pillarvolumestates.yaml", &model_pvst_kind},
	};
	for (size_t i = 0; i < sizeof(crds) / sizeof(crds[0]); i++) {
		char path[256], *text, out[512];
		size_t len;
		cJSON *crd;
		struct err e = {0};
		snprintf(path, sizeof(path), "charts/pillar-csi/files/crds/%s", crds[i].file);
		ck_assert_msg(file_read_all(path, 1u << 20, &text, &len, &e) == 0, "%s", e.msg);
		without_anchors(text);
		ck_assert_msg(yaml_doc_parse(text, strlen(text), &crd, &e) == 0, "%s: %s", path,
		              e.msg);
		free(text);
		const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(crd, "spec"), "versions");
		const cJSON *schema = cJSON_GetObjectItem(
		    cJSON_GetObjectItem(cJSON_GetArrayItem(v, 0), "schema"), "openAPIV3Schema");
		ck_assert_ptr_nonnull(schema);
		cJSON *obj = skeleton(schema);
		int n = model_strict_fields(crds[i].k, obj, false, out, sizeof(out));
		ck_assert_msg(n == 0, "%s: the model does not know %s", crds[i].file, out);
		ck_assert_ptr_nonnull(cJSON_GetObjectItem(obj, "spec"));
		cJSON_Delete(obj);
		cJSON_Delete(crd);
	}
}
END_TEST

/* An object file: what validation found is kept per item, and the item decoded without it. */
START_TEST(test_object_file_items)
{
	const char *text = "[{" PA ",\"metadata\":{\"name\":\"a\"},\"spec\":{\"nodeRef\":{\"name\":"
	                   "\"n\"},\"bogus\":1}},{" PA ",\"metadata\":{\"name\":\"b\"},\"spec\":{"
	                   "\"nodeRef\":{\"name\":\"n\"}}}]";
	struct model_any *a;
	size_t n;
	struct err e = {0};
	ck_assert_int_eq(model_decode_file(text, strlen(text), &a, &n, &e), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(a[0].fields, "unknown field \"spec.bogus\"");
	ck_assert_str_eq(a[1].fields, "");
	char *back = model_encode_text(a[0].k, a[0].obj);
	ck_assert_ptr_null(strstr(back, "bogus"));
	free(back);
	model_any_free(a, n);
	/* a name with a NUL byte is refused before anything is decoded */
	text = "{" PA ",\"metadata\":{\"name\":\"a\\u0000b\"}}";
	ck_assert_int_eq(model_decode_file(text, strlen(text), &a, &n, &e), -EBADMSG);
	ck_assert_str_eq(e.msg, "field metadata.name contains a NUL byte (byte 88)");
}
END_TEST

/* An API server's object holding a NUL byte (json_parse_marked) is refused by the model, alone:
 * the other objects of the same answer decode. */
START_TEST(test_marked_object_refused)
{
	const char *list =
	    "{\"items\":[{" PA ",\"metadata\":{\"name\":\"a\"},\"spec\":{\"nodeRef\":"
	    "{\"name\":\"n\"}}},{" PA ",\"metadata\":{\"name\":\"b\",\"annotations\":"
	    "{\"note\":\"x\\u0000y\"}}}]}";
	cJSON *v = NULL;
	struct err e = {0};
	struct model_pa pa;
	ck_assert_int_eq(json_parse_marked(list, strlen(list), &v, &e), 0);
	const cJSON *items = cJSON_GetObjectItem(v, "items");
	ck_assert_int_eq(model_decode(&model_pa_kind, cJSON_GetArrayItem(items, 0), &pa, &e), 0);
	model_clear(&model_pa_kind, &pa);
	ck_assert_int_eq(model_decode(&model_pa_kind, cJSON_GetArrayItem(items, 1), &pa, &e),
	                 -EINVAL);
	ck_assert_str_eq(e.msg, "field metadata.annotations.note contains a NUL byte");
	cJSON_Delete(v);
}
END_TEST

/* The codec's strict mode (model_type_decode_strict) on a type without rules: the messages of
 * the file's syntax and shape, with and without a prefix. */
static const char *strict_err(const char *text, const char *prefix)
{
	static struct err e;
	struct model_fence_mark m;
	memset(&e, 0, sizeof(e));
	if (model_type_decode_strict(&model_fence_mark_type, text, strlen(text), prefix, &m, &e) ==
	    0) {
		model_type_clear(&model_fence_mark_type, &m);
		return "";
	}
	ck_assert_ptr_null(m.rest);
	return e.msg;
}

START_TEST(test_strict_decoding)
{
	struct model_fence_mark m;
	struct err e = {0};
	const char *ok = "{\"volumeUID\":\"u\",\"generation\":3,\"ended\":true,"
	                 "\"endedUIDs\":[\"a\",\"b\"]}";
	ck_assert_int_eq(
	    model_type_decode_strict(&model_fence_mark_type, ok, strlen(ok), NULL, &m, &e), 0);
	ck_assert_str_eq(m.volume_uid, "u");
	ck_assert_int_eq(m.generation, 3);
	ck_assert(m.ended && m.has_ended_uids);
	ck_assert_uint_eq(m.ended_uids.n, 2);
	model_type_clear(&model_fence_mark_type, &m);
	ck_assert_str_eq(strict_err("{\"volumeUID\":\"u\",\"bogus\":1}", NULL),
	                 "unknown field \"bogus\"");
	ck_assert_str_eq(strict_err("{\"volumeUID\":\"u\",\"volumeUID\":\"v\"}", "mark"),
	                 "mark: duplicate field \"volumeUID\"");
	ck_assert_str_eq(strict_err("{\"volumeUID\":null}", "mark"),
	                 "mark: volumeUID: expected string");
	ck_assert_str_eq(strict_err("{\"generation\":\"3\"}", NULL),
	                 "generation: expected integer");
	ck_assert_str_eq(strict_err("{\"ended\":1}", NULL), "ended: expected boolean");
	ck_assert_str_eq(strict_err("{\"endedUIDs\":{}}", NULL), "endedUIDs: expected array");
	ck_assert_str_eq(strict_err("{\"endedUIDs\":[\"a\",2]}", NULL),
	                 "endedUIDs[1]: expected string");
	ck_assert_str_eq(strict_err("[]", "mark"), "mark: (root): expected object");
	ck_assert_str_eq(strict_err("{\"volumeUID\":", "mark"), "mark: invalid JSON near byte 12");
	ck_assert_str_eq(strict_err("{} {}", NULL), "invalid JSON near byte 3");
	ck_assert_str_eq(strict_err("{\"volumeUID\":\"a\\u0000\"}", NULL),
	                 "field volumeUID contains a NUL byte (byte 15)");
}
END_TEST

/* A MODEL_ANY member is typed by its presence only: its value stays as it was given. */
START_TEST(test_any_member_kept)
{
	struct model_agent_config c;
	const char *text = "{\"backends\":[{\"zfs\":{\"pool\":\"a\",\"properties\":{\"x\":[1]}}},"
	                   "{\"zfs\":{\"pool\":\"b\"}}]}";
	ck_assert_int_eq(model_type_decode_text(&model_agent_config_type, text, &c, NULL), 0);
	ck_assert_uint_eq(c.n_backends, 2);
	ck_assert(c.backends[0].zfs.has_properties);
	ck_assert(!c.backends[1].zfs.has_properties);
	char *out = model_type_encode_text(&model_agent_config_type, &c);
	ck_assert_str_eq(out, text);
	free(out);
	model_type_clear(&model_agent_config_type, &c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("model_strict");
	TCase *t = tcase_create("model_strict");
	tcase_add_test(t, test_unknown_and_duplicate);
	tcase_add_test(t, test_many_findings);
	tcase_add_test(t, test_crd_fields_are_known);
	tcase_add_test(t, test_object_file_items);
	tcase_add_test(t, test_marked_object_refused);
	tcase_add_test(t, test_strict_decoding);
	tcase_add_test(t, test_any_member_kept);
	suite_add_tcase(s, t);
	return tu_run(s);
}
