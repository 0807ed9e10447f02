#include "node/node.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "applets.h"
#include "base/log.h"
#include "cluster/events.h"
#include "connflags.h"
#include "grpc/server.h"
#include "httpserve.h"
#include "node/csinode.h"
#include "node/dhchap_rotate.h"
#include "node/grpc_service.h"
#include "node/metrics.h"
#include "node/publish.h"
#include "node/service.h"
#include "nvme/initiator.h"
#include "rules/keys.h"
#include "serve.h"
#include "store/store.h"
#include "storeflags.h"

#define NODE_SHUTDOWN_WAIT_MS 5000 /* deploy.md §1.3: NOT_SERVING, wait 5 s, stop */

/* TESTING ONLY: --host-root; empty (the default) keeps node_new's production paths.  paths holds
 * five PATH_MAX buffers; the connect line goes to <host-root>/dev/nvme-fabrics, never to the
 * machine's.  0, or -1 with the message printed. */
static int host_root_paths(const char *host_root, struct node_config *cfg, char paths[5][PATH_MAX])
{
	static const char *const sub[5] = {"etc/nvme", "sys", "dev", "proc", "dev/nvme-fabrics"};
	static struct nvme_kernel_ops fake_fabrics;
	if (!*host_root)
		return 0;
	for (int i = 0; i < 5; i++)
		if (snprintf(paths[i], PATH_MAX, "%s/%s", host_root, sub[i]) >= PATH_MAX) {
			fprintf(stderr, "pillar-csi node: --host-root: path too long\n");
			return -1;
		}
	cfg->etc_nvme_dir = paths[0];
	cfg->sysfs_root = paths[1];
	cfg->dev_root = paths[2];
	cfg->proc_root = paths[3];
	fake_fabrics = nvme_kernel_ops_sys;
	fake_fabrics.ctx = paths[4];
	cfg->nvme_ops = &fake_fabrics;
	log_warn("using a fake host tree (testing only)", "hostRoot", host_root);
	return 0;
}

/* Serves the Identity and Node services on endpoint until a signal, then shuts down
 * (deploy.md §1.3).  0, or 1 with the message printed. */
static int node_serve(struct node *n, struct grpc_server_opts go, const char *endpoint,
                      const char *node_id, const char *state_dir, const char *metrics_addr)
{
	struct grpc_service ids = {0}, nodes = {0};
	struct grpc_server *srv = NULL;
	struct httpserve *metrics = NULL;
	struct err e = {0};
	const char *addrs[] = {endpoint, NULL};
	role_metrics_gate(metrics_addr);
	node_metrics_register(n);
	if (role_metrics_start(metrics_addr, &metrics, &e) < 0) {
		fprintf(stderr, "pillar-csi node: --metrics-bind-address: %s\n", e.msg);
		metrics_unregister_collector(node_metrics_collect, n);
		return 1;
	}
	go.listen = addrs;
	node_grpc_identity_service(n, &ids);
	node_grpc_node_service(n, &nodes);
	if (grpc_server_new(&srv, &go, &e) < 0 || grpc_server_add_service(srv, &ids, &e) < 0 ||
	    grpc_server_add_service(srv, &nodes, &e) < 0 || grpc_server_start(srv, &e) < 0) {
		fprintf(stderr, "pillar-csi node: %s\n", e.msg);
		grpc_server_free(srv);
		httpserve_stop(metrics);
		metrics_unregister_collector(node_metrics_collect, n);
		return 1;
	}
	log_info("node plugin serving", "endpoint", endpoint, "node", node_id, "stateDir",
	         state_dir, "metrics", metrics_addr);
	serve_wait_signal();
	serve_exit_on_second_signal();
	grpc_server_set_serving(srv, "", false);
	grpc_server_set_serving(srv, "csi.v1.Node", false);
	serve_sleep_or_signal(NODE_SHUTDOWN_WAIT_MS);
	grpc_server_shutdown(srv, 5000);
	grpc_server_free(srv);
	httpserve_stop(metrics);
	metrics_unregister_collector(node_metrics_collect, n);
	return 0;
}

/* Where the host identity goes: the CSINode through the API in a cluster, else the embedded
 * store's CSINode object. */
struct objects {
	store *st;
	struct kube_events *rec;
	struct node_csinode *cn;
};

static void objects_close(struct objects *ob)
{
	node_csinode_free(ob->cn); /* stops its thread before the recorder and the store go */
	kube_events_free(ob->rec);
	store_close(ob->st);
}

/* Opens the store (--store, or the API in a cluster: standalone.md) and sets cfg's publish
 * hook.  0, or a negative errno with the message in e. */
static int objects_open(struct objects *ob, const char *url, const struct store_open_opts *so,
                        const char *node_id, struct node_config *cfg, struct err *e)
{
	struct kube_client *kc;
	int r;

	if (!url && !getenv("KUBERNETES_SERVICE_HOST"))
		return 0;
	if ((r = store_open(url, false, so, &ob->st, e)) < 0)
		return r;
	if (!(kc = store_kube_client(ob->st))) {
		cfg->publish_identity = node_publish_identity_store;
		cfg->publish_ctx = ob->st;
		cfg->report_lost = node_report_lost_store;
		cfg->report_ctx = ob->st;
		return 0;
	}
	struct kube_events_opts eo = {.component = "pillar-csi-node", .host = node_id};
	if ((r = kube_events_new(&ob->rec, kc, &eo, e)) < 0)
		return r;
	struct node_csinode_opts co = {.kc = kc, .st = ob->st, .rec = ob->rec};
	if ((r = node_csinode_new(&ob->cn, &co, e)) < 0)
		return r;
	cfg->publish_identity = node_csinode_publish;
	cfg->publish_ctx = ob->cn;
	cfg->report_lost = node_csinode_report_lost;
	cfg->report_ctx = ob->cn;
	return 0;
}

/* With --dhchap and a store: the thread that publishes, confirms and rotates the keys
 * (node/dhchap_rotate.h), or NULL. */
static struct node_dhchap_loop *dhchap_loop(struct node *n, bool on, struct objects *ob,
                                            struct node_dhchap_hooks *hooks, int64_t rotate_ms)
{
	struct node_dhchap_loop *l = NULL;
	struct err e = {0};
	if (on && !ob->st)
		log_warn("--dhchap without a store (--store, or the API in a cluster): keys are "
		         "neither published nor rotated");
	if (!on || !ob->st)
		return NULL;
	node_dhchap_store_hooks(hooks, ob->st);
	if (node_dhchap_loop_start(&l, n, hooks, (uint64_t)(rotate_ms / 1000), 0, &e) < 0)
		log_error("DH-HMAC-CHAP keys are not published or rotated", "error", e.msg);
	return l;
}

/* The node id (default: $NODE_NAME) and the store and connection flags; -1 to go on, or the
 * exit status with the message printed. */
static int flags_check(const char **node_id, const struct store_flags *sf,
                       struct store_open_opts *so, const struct conn_flags *cf,
                       struct grpc_server_opts *go)
{
	struct err e = {0};
	if (!*node_id || !**node_id)
		*node_id = getenv("NODE_NAME");
	if (!*node_id || !**node_id) {
		fprintf(stderr, "pillar-csi node: no node id: set --node-id or NODE_NAME\n");
		return 1;
	}
	if (store_flags_opts(sf, "pillar-csi-node", so, &e) < 0 ||
	    conn_flags_opts(cf, go, &e) < 0) {
		fprintf(stderr, "pillar-csi node: %s\n", e.msg);
		return 2;
	}
	return -1;
}

int node_main(int argc, char **argv)
{
	const char *endpoint = "unix:///var/lib/kubelet/plugins/" RULES_DRIVER_NAME "/csi.sock";
	const char *node_id = NULL, *state_dir = "/var/lib/pillar-csi/node", *store_url = NULL;
	const char *host_root = ""; /* testing only: "" = the real /etc/nvme, /sys, /dev, /proc */
	const char *kubelet_dir = "/var/lib/kubelet";
	const char *metrics_addr = "0";
	int64_t rotate_ms = 720LL * 3600 * 1000;
	struct node_config cfg = {0};
	struct store_flags sf = STORE_FLAGS_INIT;
	struct store_open_opts so;
	struct conn_flags cf = CONN_FLAGS_INIT;
	struct grpc_server_opts go;
	const struct flag_def defs[] = {
	    {"csi-endpoint", FLAG_STRING, &endpoint, "CSI socket (unix:///path)", false},
	    {"node-id", FLAG_STRING, &node_id,
	     "Kubernetes node name (default: the NODE_NAME environment variable)", false},
	    {"state-dir", FLAG_STRING, &state_dir, "stage records of staged volumes", false},
	    {"kubelet-dir", FLAG_STRING, &kubelet_dir,
	     "kubelet's root directory: staging and target paths must be kubelet's own paths "
	     "below it",
	     false},
	    {"store", FLAG_STRING, &store_url,
	     "object store: kube, or dir:PATH for the embedded store", false},
	    STORE_FLAG_DEFS(&sf),
	    {"metrics-bind-address", FLAG_STRING, &metrics_addr,
	     "/metrics in Prometheus text format ([host]:port); 0 disables", false},
	    CONN_FLAG_DEFS(&cf),
	    {"dhchap", FLAG_BOOL, &cfg.dhchap,
	     "make, publish and use DH-HMAC-CHAP keys (docs/authentication.md)", false},
	    {"dhchap-rotate-interval", FLAG_DURATION, &rotate_ms,
	     "with --dhchap: new keys when the current ones are this old (0: never)", false},
	    /* TESTING ONLY (test/interop/node): a fake host tree instead of the machine's. */
	    {"host-root", FLAG_STRING, &host_root,
	     "(testing) read etc/nvme, sys, dev and proc and write dev/nvme-fabrics under this "
	     "directory instead of /",
	     false},
	};
	char paths[5][PATH_MAX];
	struct node *n = NULL;
	struct objects ob = {0};
	struct err e = {0};
	int r;

	serve_block_signals();
	r = role_parse_flags(
	    "pillar-csi node",
	    "CSI node service: connects to NVMe-oF/TCP targets with the kernel "
	    "initiator, formats blank devices,\nmounts and expands volumes, and keeps "
	    "a durable record of every staged volume.",
	    defs, sizeof(defs) / sizeof(defs[0]), argc, argv);
	if (r >= 0)
		return r;
	if ((r = flags_check(&node_id, &sf, &so, &cf, &go)) >= 0)
		return r;
	cfg.node_id = node_id;
	cfg.state_dir = state_dir;
	cfg.kubelet_dir = kubelet_dir;
	if (objects_open(&ob, store_url, &so, node_id, &cfg, &e) < 0) {
		fprintf(stderr, "pillar-csi node: %s\n", e.msg);
		objects_close(&ob);
		return 1;
	}
	if (host_root_paths(host_root, &cfg, paths) < 0 || node_new(&cfg, &n, &e) < 0) {
		if (!n && e.msg[0])
			fprintf(stderr, "pillar-csi node: %s\n", e.msg);
		objects_close(&ob);
		return 1;
	}
	if (node_publish_identity(n, &e) < 0)
		log_error("host identity not published", "node", node_id, "error", e.msg);
	struct node_dhchap_hooks hooks;
	struct node_dhchap_loop *keys = dhchap_loop(n, cfg.dhchap, &ob, &hooks, rotate_ms);
	r = node_serve(n, go, endpoint, node_id, state_dir, metrics_addr);
	node_dhchap_loop_stop(keys);
	objects_close(&ob);
	node_free(n);
	if (r == 0)
		log_info("node plugin stopped");
	return r;
}
