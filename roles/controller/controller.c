#include "controller/controller.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "applets.h"
#include "base/log.h"
#include "controller/agentclient_grpc.h"
#include "controller/csi.h"
#include "controller/ctl.h"
#include "controller/grpc_service.h"
#include "controller/loop.h"
#include "controller/probes.h"
#include "grpc/server.h"
#include "serve.h"
#include "store/store.h"
#include "storeflags.h"

/* The flags of the controller role. */
struct opts {
	const char *endpoint, *probe, *metrics, *cert, *key, *ca, *server_name, *store_url;
	bool leader_elect, tls;
	int64_t agent_port;
	struct store_flags sf;
	struct store_open_opts so;
};

/* Parses and checks the flags; -1 to go on, else the exit status. */
static int parse_opts(struct opts *o, int argc, char **argv)
{
	const struct flag_def defs[] = {
	    {"csi-endpoint", FLAG_STRING, &o->endpoint, "CSI socket for the sidecars", false},
	    {"leader-elect", FLAG_BOOL, &o->leader_elect,
	     "run reconcilers only on the Lease holder", false},
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
	    {"store", FLAG_STRING, &o->store_url,
	     "object store: kube (in a cluster), or dir:PATH for the embedded store", false},
	    STORE_FLAG_DEFS(&o->sf),
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
	struct err e = {0};
	if (store_flags_opts(&o->sf, "pillar-csi-controller", &o->so, &e) < 0) {
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
	struct controller_loop *loop;
	struct probes *probes;
};

/* Stops and frees everything started, in reverse order (CSI stops before the loop: it clears
 * restore_kick); drain: a graceful shutdown of the serving CSI server first. */
static void stop(struct running *x, bool drain)
{
	probes_stop(x->probes);
	if (drain)
		grpc_server_shutdown(x->srv, 5000);
	grpc_server_free(x->srv);
	controller_loop_stop(x->loop);
	if (x->ctl_ok)
		ctl_fini(&x->c);
	agentclient_close(x->ac);
	store_close(x->st);
}

/* Store, agent client, CSI server, reconcile loop and probes; 0 or -1 with the message in e. */
static int start(const struct opts *o, struct running *x, struct err *e)
{
	struct agentclient_grpc_opts ao = {
	    .tls_cert = o->cert, .tls_key = o->key, .tls_ca = o->ca, .server_name = o->server_name};
	struct grpc_server_opts go;
	struct grpc_service ids, ctrl;
	const char *addrs[] = {o->endpoint, NULL};
	if (store_open(o->store_url, true, &o->so, &x->st, e) < 0)
		return -1;
	if (o->leader_elect)
		log_info("leader election is not used with the embedded store; its lock plays that "
		         "role");
	if (agentclient_grpc_new(&ao, &x->ac, e) < 0)
		return -1;
	ctl_init(&x->c, x->st, x->ac);
	x->ctl_ok = true;
	x->c.agent_default_port = (int)o->agent_port;
	grpc_server_opts_init(&go);
	go.listen = addrs;
	controller_grpc_identity_service(&x->c, &ids);
	controller_grpc_controller_service(&x->c, &ctrl);
	if (grpc_server_new(&x->srv, &go, e) < 0 || grpc_server_add_service(x->srv, &ids, e) < 0 ||
	    grpc_server_add_service(x->srv, &ctrl, e) < 0 || grpc_server_start(x->srv, e) < 0)
		return -1;
	if (controller_loop_start(&x->c, NULL, &x->loop, e) < 0 ||
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
	                 .agent_port = 9500,
	                 .sf = STORE_FLAGS_INIT};
	struct running x = {0};
	struct err e = {0};

	serve_block_signals();
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
