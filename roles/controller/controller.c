#include "controller/controller.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "applets.h"
#include "base/log.h"
#include "base/mem.h"
#include "connflags.h"
#include "controller/agentclient_grpc.h"
#include "controller/csi.h"
#include "controller/ctl.h"
#include "controller/grpc_service.h"
#include "controller/leader.h"
#include "controller/loop.h"
#include "controller/probes.h"
#include "controller/readiness.h"
#include "grpc/server.h"
#include "httpserve.h"
#include "kube/client.h"
#include "kube/config.h"
#include "serve.h"
#include "store/store.h"
#include "storeflags.h"

/* The flags of the controller role. */
struct opts {
	const char *endpoint, *probe, *metrics, *cert, *key, *ca, *server_name, *store_url;
	const char *dhchap_ns;
	bool dhchap, dhchap_plaintext;
	const char *lease_d, *renew_d, *retry_d; /* --leader-elect-* durations */
	int lease_ms, renew_ms, retry_ms;
	bool leader_elect, tls;
	int64_t agent_port;
	struct store_flags sf;
	struct store_open_opts so;
	struct conn_flags cf;
	struct grpc_server_opts go; /* the CSI server's, from cf */
};

/* Parses and checks the flags; -1 to go on, else the exit status. */
static int parse_opts(struct opts *o, int argc, char **argv)
{
	const struct flag_def defs[] = {
	    {"csi-endpoint", FLAG_STRING, &o->endpoint, "CSI socket for the sidecars", false},
	    {"leader-elect", FLAG_BOOL, &o->leader_elect,
	     "run reconcilers only on the Lease holder", false},
	    {"leader-elect-lease-duration", FLAG_STRING, &o->lease_d,
	     "how long other replicas wait before taking a Lease that is not renewed (15s)", false},
	    {"leader-elect-renew-deadline", FLAG_STRING, &o->renew_d,
	     "how long the leader tries to renew before it stops reconciling (10s)", false},
	    {"leader-elect-retry-period", FLAG_STRING, &o->retry_d,
	     "interval between attempts to acquire or renew the Lease (2s)", false},
	    {"health-probe-bind-address", FLAG_STRING, &o->probe, "/healthz and /readyz", false},
	    {"metrics-bind-address", FLAG_STRING, &o->metrics,
	     "/metrics in Prometheus text format; 0 disables", false},
	    {"agent-default-port", FLAG_INT, &o->agent_port,
	     "agent port when PillarAgent.spec.nodeRef.port is unset", false},
	    {"agent-tls-cert", FLAG_STRING, &o->cert, "client certificate (PEM) for agent mTLS",
	     false},
	    {"agent-tls-key", FLAG_STRING, &o->key, "client private key (PEM) for agent mTLS",
	     false},
	    {"agent-tls-ca", FLAG_STRING, &o->ca, "CA (PEM) that agent certificates chain to",
	     false},
	    {"agent-tls-server-name", FLAG_STRING, &o->server_name,
	     "name expected in the agent certificate", false},
	    {"dhchap", FLAG_BOOL, &o->dhchap,
	     "read the workers' DH-HMAC-CHAP key Secrets and send the keys to the agents", false},
	    {"dhchap-allow-plaintext", FLAG_BOOL, &o->dhchap_plaintext,
	     "send DH-HMAC-CHAP keys to agents reached without mTLS (trusted networks only)",
	     false},
	    {"dhchap-namespace", FLAG_STRING, &o->dhchap_ns,
	     "namespace of the workers' DH-HMAC-CHAP key Secrets (default: the controller's)",
	     false},
	    {"store", FLAG_STRING, &o->store_url,
	     "object store: kube (in a cluster), or dir:PATH for the embedded store", false},
	    STORE_FLAG_DEFS(&o->sf),
	    CONN_FLAG_DEFS(&o->cf),
	};
	int r = role_parse_flags("pillar-csi controller",
	                         "CSI controller service and reconcilers: records every volume, "
	                         "publication and fencing generation\nand drives the storage "
	                         "agents.",
	                         defs, sizeof(defs) / sizeof(defs[0]), argc, argv);
	if (r >= 0)
		return r;
	bool any = *o->cert || *o->key || *o->ca;
	o->tls = *o->cert && *o->key && *o->ca;
	if (any && !o->tls) {
		fprintf(
		    stderr,
		    "--agent-tls-cert, --agent-tls-key and --agent-tls-ca must be set together\n");
		return 1;
	}
	if (o->agent_port < 1 || o->agent_port > 65535) {
		fprintf(stderr, "pillar-csi controller: --agent-default-port must be 1-65535\n");
		return 2;
	}
	if (controller_duration_parse(o->lease_d, &o->lease_ms) < 0 ||
	    controller_duration_parse(o->renew_d, &o->renew_ms) < 0 ||
	    controller_duration_parse(o->retry_d, &o->retry_ms) < 0) {
		fprintf(stderr,
		        "pillar-csi controller: --leader-elect-lease-duration, "
		        "--leader-elect-renew-deadline and --leader-elect-retry-period take "
		        "durations such as 15s or 500ms\n");
		return 2;
	}
	struct err e = {0};
	if (store_flags_opts(&o->sf, "pillar-csi-controller", &o->so, &e) < 0 ||
	    conn_flags_opts(&o->cf, &o->go, &e) < 0) {
		fprintf(stderr, "pillar-csi controller: %s\n", e.msg);
		return 2;
	}
	if (!o->store_url)
		o->store_url = getenv("KUBERNETES_SERVICE_HOST") ? "kube" : NULL;
	if (!o->store_url) {
		fprintf(stderr, "pillar-csi controller: no object store: outside a cluster pass "
		                "--store=dir:PATH (the embedded store)\n");
		return 1;
	}
	return -1;
}

/* What a running controller holds. */
struct running {
	store *st;
	agentclient *ac;
	struct ctl c;
	bool ctl_ok;
	struct grpc_server *srv;
	struct ctl_leader *leader;
	struct kube_client *lease_kc;
	struct probes *probes;
	struct ctl_readiness ready;
};

/* Stops and frees everything started, in reverse order (CSI stops before the loop: it clears
 * restore_kick); drain: a graceful shutdown of the serving CSI server first. */
static void stop(struct running *x, bool drain)
{
	probes_stop(x->probes);
	if (drain)
		grpc_server_shutdown(x->srv, 5000);
	grpc_server_free(x->srv);
	ctl_leader_stop(x->leader);
	ctl_readiness_stop(&x->ready);
	kube_client_free(x->lease_kc);
	if (x->ctl_ok)
		ctl_fini(&x->c);
	agentclient_close(x->ac);
	store_close(x->st);
}

/* The Lease's own API client (leader.h): the store's configuration, its own rate limit. */
static int lease_client(const struct opts *o, struct kube_client **out, struct err *e)
{
	struct kube_config *cfg = NULL;
	struct kube_client_opts ko;
	int rc = kube_config_load(&cfg, o->so.kubeconfig, e);

	kube_client_opts_init(&ko);
	ko.component = "pillar-csi-controller";
	if (rc == 0)
		rc = kube_client_new(out, cfg, &ko, e);
	kube_config_free(cfg);
	if (rc < 0)
		err_prefix(e, "leader election");
	return rc;
}

/* The kinds the reconcilers read: each is listed once and then watched (store.h caches). */
static const struct store_kind *const *cached_kinds(void)
{
	static const char *const names[] = {
	    "PillarAgent",       "PillarStore",  "PillarProtocol", "PillarStorageClass",
	    "PillarVolumeState", "StorageClass", "Node",           "PersistentVolumeClaim",
	    "PersistentVolume",  "CSINode"};
	static const struct store_kind *kinds[sizeof(names) / sizeof(names[0]) + 1];
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		kinds[i] = store_kind_lookup(names[i]);
	return kinds;
}

/* Store, agent client, CSI server, reconcile loop and probes; 0 or -1 with the message in e. */
static int start(const struct opts *o, struct running *x, struct err *e)
{
	struct agentclient_grpc_opts ao = {
	    .tls_cert = o->cert, .tls_key = o->key, .tls_ca = o->ca, .server_name = o->server_name};
	struct grpc_server_opts go;
	struct grpc_service ids = {0}, ctrl = {0};
	const char *addrs[] = {o->endpoint, NULL};
	store *raw = NULL;
	role_metrics_gate(o->metrics); /* before anything that records */
	if (store_open(o->store_url, true, &o->so, &raw, e) < 0)
		return -1;
	/* reconcilers read from watch-fed caches; CSI handlers read through (store.h).  The
	 * embedded store needs none: it answers get, list and watch from its own index in memory,
	 * which every write updates before it returns (a cache over it would be a second copy of
	 * every object, a thread per kind, and a parse of every event twice) */
	if (!store_kube_client(raw))
		x->st = raw;
	else if (store_cache_open(raw, cached_kinds(), &x->st, e) < 0) {
		store_close(raw);
		return -1;
	}
	struct ctl_leader_opts lo = {.kc = store_kube_client(raw),
	                             .elect = o->leader_elect,
	                             .ns = getenv("POD_NAMESPACE"),
	                             .lease_ms = o->lease_ms,
	                             .renew_deadline_ms = o->renew_ms,
	                             .retry_ms = o->retry_ms};
	if (!lo.kc && o->leader_elect)
		log_info("leader election is not used with the embedded store; its lock plays that "
		         "role");
	if ((!lo.ns || !*lo.ns) && lo.kc)
		lo.ns = kube_client_namespace(lo.kc); /* the service account's namespace */
	if (lo.kc && o->leader_elect && lease_client(o, &x->lease_kc, e) < 0)
		return -1;
	lo.lease_kc = x->lease_kc;
	if (agentclient_grpc_new(&ao, &x->ac, e) < 0)
		return -1;
	ctl_init(&x->c, x->st, x->ac);
	x->ctl_ok = true;
	x->c.kc = lo.kc;
	x->c.agent_default_port = (int)o->agent_port;
	x->c.dhchap_enabled = o->dhchap;
	x->c.dhchap_plaintext = o->dhchap_plaintext;
	x->c.dhchap_ns = *o->dhchap_ns ? o->dhchap_ns : lo.ns && *lo.ns ? lo.ns : "default";
	x->ready.st = x->st;
	x->ready.kc = store_kube_client(raw);
	if (ctl_readiness_start(&x->ready, e) < 0)
		return -1;
	x->c.readiness = &x->ready;
	go = o->go;
	go.listen = addrs;
	controller_grpc_identity_service(&x->c, &ids);
	controller_grpc_controller_service(&x->c, &ctrl);
	if (grpc_server_new(&x->srv, &go, e) < 0 || grpc_server_add_service(x->srv, &ids, e) < 0 ||
	    grpc_server_add_service(x->srv, &ctrl, e) < 0 || grpc_server_start(x->srv, e) < 0)
		return -1;
	if (ctl_leader_start(&x->c, &lo, &x->leader, e) < 0 ||
	    probes_start(&x->c, o->probe, o->metrics, &x->probes, e) < 0)
		return -1;
	return 0;
}

int controller_main(int argc, char **argv)
{
	struct opts o = {.endpoint = "unix:///csi/csi.sock",
	                 .probe = ":8081",
	                 .metrics = ":8080",
	                 .cert = "",
	                 .key = "",
	                 .ca = "",
	                 .server_name = "",
	                 .dhchap_ns = "",
	                 .lease_d = "15s",
	                 .renew_d = "10s",
	                 .retry_d = "2s",
	                 .agent_port = 9500,
	                 .sf = STORE_FLAGS_INIT,
	                 .cf = CONN_FLAGS_INIT};
	struct running x = {0};
	struct err e = {0};

	serve_block_signals();
	(void)mem_tune(); /* before any thread: few malloc arenas (base/mem.h) */
	int r = parse_opts(&o, argc, argv);
	if (r >= 0)
		return r;
	if (start(&o, &x, &e) < 0) {
		fprintf(stderr, "pillar-csi controller: %s\n", e.msg);
		stop(&x, false);
		return 1;
	}
	log_info("controller serving", "endpoint", o.endpoint, "store", o.store_url, "agentTLS",
	         o.tls ? "mutual" : "off");
	serve_wait_signal();
	serve_exit_on_second_signal();
	grpc_server_set_serving(x.srv, "", false);
	stop(&x, true);
	log_info("controller stopped");
	return 0;
}
