/* base/json (json.h: json_string_scan): the one string scanner of json_check_strings and
 * json_cut_member — each escape and byte a string may hold, its fault and where it stands; the
 * messages json_check_strings words from it; and the cut and the strict parse agreeing on every
 * such string, so that the cut never lets through what the parse refuses. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "testutil.h"

/* A string's text (after its opening quote, up to and with its closing quote when it has one),
 * its first fault and where json_string_scan stops: the fault, else the closing quote. */
#define S(t) t, sizeof(t) - 1
static const struct {
	const char *text;
	size_t len;
	enum str_fault f;
	size_t at;
} strings[] = {
    {S("\""), STR_OK, 0},
    {S("abc\""), STR_OK, 3},
    {S("\\\"\\\\\\/\\b\\f\\n\\r\\t\""), STR_OK, 16},
    {S("\\u0041\\u00e9\\u00E9\\uffff\""), STR_OK, 24},
    {S("\\ud83d\\ude00\\uD83D\\uDE00\""), STR_OK, 24}, /* surrogate pairs */
    {S("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f\""), STR_OK, 10},
    {S("abc"), STR_OK, 3}, /* no closing quote: the text's end */
    /* cJSON decodes these into a NUL byte: the C string would end there */
    {S("ab\\u0000\""), STR_NUL, 2},
    {S("ab\\uzzzz\""), STR_ESCAPE, 2},
    {S("ab\\u12g4\""), STR_ESCAPE, 2},
    {S("ab\\u12"), STR_ESCAPE, 2},
    {S("ab\\u"), STR_ESCAPE, 2},
    /* raw bytes RFC 8259 §7 has escaped, or that are not UTF-8 */
    {S("a\0b\""), STR_NUL, 1},
    {S("a\tb\""), STR_CONTROL, 1},
    {S("a\x1f\""), STR_CONTROL, 1},
    {S("a\xff\""), STR_UTF8, 1},
    {S("a\xc0\xaf\""), STR_UTF8, 1},
    {S("a\xed\xa0\x80\""), STR_UTF8, 1}, /* a surrogate in UTF-8 */
    {S("a\xc3\\n\""), STR_UTF8, 1},      /* a sequence cut short by an escape */
    /* escapes JSON does not have, and surrogates cJSON does not pair */
    {S("ab\\x\""), STR_INVALID_ESCAPE, 2},
    {S("ab\\'\""), STR_INVALID_ESCAPE, 2},
    {S("ab\\U0041\""), STR_INVALID_ESCAPE, 2},
    {S("ab\\0\""), STR_INVALID_ESCAPE, 2},
    {S("ab\\\xc3\xa9\""), STR_INVALID_ESCAPE, 2},
    {S("ab\\"), STR_INVALID_ESCAPE, 2},
    {S("ab\\ud800\""), STR_INVALID_ESCAPE, 2},
    {S("ab\\udc00\\ud800\""), STR_INVALID_ESCAPE, 2},
    {S("ab\\ud800\\u0041\""), STR_INVALID_ESCAPE, 2},
    {S("ab\\ud800\\udbff\""), STR_INVALID_ESCAPE, 2},
    {S("ab\\ud800\\u0000\""), STR_INVALID_ESCAPE, 2},
    {S("ab\\ud800\\udc0\""), STR_INVALID_ESCAPE, 2},
    {S("ab\\ud800x\\udc00\""), STR_INVALID_ESCAPE, 2},
    /* the first fault is the one told */
    {S("a\xff\\x\""), STR_UTF8, 1},
    {S("a\\x\xff\""), STR_INVALID_ESCAPE, 1},
    {S("a\\u0000\\x\""), STR_NUL, 1},
};
#define STRINGS (sizeof(strings) / sizeof(strings[0]))

START_TEST(test_scan)
{
	for (size_t i = 0; i < STRINGS; i++) {
		const char *t = strings[i].text, *end = NULL;
		enum str_fault f = json_string_scan(t, t + strings[i].len, &end);
		ck_assert_msg(f == strings[i].f, "case %zu: fault %d", i, (int)f);
		ck_assert_msg(end == t + strings[i].at, "case %zu: stops at %td", i, end - t);
	}
}
END_TEST

/* Whether case i ends at a closing quote (the others end with the text: json_string_scan's
 * own cases). */
static bool closed(size_t i)
{
	return strings[i].text[strings[i].len - 1] == '"';
}

/* before, the string of case i, after */
static size_t wrap(char *buf, size_t cap, const char *before, size_t i, const char *after)
{
	size_t b = strlen(before), n = strings[i].len, a = strlen(after);
	ck_assert_uint_lt(b + n + a, cap);
	memcpy(buf, before, b);
	memcpy(buf + b, strings[i].text, n);
	memcpy(buf + b + n, after, a + 1);
	return b + n + a;
}

/* json_check_strings words each fault, as a value's and as a key's, at its byte: an escape JSON
 * does not have is refused by the check itself too (before, only cJSON refused it). */
START_TEST(test_check_messages)
{
	for (size_t i = 0; i < STRINGS; i++) {
		char text[128], want[160];
		if (!strings[i].f || !closed(i))
			continue;
		for (int key = 0; key < 2; key++) {
			size_t len = key ? wrap(text, sizeof(text), "{\"a\":{\"b\":1,\"", i, ":1}}")
			                 : wrap(text, sizeof(text), "{\"a\":[\"", i, "]}");
			size_t at = (key ? 13 : 7) + strings[i].at;
			struct err e = {0};
			ck_assert_msg(json_check_strings(text, len, &e) == -EBADMSG, "case %zu key %d", i, key);
			snprintf(want, sizeof(want), "%s %s (byte %zu)",
			         key ? "a key of a" : "field a[0]", str_fault_text(strings[i].f), at);
			ck_assert_msg(!strcmp(e.msg, want), "case %zu: %s", i, e.msg);
		}
	}
	struct err e = {0};
	ck_assert_int_eq(json_check_strings("\"\\q\"", 4, &e), -EBADMSG);
	ck_assert_str_eq(e.msg, "field (root) contains an invalid escape (byte 1)");
}
END_TEST

/* Every string, as the member cut and as a key beside it: the cut leaves exactly the texts the
 * strict parse refuses, and cuts the others to the object without the member. */
START_TEST(test_cut_agrees)
{
	static const char *const shapes[][2] = {
	    {"{\"metadata\":{\"managedFields\":[\"", "],\"n\":1}}"},
	    {"{\"metadata\":{\"", ":1,\"managedFields\":[]}}"},
	    {"{\"", ":{},\"metadata\":{\"managedFields\":[]}}"},
	};
	for (size_t i = 0; i < STRINGS; i++) {
		for (size_t s = 0; closed(i) && s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			char text[160];
			size_t len = wrap(text, sizeof(text), shapes[s][0], i, shapes[s][1]);
			cJSON *v = NULL;
			int parsed = json_parse_strict(text, len, &v, NULL);
			cJSON_Delete(v);
			ck_assert_msg((parsed == 0) == !strings[i].f, "case %zu shape %zu", i, s);
			size_t after = json_cut_member(text, len, "metadata", "managedFields");
			ck_assert_msg((after < len) == !strings[i].f, "case %zu shape %zu", i, s);
		}
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("json_string");
	TCase *t = tcase_create("core");
	tcase_add_test(t, test_scan);
	tcase_add_test(t, test_check_messages);
	tcase_add_test(t, test_cut_agrees);
	suite_add_tcase(s, t);
	return tu_run(s);
}
