#include "agent/agent.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/config.h"
#include "agent/grpc_service.h"
#include "agent/metrics.h"
#include "agent/service.h"
#include "applets.h"
#include "base/file.h"
#include "base/json.h"
#include "base/log.h"
#include "connflags.h"
#include "grpc/server.h"
#include "httpserve.h"
#include "serve.h"
#include "version/version.h"

#define AGENT_MAX_MSG (16u << 20) /* a complete ReconcileState carries every volume */

/* agent-api.md §10 step 4: the marker records a clean shutdown; it never keeps us drained. */
static void consume_drained_marker(const char *state_dir)
{
	char path[PATH_MAX];
	char at[64], msg[128];
	snprintf(path, sizeof(path), "%s/.drained", state_dir);
	if (json_file_get_str(path, "drainedAt", at, sizeof(at), NULL) == -ENOENT) {
		log_info("previous agent process did not drain");
		return;
	}
	snprintf(msg, sizeof(msg), "previous agent process drained cleanly at %s",
	         at[0] ? at : "?");
	log_info(msg);
	file_remove_durable(path, NULL);
}

/* The agent's TLS flags: all three or none. */
struct agent_tls {
	const char *cert, *key, *ca;
	bool on;
};

/* Sets tls->on; -1 (with the message printed) when only some of the three are set. */
static int agent_tls_check(struct agent_tls *tls)
{
	tls->on = *tls->cert && *tls->key && *tls->ca;
	if ((*tls->cert || *tls->key || *tls->ca) && !tls->on) {
		fprintf(stderr, "--tls-cert, --tls-key and --tls-ca must be set together\n");
		return -1;
	}
	return 0;
}

/* Serves the agent API on listen until a signal, drains, waits grace_ms and stops
 * (agent-api.md §10).  0, or 1 with the message printed. */
static int agent_serve(agent_service *a, struct grpc_server_opts go, const char *listen,
                       const struct agent_tls *tls, int64_t grace_ms, const char *metrics_addr)
{
	struct grpc_service svc = {0};
	struct grpc_server *srv = NULL;
	struct httpserve *metrics = NULL;
	struct err e = {0};
	const char *addrs[] = {listen, NULL};
	role_metrics_gate(metrics_addr);
	agent_metrics_register(a);
	if (role_metrics_start(metrics_addr, &metrics, &e) < 0) {
		fprintf(stderr, "pillar-csi agent: --metrics-bind-address: %s\n", e.msg);
		metrics_unregister_collector(agent_metrics_collect, a);
		return 1;
	}
	if (!tls->on)
		log_warn(
		    "agent gRPC is serving without TLS; set --tls-cert, --tls-key and --tls-ca to "
		    "require mutual TLS");
	go.listen = addrs;
	go.max_msg = AGENT_MAX_MSG;
	go.max_streams = 100;
	if (tls->on) {
		go.tls_cert = tls->cert;
		go.tls_key = tls->key;
		go.tls_ca = tls->ca;
	}
	agent_grpc_service(a, &svc);
	if (grpc_server_new(&srv, &go, &e) < 0 || grpc_server_add_service(srv, &svc, &e) < 0 ||
	    grpc_server_start(srv, &e) < 0) {
		fprintf(stderr, "pillar-csi agent: %s\n", e.msg);
		grpc_server_free(srv);
		httpserve_stop(metrics);
		metrics_unregister_collector(agent_metrics_collect, a);
		return 1;
	}
	log_info("agent serving", "address", listen, "version", version_string(), "tls",
	         tls->on ? "mutual" : "off", "restore",
	         "pending until the controller sends the complete "
	         "export list");
	int sig = serve_wait_signal();
	serve_exit_on_second_signal();
	log_info("shutting down", "signal", sig == 2 ? "SIGINT" : "SIGTERM");
	grpc_server_set_serving(srv, "", false);
	grpc_server_set_serving(srv, AGENT_SERVICE_NAME, false);
	PillarCsi__Agent__V1__DrainRequest dreq = PILLAR_CSI__AGENT__V1__DRAIN_REQUEST__INIT;
	PillarCsi__Agent__V1__DrainResponse *dresp = malloc(sizeof(*dresp));
	struct grpc_status st = {0};
	if (dresp) {
		*dresp = (PillarCsi__Agent__V1__DrainResponse)
		    PILLAR_CSI__AGENT__V1__DRAIN_RESPONSE__INIT;
		if (agent_drain(a, &dreq, dresp, &st) != GRPC_OK)
			log_warn("drain failed", "error", st.msg);
		protobuf_c_message_free_unpacked(&dresp->base, NULL);
	}
	serve_sleep_or_signal(grace_ms);
	grpc_server_shutdown(srv, 5000);
	grpc_server_free(srv);
	httpserve_stop(metrics);
	metrics_unregister_collector(agent_metrics_collect, a);
	return 0;
}

int agent_main(int argc, char **argv)
{
	const char *listen = ":9500", *config = NULL, *configfs = "/sys/kernel/config";
	const char *state_dir = "/var/lib/pillar-csi/agent";
	const char *host_root = ""; /* testing only: "" = the real /dev and /sys */
	struct agent_tls tls = {"", "", "", false};
	const char *metrics_addr = "0";
	struct conn_flags cf = CONN_FLAGS_INIT;
	struct grpc_server_opts go;
	int64_t grace_ms = 5000;
	const struct flag_def defs[] = {
	    {"listen-address", FLAG_STRING, &listen, "gRPC listen address ([host]:port)", false},
	    {"config", FLAG_STRING, &config, "path of the JSON configuration file (backends)",
	     true},
	    {"configfs-root", FLAG_STRING, &configfs,
	     "configfs mount; nvmet lives under <root>/nvmet", false},
	    {"state-dir", FLAG_STRING, &state_dir,
	     "durable state: fencing marks (generations/) and identity pins (nvmet-identity/)",
	     false},
	    {"shutdown-grace-period", FLAG_DURATION, &grace_ms,
	     "time between reporting NOT_SERVING and stopping", false},
	    {"tls-cert", FLAG_STRING, &tls.cert, "server certificate (PEM) for mutual TLS", false},
	    {"tls-key", FLAG_STRING, &tls.key, "server private key (PEM) for mutual TLS", false},
	    {"tls-ca", FLAG_STRING, &tls.ca, "CA (PEM) that client certificates must chain to",
	     false},
	    {"metrics-bind-address", FLAG_STRING, &metrics_addr,
	     "/metrics in Prometheus text format ([host]:port); 0 disables", false},
	    CONN_FLAG_DEFS(&cf),
	    /* TESTING ONLY (test/interop/agent): a fake host tree instead of the machine's. */
	    {"host-root", FLAG_STRING, &host_root,
	     "(testing) look for /dev/zfs, /dev/mapper/control and /sys/module/nvmet_tcp "
	     "under this directory",
	     false},
	};
	struct agent_config cfg = {0};
	struct agent_service_opts so = {0};
	agent_service *a = NULL;
	struct err e = {0};
	int r;

	serve_block_signals();
	r = role_parse_flags(
	    "pillar-csi agent",
	    "Storage agent: creates, expands and deletes volumes in ZFS pools, LVM "
	    "volume groups or a directory,\nexports them through the kernel "
	    "NVMe-oF/TCP target (nvmet) and keeps fencing marks and identity pins on "
	    "disk.",
	    defs, sizeof(defs) / sizeof(defs[0]), argc, argv);
	if (r >= 0)
		return r;
	if (conn_flags_opts(&cf, &go, &e) < 0) {
		fprintf(stderr, "pillar-csi agent: %s\n", e.msg);
		return 2;
	}
	if (agent_tls_check(&tls) < 0)
		return 1;
	if (agent_config_load(config, &cfg, &e) < 0 || agent_config_check_dirs(&cfg, &e) < 0) {
		fprintf(stderr, "%s\n", e.msg);
		agent_config_clear(&cfg);
		return 1;
	}
	so.state_dir = state_dir;
	so.configfs_root = configfs;
	so.version = version_string();
	if (*host_root) { /* TESTING ONLY: --host-root */
		so.host_root = host_root;
		log_warn("using a fake host tree (testing only)", "hostRoot", host_root);
	}
	if (agent_service_new(&cfg, &so, &a, &e) < 0) {
		fprintf(stderr, "%s\n", e.msg);
		agent_config_clear(&cfg);
		return 1;
	}
	consume_drained_marker(state_dir);
	r = agent_serve(a, go, listen, &tls, grace_ms, metrics_addr);
	agent_service_free(a);
	agent_config_clear(&cfg);
	if (r == 0)
		log_info("agent stopped");
	return r;
}
