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

int controller_main(int argc, char **argv)
{
	const char *endpoint = "unix:///csi/csi.sock", *probe = ":8081", *metrics = ":8080";
	const char *cert = "", *key = "", *ca = "", *server_name = "", *store_url = NULL;
	bool leader_elect = false;
	int64_t agent_port = 9500;
	const struct flag_def defs[] = {
	    {"csi-endpoint", FLAG_STRING, &endpoint, "CSI socket for the sidecars", false},
	    {"leader-elect", FLAG_BOOL, &leader_elect, "run reconcilers only on the Lease holder",
	     false},
	    {"health-probe-bind-address", FLAG_STRING, &probe, "/healthz and /readyz", false},
	    {"metrics-bind-address", FLAG_STRING, &metrics,
	     "/metrics in Prometheus text format; 0 disables", false},
	    {"agent-default-port", FLAG_INT, &agent_port,
	     "agent port when PillarAgent.spec.nodeRef.port is unset", false},
	    {"agent-tls-cert", FLAG_STRING, &cert, "client certificate (PEM) for agent mTLS",
	     false},
	    {"agent-tls-key", FLAG_STRING, &key, "client private key (PEM) for agent mTLS", false},
	    {"agent-tls-ca", FLAG_STRING, &ca, "CA (PEM) that agent certificates chain to", false},
	    {"agent-tls-server-name", FLAG_STRING, &server_name,
	     "name expected in the agent certificate", false},
	    {"store", FLAG_STRING, &store_url,
	     "object store: kube (in a cluster), or dir:PATH for the embedded store", false},
	};
	struct agentclient_grpc_opts ao = {0};
	struct grpc_server_opts go;
	struct grpc_service ids, ctrl;
	struct grpc_server *srv = NULL;
	agentclient *ac = NULL;
	store *st = NULL;
	struct controller_loop *loop = NULL;
	struct probes *probes = NULL;
	struct ctl c;
	struct err e = {0};
	int r;

	serve_block_signals();
	r = role_parse_flags("pillar-csi controller",
	                     "CSI controller service and reconcilers: records every volume, "
	                     "publication and fencing generation\nand drives the storage agents.",
	                     defs, sizeof(defs) / sizeof(defs[0]), argc, argv);
	if (r >= 0)
		return r;
	bool any = *cert || *key || *ca, all = *cert && *key && *ca;
	if (any && !all) {
		fprintf(
		    stderr,
		    "--agent-tls-cert, --agent-tls-key and --agent-tls-ca must be set together\n");
		return 1;
	}
	if (agent_port < 1 || agent_port > 65535) {
		fprintf(stderr, "pillar-csi controller: --agent-default-port must be 1-65535\n");
		return 2;
	}
	if (!store_url)
		store_url = getenv("KUBERNETES_SERVICE_HOST") ? "kube" : NULL;
	if (!store_url) {
		fprintf(stderr, "pillar-csi controller: no object store: outside a cluster pass "
		                "--store=dir:PATH (the embedded store)\n");
		return 1;
	}
	if (store_open_url(store_url, true, &st, &e) < 0) {
		fprintf(stderr, "pillar-csi controller: %s\n", e.msg);
		return 1;
	}
	if (leader_elect)
		log_info("leader election is not used with the embedded store; its lock plays that "
		         "role");
	ao.tls_cert = cert;
	ao.tls_key = key;
	ao.tls_ca = ca;
	ao.server_name = server_name;
	if (agentclient_grpc_new(&ao, &ac, &e) < 0) {
		fprintf(stderr, "pillar-csi controller: %s\n", e.msg);
		store_close(st);
		return 1;
	}
	ctl_init(&c, st, ac);
	c.agent_default_port = (int)agent_port;

	const char *addrs[] = {endpoint, NULL};
	grpc_server_opts_init(&go);
	go.listen = addrs;
	controller_grpc_identity_service(&c, &ids);
	controller_grpc_controller_service(&c, &ctrl);
	if (grpc_server_new(&srv, &go, &e) < 0 || grpc_server_add_service(srv, &ids, &e) < 0 ||
	    grpc_server_add_service(srv, &ctrl, &e) < 0 || grpc_server_start(srv, &e) < 0) {
		fprintf(stderr, "pillar-csi controller: %s\n", e.msg);
		grpc_server_free(srv);
		ctl_fini(&c);
		agentclient_close(ac);
		store_close(st);
		return 1;
	}
	if (controller_loop_start(&c, NULL, &loop, &e) < 0) {
		fprintf(stderr, "pillar-csi controller: %s\n", e.msg);
		grpc_server_free(srv);
		ctl_fini(&c);
		agentclient_close(ac);
		store_close(st);
		return 1;
	}
	if (probes_start(&c, probe, metrics, &probes, &e) < 0) {
		fprintf(stderr, "pillar-csi controller: %s\n", e.msg);
		controller_loop_stop(loop);
		grpc_server_free(srv);
		ctl_fini(&c);
		agentclient_close(ac);
		store_close(st);
		return 1;
	}
	log_info("controller serving", "endpoint", endpoint, "store", store_url, "agentTLS",
	         all ? "mutual" : "off");

	serve_wait_signal();
	serve_exit_on_second_signal();
	grpc_server_set_serving(srv, "", false);
	probes_stop(probes);
	grpc_server_shutdown(srv, 5000); /* CSI stops before the loop: it clears restore_kick */
	grpc_server_free(srv);
	controller_loop_stop(loop);
	ctl_fini(&c);
	agentclient_close(ac);
	store_close(st);
	log_info("controller stopped");
	return 0;
}
