/* libFuzzer target for src/kube's parsers of what an API server and a kubeconfig hold.  data[0]
 * picks the parser, data[1] a parameter:
 *   0  kube_status_decode: an error body with HTTP status 300 + data[1];
 *   1  the watch-stream parser (kube_watch_parser_push/next): stream bytes cut into chunks of
 *      1 + data[1] bytes, as HTTP/2 DATA frames cut a watch stream anywhere;
 *   2  kube_config_from_yaml: a kubeconfig (relative file names resolve in a scratch directory);
 *   3  the list scanner (kube_list_scan_push/finish): a List answer cut into chunks of
 *      1 + data[1] bytes, each item handed on parsed, with a small largest value; and
 *      json_cut_member of the whole answer, which must never cut text json_parse_strict
 *      refuses, and must leave text that parses.
 * The client's own response path is fuzz_kube_client's.  Never a crash or a leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "harness.h"
#include "kube/codec.h"
#include "kube/config.h"
#include "kube/list.h"
#include "kube/status.h"
#include "kube/watch.h"

static void watch_stream(const uint8_t *d, size_t n, size_t chunk)
{
	struct kube_watch_parser p;
	struct kube_status st;

	kube_watch_parser_init(&p, 4096);
	for (size_t off = 0; off < n; off += chunk) {
		size_t len = n - off < chunk ? n - off : chunk;
		enum kube_event_type t;
		cJSON *obj;
		int rc;
		if (kube_watch_parser_push(&p, d + off, len) < 0)
			continue;
		while ((rc = kube_watch_parser_next(&p, &t, &obj, NULL)) != 0) {
			if (rc != 1)
				continue;
			if (t == KUBE_ERROR) {
				kube_status_from_json(&st, 0, obj);
				kube_status_clear(&st);
			}
			cJSON_Delete(obj);
		}
	}
	kube_watch_parser_free(&p);
}

static int list_item(cJSON *item, char *text, size_t len, void *arg)
{
	(void)item, (void)text, (void)len;
	return ++*(int *)arg == 1000 ? -1 : 0; /* a consumer that stops the list */
}

/* The cut of metadata.managedFields never lets through text the strict parse refuses (the
 * strings of both are json_string_scan's), and leaves text that parses. */
static void cut_agrees(const uint8_t *d, size_t n)
{
	char *t = malloc(n ? n : 1);
	if (!t)
		return;
	memcpy(t, d, n);
	size_t len = json_cut_member(t, n, "metadata", "managedFields");
	if (len < n) {
		cJSON *whole = NULL, *cut = NULL;
		if (json_parse_strict((const char *)d, n, &whole, NULL) < 0 ||
		    json_parse_strict(t, len, &cut, NULL) < 0)
			abort();
		cJSON_Delete(whole);
		cJSON_Delete(cut);
	}
	free(t);
}

static void list_answer(const uint8_t *d, size_t n, size_t chunk)
{
	struct kube_list_scan s;
	struct err e = {0};
	int items = 0, rc = 0;
	kube_list_scan_init(&s, 4096, list_item, &items);
	s.drop_managed_fields = chunk & 1; /* json_cut_member on half the runs */
	for (size_t off = 0; rc == 0 && off < n; off += chunk)
		rc = kube_list_scan_push(&s, d + off, n - off < chunk ? n - off : chunk, &e);
	if (rc == 0)
		kube_list_scan_finish(&s, &e);
	kube_list_scan_free(&s);
	cut_agrees(d, n);
}

static void kubeconfig(const uint8_t *d, size_t n)
{
	struct kube_config *c = NULL;
	struct err e = {0};
	fuzz_write("ca.crt", "not a certificate\n", 18);
	fuzz_write("token", "t0ken\n", 6);
	if (kube_config_from_yaml(&c, (const char *)d, n, fuzz_dir(), NULL, &e) == 0)
		kube_config_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kube_status st;

	if (size < 2)
		return 0;
	switch (data[0] % 4) {
	case 0:
		kube_status_decode(&st, 300 + data[1], (const char *)data + 2, size - 2);
		kube_status_clear(&st);
		break;
	case 1: watch_stream(data + 2, size - 2, 1 + data[1]); break;
	case 2: kubeconfig(data + 2, size - 2); break;
	default: list_answer(data + 2, size - 2, 1 + data[1]);
	}
	return 0;
}
