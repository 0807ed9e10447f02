/* Unit tests of kube/list's scanner: a List answer cut into its items as the bytes arrive, in
 * every chunking (one byte at a time too), on recorded pages and hostile ones: strings holding
 * braces, brackets, commas and escaped quotes (an escape split between two reads), answers cut
 * short at every byte, NUL bytes raw and escaped, an item larger than the scanner's maximum, a
 * huge item whose buffer is given back, and malformed Lists. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "kube/list.h"
#include "testutil.h"

/* What the items handed on were: their count, names (metadata.name, or member "a") joined by
 * '|', and whether one was marked (json_marked: a NUL escape). */
struct seen {
	int n, stop_at, stop_rc;
	char names[4096];
	bool marked;
};

static int note(cJSON *it, char *text, size_t len, void *arg)
{
	struct seen *x = arg;
	(void)text, (void)len;
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(it, "metadata");
	const char *name = json_get_str(md, "name") ?: json_get_str(it, "a") ?: "?";
	char path[64] = "";
	size_t l = strlen(x->names);
	snprintf(x->names + l, sizeof(x->names) - l, "%s%s", x->n ? "|" : "", name);
	x->marked |= json_marked(it, path, sizeof(path));
	if (++x->n == x->stop_at)
		return x->stop_rc;
	return 0;
}

/* Scans text in chunks of `chunk` bytes: the scanner's answer (the first failure, else
 * finish's), with what it handed on in *x and its metadata strings in rv / cont. */
static int scan_in(const char *text, size_t len, size_t chunk, size_t max, struct seen *x, char *rv,
                   char *cont, struct err *e)
{
	struct kube_list_scan s;
	int rc = 0;
	memset(x->names, 0, sizeof(x->names));
	x->n = 0;
	x->marked = false;
	kube_list_scan_init(&s, max, note, x);
	for (size_t at = 0; rc == 0 && at < len; at += chunk)
		rc = kube_list_scan_push(&s, text + at, len - at < chunk ? len - at : chunk, e);
	if (rc == 0)
		rc = kube_list_scan_finish(&s, e);
	if (rv)
		snprintf(rv, 64, "%s", s.rv ? s.rv : "");
	if (cont)
		snprintf(cont, 512, "%s", s.cont ? s.cont : "");
	kube_list_scan_free(&s);
	return rc;
}

static char *recorded_body(const char *name)
{
	char path[300];
	cJSON *t = NULL;
	snprintf(path, sizeof(path), "test/unit/kube/%s", name);
	ck_assert_int_eq(json_read_file(path, &t, NULL), 0);
	char *b = strdup(json_get_str(cJSON_GetObjectItem(t, "response"), "body_raw"));
	cJSON_Delete(t);
	return b;
}

/* A recorded page (kube-apiserver 1.32: items before metadata) in every chunk size up to 64
 * and whole: one item, the page's version and continue token. */
START_TEST(test_recorded_pages)
{
	char *b = recorded_body("03a-pa-list-limit1-page1.json");
	char rv[64], cont[512];
	struct seen x = {0};
	struct err e = {0};
	for (size_t chunk = 1; chunk <= 65; chunk++) {
		size_t c = chunk == 65 ? strlen(b) : chunk;
		ck_assert_int_eq(scan_in(b, strlen(b), c, 0, &x, rv, cont, &e), 0);
		ck_assert_int_eq(x.n, 1);
		ck_assert_str_eq(x.names, "external-1");
		ck_assert_str_eq(rv, "249");
		ck_assert_str_eq(cont,
		                 "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MjQ5LCJzdGFydCI6ImV4dGVybmFs"
		                 "LTFcdTAwMDAifQ");
	}
	free(b);
	b = recorded_body("03d-pa-list-limit1-page4.json");
	ck_assert_int_eq(scan_in(b, strlen(b), 7, 0, &x, rv, cont, &e), 0);
	ck_assert_int_eq(x.n, 1);
	ck_assert_str_eq(cont, "");
	ck_assert_str_ne(rv, "");
	free(b);
}
END_TEST

/* Strings that hold what ends a value elsewhere: a scanner that counts braces without knowing
 * strings, or takes \\" for an escaped quote, cuts these items wrong. */
static const char hostile[] =
    "{\"kind\":\"X}]\\\"List\",\"metadata\":{\"resourceVersion\":\"7\",\"x\":\"}\"},"
    "\"items\" : [ {\"a\":\"one\\\\\",\"b\":\"},{\\\"a\\\":\\\"fake\\\"}\"} ,"
    "{\"a\":\"two\",\"nested\":[{\"x\":[[],{}]},\"]]]\",\"\\\\\\\"{\"]},"
    "{\"b\":\"\\\\\\\\\",\"a\":\"th\\u0072ee\"}\n],\"apiVersion\":\"v1\"}\n";

START_TEST(test_strings_with_escapes)
{
	char rv[64], cont[512];
	struct seen x = {0};
	struct err e = {0};
	for (size_t chunk = 1; chunk <= sizeof(hostile); chunk++) {
		ck_assert_msg(scan_in(hostile, strlen(hostile), chunk, 0, &x, rv, cont, &e) == 0,
		              "chunk %zu: %s", chunk, e.msg);
		ck_assert_int_eq(x.n, 3);
		ck_assert_str_eq(x.names, "one\\|two|three");
		ck_assert_str_eq(rv, "7");
		ck_assert_str_eq(cont, "");
	}
}
END_TEST

/* Every prefix of an answer is cut short: -EBADMSG at finish (or before), never an item that
 * was not whole, never more items than the prefix completes. */
START_TEST(test_truncated)
{
	size_t len = strlen(hostile);
	struct seen x = {0};
	struct err e = {0};
	for (size_t cut = 0; cut < len - 1; cut++) { /* the last byte is a newline */
		int rc = scan_in(hostile, cut, 1 + cut % 5, 0, &x, NULL, NULL, &e);
		ck_assert_msg(rc == -EBADMSG, "cut at %zu: %d", cut, rc);
		ck_assert_int_le(x.n, 3);
		if (x.n)
			ck_assert(strncmp("one\\|two|three", x.names, strlen(x.names)) == 0);
	}
	ck_assert_int_eq(scan_in("", 0, 1, 0, &x, NULL, NULL, &e), -EBADMSG);
	ck_assert_msg(strstr(e.msg, "the list ends early at byte 0"), "%s", e.msg);
	const char *cut = "{\"items\":[{\"a\":\"x\"},{\"a\":\"y";
	ck_assert_int_eq(scan_in(cut, strlen(cut), 4, 0, &x, NULL, NULL, &e), -EBADMSG);
	ck_assert_int_eq(x.n, 1);
	ck_assert_msg(strstr(e.msg, "the list ends early at byte 27"), "%s", e.msg);
}
END_TEST

/* A raw NUL byte is refused where it stands (an item, a member, between tokens); an escaped one
 * marks only its own item, which is handed on for its reader to refuse. */
START_TEST(test_nul_bytes)
{
	static const char raw_item[] = "{\"items\":[{\"a\":\"x\"},{\"a\":\"y\0z\"}]}";
	static const char raw_between[] = "{\"items\":[{\"a\":\"x\"}\0]}";
	static const char raw_meta[] = "{\"metadata\":{\"resourceVersion\":\"1\0\"},\"items\":[]}";
	static const char escaped[] =
	    "{\"items\":[{\"a\":\"x\"},{\"a\":\"y\\u0000z\"},{\"a\":\"w\"}]}";
	struct seen x = {0};
	struct err e = {0};
	ck_assert_int_eq(scan_in(raw_item, sizeof(raw_item) - 1, 3, 0, &x, NULL, NULL, &e),
	                 -EBADMSG);
	ck_assert_int_eq(x.n, 1);
	ck_assert_msg(strstr(e.msg, "item 1: invalid JSON: contains a NUL byte"), "%s", e.msg);
	ck_assert_int_eq(scan_in(raw_between, sizeof(raw_between) - 1, 1, 0, &x, NULL, NULL, &e),
	                 -EBADMSG);
	ck_assert_msg(strstr(e.msg, "unexpected byte at byte 19"), "%s", e.msg);
	ck_assert_int_eq(scan_in(raw_meta, sizeof(raw_meta) - 1, 64, 0, &x, NULL, NULL, &e),
	                 -EBADMSG);
	ck_assert_int_eq(scan_in(escaped, sizeof(escaped) - 1, 2, 0, &x, NULL, NULL, &e), 0);
	ck_assert_int_eq(x.n, 3);
	ck_assert(x.marked);
	ck_assert_str_eq(x.names, "x|y\xef\xbf\xbfz|w");
}
END_TEST

/* An item over the scanner's maximum is -EMSGSIZE however it is chunked, one at the maximum
 * passes; a huge item within the default maximum passes, and its buffer is given back. */
START_TEST(test_huge_item)
{
	size_t big = 4u << 20;
	char *t = malloc(big + 64);
	int n = snprintf(t, big + 64, "{\"items\":[{\"a\":\"");
	memset(t + n, 'x', big);
	n += (int)big;
	n += snprintf(t + n, 64, "\"},{\"a\":\"s\"}]}");
	struct seen x = {0};
	struct err e = {0};
	ck_assert_int_eq(scan_in(t, (size_t)n, 1000, 1u << 20, &x, NULL, NULL, &e), -EMSGSIZE);
	ck_assert_int_eq(x.n, 0);
	ck_assert_int_eq(scan_in(t, (size_t)n, 4096, big + 16, &x, NULL, NULL, &e), 0);
	ck_assert_int_eq(x.n, 2);

	struct kube_list_scan s;
	kube_list_scan_init(&s, 0, note, &x);
	x.n = 0;
	x.names[0] = '\0';
	for (int at = 0; at < n; at += 16384)
		ck_assert_int_eq(
		    kube_list_scan_push(&s, t + at, n - at < 16384 ? (size_t)(n - at) : 16384, &e),
		    0);
	ck_assert_int_eq(kube_list_scan_finish(&s, &e), 0);
	ck_assert_int_eq(x.n, 2);
	ck_assert_uint_lt(s.cap, 256u << 10);
	kube_list_scan_free(&s);
	free(t);
}
END_TEST

/* Answers that are not a List: each -EBADMSG with its reason, whatever was whole before it
 * handed on. */
START_TEST(test_malformed)
{
	static const struct {
		const char *text, *why;
		int items;
	} cases[] = {
	    {"[]", "unexpected byte at byte 0", 0},
	    {"{\"items\":{}}", "items is not an array", 0},
	    {"{\"items\":\"x\"}", "items is not an array", 0},
	    {"{\"items\":[1]}", "item 0: not an object", 0},
	    {"{\"items\":[{},]}", "unexpected byte at byte 13", 1},
	    {"{\"items\":[{}}]}", "unexpected byte", 1},
	    {"{\"items\":[{]]}", "item 0: invalid JSON", 0},
	    {"{\"items\":[{}]}x", "data after the list", 1},
	    {"{\"items\":[{}]}{}", "data after the list", 1},
	    {"{\"items\":[],\"items\":[{}]}", "a second items or metadata member", 0},
	    {"{\"metadata\":[],\"items\":[]}", "metadata is not an object", 0},
	    {"{\"items\" []}", "unexpected byte", 0},
	    {"{\"kind\":}", "unexpected byte at byte 8", 0},
	    {"{\"kind\":tru}", "invalid JSON value", 0},
	    {"{\"kind\":\"a\",}", "unexpected byte", 0},
	    {"{items:[]}", "unexpected byte at byte 1", 0},
	    {"{\"k\\x\":1}", "invalid member name", 0},
	    {"{\"items\":[{}] \x01}", "unexpected byte", 1},
	};
	struct seen x = {0};
	struct err e = {0};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (size_t chunk = 1; chunk <= 3; chunk += 2) {
			int rc = scan_in(cases[i].text, strlen(cases[i].text), chunk, 0, &x, NULL,
			                 NULL, &e);
			ck_assert_msg(rc == -EBADMSG && strstr(e.msg, cases[i].why), "%s: %d %s",
			              cases[i].text, rc, e.msg);
			ck_assert_int_eq(x.n, cases[i].items);
		}
	}
	/* accepted: no members, null items, members in any order, whitespace anywhere */
	ck_assert_int_eq(scan_in("{}", 2, 1, 0, &x, NULL, NULL, &e), 0);
	ck_assert_int_eq(scan_in("{\"items\":null}", 14, 1, 0, &x, NULL, NULL, &e), 0);
	const char *ws =
	    " \r\n{ \"metadata\" : { } , \"n\" : -1.5e3 ,\t\"items\" : [ ] , \"b\":true } ";
	ck_assert_int_eq(scan_in(ws, strlen(ws), 1, 0, &x, NULL, NULL, &e), 0);
	ck_assert_int_eq(x.n, 0);
}
END_TEST

/* fn's nonzero return stops the scan and is returned as it is, now and on later bytes. */
START_TEST(test_fn_stops)
{
	struct seen x = {.stop_at = 2, .stop_rc = -ENOSPC};
	struct err e = {0};
	struct kube_list_scan s;
	const char *t = "{\"items\":[{\"a\":\"1\"},{\"a\":\"2\"},{\"a\":\"3\"}]}";
	kube_list_scan_init(&s, 0, note, &x);
	ck_assert_int_eq(kube_list_scan_push(&s, t, strlen(t), &e), -ENOSPC);
	ck_assert(s.stopped);
	ck_assert_int_eq(x.n, 2);
	ck_assert_int_eq(kube_list_scan_push(&s, "}", 1, &e), -ENOSPC);
	ck_assert_int_eq(kube_list_scan_finish(&s, &e), -ENOSPC);
	ck_assert_int_eq(x.n, 2);
	kube_list_scan_free(&s);
}
END_TEST

/* cJSON's allocations (json.c's hooks replaced by a counting one for the test's process). */
static size_t json_allocs;

static void *counting_malloc(size_t n)
{
	json_allocs++;
	return malloc(n);
}

/* An item handed on with drop_managed_fields: without managedFields, the rest as sent, and
 * with its text, which parses to the same object. */
static int kept(cJSON *it, char *text, size_t len, void *arg)
{
	cJSON *md = cJSON_GetObjectItemCaseSensitive(it, "metadata"), *again = NULL;
	ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(md, "managedFields"));
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(md, "labels"), "l"), "v");
	ck_assert_ptr_nonnull(text);
	ck_assert_int_eq(json_parse_strict(text, len, &again, NULL), 0);
	ck_assert(cJSON_Compare(it, again, true));
	cJSON_Delete(again);
	++*(int *)arg;
	return 0;
}

/* cJSON allocations while a List of one item whose metadata.managedFields holds `managed`
 * entries is scanned, managedFields cut before the parse or not. */
static size_t allocs_of_list(size_t managed, bool drop)
{
	static const char entry[] = "{\"manager\":\"m\",\"operation\":\"Update\",\"fieldsV1\":"
	                            "{\"f:spec\":{\"f:x\":{}}}},";
	size_t cap = 512 + managed * sizeof(entry);
	char *t = malloc(cap);
	int n = snprintf(t, cap,
	                 "{\"items\":[{\"apiVersion\":\"v1\",\"kind\":\"K\",\"metadata\":"
	                 "{\"name\":\"a\",\"managedFields\":[");
	for (size_t i = 0; i < managed; i++)
		n += snprintf(t + n, cap - (size_t)n, "%s", entry);
	n += snprintf(t + n - 1, cap - (size_t)n,
	              "],\"labels\":{\"l\":\"v\"}},\"spec\":{\"x\":1}}]}") -
	     1;
	cJSON *warm = NULL; /* json.c installs its hooks once, at its first parse */
	ck_assert_int_eq(json_parse_strict("{}", 2, &warm, NULL), 0);
	cJSON_Delete(warm);
	cJSON_Hooks hooks = {counting_malloc, free};
	cJSON_InitHooks(&hooks);
	json_allocs = 0;
	struct kube_list_scan s;
	struct err e = {0};
	int items = 0;
	kube_list_scan_init(&s, 0, drop ? kept : NULL, &items);
	s.drop_managed_fields = drop;
	ck_assert_int_eq(kube_list_scan_push(&s, t, (size_t)n, &e), 0);
	ck_assert_int_eq(kube_list_scan_finish(&s, &e), 0);
	ck_assert_int_eq(items, drop ? 1 : 0);
	kube_list_scan_free(&s);
	free(t);
	return json_allocs;
}

/* With drop_managed_fields, metadata.managedFields is never parsed: the scan of an item costs
 * the same allocations whatever that member holds (without it, each entry costs several). */
START_TEST(test_managed_fields_never_parsed)
{
	size_t one = allocs_of_list(1, true), many = allocs_of_list(2000, true);
	ck_assert_uint_eq(one, many);
	ck_assert_uint_gt(allocs_of_list(2000, false), many + 2000);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("kube_list");
	TCase *t = tcase_create("core");
	tcase_add_test(t, test_recorded_pages);
	tcase_add_test(t, test_strings_with_escapes);
	tcase_add_test(t, test_truncated);
	tcase_add_test(t, test_nul_bytes);
	tcase_add_test(t, test_huge_item);
	tcase_add_test(t, test_malformed);
	tcase_add_test(t, test_fn_stops);
	tcase_add_test(t, test_managed_fields_never_parsed);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
