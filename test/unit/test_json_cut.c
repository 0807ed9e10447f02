/* base/json_cut (json.h: json_cut_member): metadata.managedFields cut from an object's text
 * wherever it stands among metadata's members, in compact and spaced text, so that the text
 * parses to the object without it; anything else left as it is: the member elsewhere, a key
 * spelled with escapes, and every text json_parse_strict refuses (the cut never makes it
 * acceptable). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "testutil.h"

/* json_cut_member of text (metadata.managedFields) as a string. */
static char *cut(const char *text)
{
	size_t n = strlen(text);
	char *t = malloc(n + 1);
	ck_assert_ptr_nonnull(t);
	memcpy(t, text, n);
	n = json_cut_member(t, n, "metadata", "managedFields");
	t[n] = '\0';
	return t;
}

/* The cut text parses to what the whole text parses to, its first metadata.managedFields
 * deleted. */
static void same_value(const char *whole, const char *after)
{
	cJSON *a = NULL, *b = NULL;
	ck_assert_int_eq(json_parse_strict(whole, strlen(whole), &a, NULL), 0);
	ck_assert_int_eq(json_parse_strict(after, strlen(after), &b, NULL), 0);
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(a, "metadata"),
	                                        "managedFields");
	ck_assert_msg(cJSON_Compare(a, b, true), "%s -> %s", whole, after);
	cJSON_Delete(a);
	cJSON_Delete(b);
}

START_TEST(test_cut_where_it_stands)
{
	static const char *const cases[][2] = {
	    {"{\"metadata\":{\"name\":\"a\",\"managedFields\":[{\"x\":1}],\"labels\":{}},\"s\":1}",
	     "{\"metadata\":{\"name\":\"a\",\"labels\":{}},\"s\":1}"},
	    {"{\"metadata\":{\"managedFields\":[],\"name\":\"a\"}}",
	     "{\"metadata\":{\"name\":\"a\"}}"},
	    {"{\"metadata\":{\"name\":\"a\",\"managedFields\":[]}}",
	     "{\"metadata\":{\"name\":\"a\"}}"},
	    {"{\"metadata\":{\"managedFields\":[]}}", "{\"metadata\":{}}"},
	    {"{\"kind\":\"K\",\"metadata\":{\"managedFields\":{\"a\":[true,false,null,-1.5e+3,0]}}"
	     "}",
	     "{\"kind\":\"K\",\"metadata\":{}}"},
	    {" { \"metadata\" : { \"name\" : \"a\" , \"managedFields\" : [ 1 ]\n} } ",
	     " { \"metadata\" : { \"name\" : \"a\" \n} } "},
	    /* strings holding what would end or nest a value, escapes, UTF-8, a surrogate pair */
	    {"{\"metadata\":{\"managedFields\":[\"]}\\\",{\",\"\\u00e9\\ud83d\\ude00\xc3\xa9\\n\"]}"
	     "}",
	     "{\"metadata\":{}}"},
	    /* the first of two (cJSON's get finds the first) */
	    {"{\"metadata\":{\"managedFields\":1,\"managedFields\":2}}",
	     "{\"metadata\":{\"managedFields\":2}}"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *t = cut(cases[i][0]);
		ck_assert_str_eq(t, cases[i][1]);
		same_value(cases[i][0], t);
		free(t);
	}
}
END_TEST

START_TEST(test_left_as_it_is)
{
	static const char *const valid[] = {
	    "{\"managedFields\":[],\"metadata\":{}}",
	    "{\"spec\":{\"metadata\":{\"managedFields\":[]}}}",
	    "{\"metadata\":{\"name\":\"managedFields\"}}",
	    "{\"metadata\":{\"managed\\u0046ields\":[]}}",
	    "{\"metadata\":[{\"managedFields\":[]}]}",
	    "{\"metadata\":{\"x\":{\"managedFields\":[]}}}",
	    "[{\"metadata\":{\"managedFields\":[]}}]",
	    "{\"metadata\":{\"managedFieldsX\":1}}",
	};
	/* everything json_parse_strict refuses, in or around the member */
	static const char *const invalid[] = {
	    "{\"metadata\":{\"managedFields\":[1,]}}",
	    "{\"metadata\":{\"managedFields\":[1}}",
	    "{\"metadata\":{\"managedFields\":\"\\u0000\"}}",
	    "{\"metadata\":{\"managedFields\":\"\\ud800\"}}",
	    "{\"metadata\":{\"managedFields\":\"\\udc00\\ud800\"}}",
	    "{\"metadata\":{\"managedFields\":\"\\x\"}}",
	    "{\"metadata\":{\"managedFields\":\"\xff\"}}",
	    "{\"metadata\":{\"managedFields\":\"\xc0\xaf\"}}",
	    "{\"metadata\":{\"managedFields\":\"a\tb\"}}",
	    "{\"metadata\":{\"managedFields\":[\x01]}}",
	    "{\"metadata\":{\"managedFields\":tru}}",
	    "{\"metadata\":{\"managedFields\":.5}}",
	    "{\"metadata\":{\"managedFields\":1e}}",
	    "{\"metadata\":{\"managedFields\":{\"a\"}}}",
	    "{\"metadata\":{\"managedFields\":{1:2}}}",
	    "{\"metadata\":{\"managedFields\":[]},}",
	    "{\"metadata\":{\"managedFields\":[]}}x",
	    "{\"metadata\":{\"managedFields\":[]}",
	    "{\"metadata\":{\"managedFields\":[]}}{}",
	    "{\"metadata\":{\"managedFields\":[],\"n\":\"\xfe\"}}",
	};
	/* what cJSON takes but RFC 8259 does not (a NUL for a bad escape, strtod's numbers):
	 * left to cJSON as it was */
	static const char *const lenient[] = {
	    "{\"metadata\":{\"managedFields\":1.}}",
	    "{\"metadata\":{\"managedFields\":01}}",
	    "{\"metadata\":{\"managedFields\":\"\\uzzzz\"}}",
	};
	for (size_t i = 0; i < sizeof(lenient) / sizeof(lenient[0]); i++) {
		char *t = cut(lenient[i]);
		ck_assert_str_eq(t, lenient[i]);
		free(t);
	}
	for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
		char *t = cut(valid[i]);
		ck_assert_str_eq(t, valid[i]);
		free(t);
	}
	for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
		cJSON *v = NULL;
		ck_assert_msg(json_parse_strict(invalid[i], strlen(invalid[i]), &v, NULL) < 0, "%s",
		              invalid[i]);
		char *t = cut(invalid[i]);
		ck_assert_str_eq(t, invalid[i]);
		free(t);
	}
}
END_TEST

/* Nesting as deep as cJSON parses is cut; deeper than it parses is left. */
START_TEST(test_nesting)
{
	for (int depth = 990; depth <= 1010; depth += 20) {
		size_t n = (size_t)depth * 2 + 64;
		char *t = malloc(n), *p = t;
		p += sprintf(p, "{\"metadata\":{\"managedFields\":");
		for (int i = 0; i < depth; i++)
			*p++ = '[';
		for (int i = 0; i < depth; i++)
			*p++ = ']';
		p += sprintf(p, "}}");
		size_t len = (size_t)(p - t);
		cJSON *v = NULL;
		int parsed = json_parse_strict(t, len, &v, NULL);
		cJSON_Delete(v);
		size_t after = json_cut_member(t, len, "metadata", "managedFields");
		ck_assert_int_eq(parsed == 0, after < len);
		free(t);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("json_cut");
	TCase *t = tcase_create("core");
	tcase_add_test(t, test_cut_where_it_stands);
	tcase_add_test(t, test_left_as_it_is);
	tcase_add_test(t, test_nesting);
	suite_add_tcase(s, t);
	return tu_run(s);
}
