/* libFuzzer target for src/kube's parsers of what an API server sends: the first byte chooses
 * the parser and the split.  Status decoding (kube_status_decode) takes the rest as an error
 * body with an HTTP status from the second byte; the watch-stream parser
 * (kube_watch_parser_push/next) takes it as stream bytes cut into chunks of a size from the
 * second byte, as HTTP/2 DATA frames cut a watch stream anywhere. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kube/codec.h"
#include "kube/status.h"
#include "kube/watch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
			if (t == KUBE_ERROR)
				kube_status_from_json(&st, 0, obj);
			cJSON_Delete(obj);
		}
	}
	kube_watch_parser_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kube_status st;

	if (size < 2)
		return 0;
	if (data[0] & 1)
		kube_status_decode(&st, 300 + data[1], (const char *)data + 2, size - 2);
	else
		watch_stream(data + 2, size - 2, 1 + data[1]);
	return 0;
}
