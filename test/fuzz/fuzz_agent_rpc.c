/* libFuzzer target: AgentService requests through the gRPC server harness (harness.h) into the
 * real handlers — file backend in a scratch directory, a plain directory as configfs, a real
 * state directory.  The first byte picks the method (GetCapabilities ... Drain, and the built-in
 * health service), the rest is the protobuf request.  Every 256 inputs the service and its
 * directories are rebuilt, so files left by earlier inputs (volumes, fencing marks, a drain)
 * neither pile up nor shut every later input out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/config.h"
#include "agent/grpc_service.h"
#include "agent/service.h"
#include "harness.h"

static agent_service *svc;
static struct agent_config cfg;
static struct grpc_service table;
static agent_service *current; /* what the table's ctx points at */

static void agent_start(void)
{
	char json[600], st[300], cfs[300], files[300];
	struct err e = {0};
	const char *d = fuzz_dir();
	static const char *const sub[] = {
	    "cfs",  "cfs/nvmet", "cfs/nvmet/subsystems", "cfs/nvmet/ports", "cfs/nvmet/hosts",
	    "files"};
	for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
		char p[400];
		snprintf(p, sizeof(p), "%s/%s", d, sub[i]);
		mkdir(p, 0755);
	}
	snprintf(st, sizeof(st), "%s/state", d);
	snprintf(cfs, sizeof(cfs), "%s/cfs", d);
	snprintf(files, sizeof(files), "%s/files", d);
	snprintf(json, sizeof(json),
	         "{\"backends\":[{\"file\":{\"pool\":\"fpool\",\"directory\":\"%s\"}}]}", files);
	if (agent_config_parse(json, strlen(json), &cfg, &e) < 0)
		abort();
	struct agent_service_opts o = {.state_dir = st,
	                               .configfs_root = cfs,
	                               .version = "0.1.0-fuzz",
	                               .host_root = d,
	                               .dev_root = d,
	                               .device_wait_ms = 1,
	                               .create_wait_ms = 1,
	                               .addr_wait_ms = 1,
	                               .busy_retry_ms = 1,
	                               .drain_wait_ms = 1,
	                               .health_cache_ms = 1};
	if (agent_service_new(&cfg, &o, &svc, &e) < 0)
		abort();
}

static void agent_stop(void)
{
	agent_service_free(svc);
	agent_config_clear(&cfg);
	svc = NULL;
	fuzz_dir_reset();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned n;
	char path[128];

	if (!current) {
		agent_start();
		agent_grpc_service(svc, &table);
		fuzz_rpc_add(&table);
		current = svc;
	} else if (++n % 256 == 0) {
		/* the table's ctx must keep pointing at the live service: rebuild in place */
		agent_stop();
		agent_start();
		agent_grpc_service(svc, &table);
		current = svc;
	}
	if (size < 1)
		return 0;
	fuzz_rpc_call(fuzz_rpc_pick(data[0], path, sizeof(path)), data + 1, size - 1);
	return 0;
}
