/* libFuzzer target: the Kubernetes client's response path (src/kube/client.c, watch.c over
 * src/h2/client.c and TLS).  data[0] picks the call — 0 kube_get, 1 kube_list, 2 kube_watch_open
 * and kube_watch_next — data[1] is unused, the rest is what a TLS socket peer (harness.h:
 * fuzz_peer_*) sends after its SETTINGS frame: HEADERS, DATA, RST_STREAM, GOAWAY as an API
 * server would, or not.  Every call must end with an answer or a Status, never crash, hang or
 * leak.  (Each input costs a TLS handshake: this target runs slower than the parsers'.) */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kube/client.h"
#include "kube/watch.h"

static const struct kube_resource pa = {"pillar-csi.bhyoo.com", "v1alpha1", "pillaragents", false};

static uint64_t now_us(void *arg)
{
	static uint64_t t;
	(void)arg;
	return t += 1000;
}

static void sleep_us(void *arg, uint64_t us)
{
	(void)arg, (void)us;
}

static void client(int op, const uint8_t *d, size_t n)
{
	struct kube_config cfg = {0};
	char ca[4096];
	struct kube_client_opts o;
	struct kube_client *kc;
	struct kube_status st = {0};
	struct kube_list_opts lo = {0};
	cJSON *out = NULL;
	int port;

	fuzz_peer_start(&port);
	snprintf(ca, sizeof(ca), "%s", fuzz_peer_tls()); /* the client takes https only */
	cfg.ca_pem = ca;
	snprintf(cfg.target, sizeof(cfg.target), "127.0.0.1:%d", port);
	snprintf(cfg.server, sizeof(cfg.server), "https://127.0.0.1:%d", port);
	kube_client_opts_init(&o);
	o.component = "pillar-csi-fuzz";
	o.timeout_ms = 2000;
	o.now_us = now_us;
	o.sleep_us = sleep_us;
	if (kube_client_new(&kc, &cfg, &o, NULL) < 0)
		abort();
	fuzz_peer_answer(d, n);
	if (op == 0) {
		kube_get(kc, &pa, NULL, "storage-1", &out, &st);
	} else if (op == 1) {
		kube_list(kc, &pa, NULL, &lo, &out, &st);
	} else {
		struct kube_watch *w = NULL;
		if (kube_watch_open(kc, &pa, NULL, &lo, 0, &w, &st) == 0) {
			enum kube_event_type t;
			for (int i = 0; i < 64 && kube_watch_next(w, &t, &out, 2000, &st) == 1;
			     i++) {
				cJSON_Delete(out);
				out = NULL;
			}
			kube_watch_free(w);
		}
	}
	cJSON_Delete(out);
	kube_status_clear(&st);
	kube_client_free(kc);
	fuzz_peer_wait();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	client(data[0] % 3, data + 2, size - 2);
	return 0;
}
