/* agent_bench — the agent's restore after a storage reboot, on a fake configfs.
 *
 *   agent_bench setup DIR N   file pool in DIR/files, N volumes created (fencing marks written)
 *                             and exported once with ReconcileState (identities pinned), then
 *                             the fake configfs DIR/cfs is emptied: what a reboot leaves.
 *   agent_bench wipe DIR      empties DIR/cfs again (between repetitions).
 *   agent_bench restore DIR N a new agent service (gate closed, as after a reboot) and ONE
 *                             ReconcileState(complete) with the N volumes; prints
 *                             "restore n=N seconds=S cpu=C runq=Q failed=F": wall and CPU
 *                             (user+sys) seconds of the RPC handler only, and Q the seconds the
 *                             thread waited runnable for a CPU (/proc/thread-self/schedstat):
 *                             on a loaded machine, wall is about cpu + runq.
 *
 * Every volume is exported with ACL on and one of 16 hosts, the shape of a real restore.  The
 * restore invocation does nothing else, so `strace -c -f` of it minus a restore of 0 volumes
 * gives the syscalls per export.  Exit status 1 on any failure. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/config.h"
#include "agent/service.h"
#include "base/log.h"

#define PB(x)  PillarCsi__Agent__V1__##x
#define FILE_T ((PB(BackendType))6)
#define TCP    PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP
#define NHOSTS 16

static char cfs[4096], state[4096], files[4096];
static char hosts[NHOSTS][96];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(p) < 0 && errno != ENOENT ? -1 : 0;
}

static int wipe(void)
{
	static const char *const dirs[] = {"", "/nvmet", "/nvmet/subsystems", "/nvmet/ports",
	                                   "/nvmet/hosts"};
	char p[4200];
	if (nftw(cfs, rm_one, 32, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
		return -1;
	for (int i = 0; i < 5; i++) {
		snprintf(p, sizeof(p), "%s%s", cfs, dirs[i]);
		if (mkdir(p, 0755) < 0)
			return -1;
	}
	return 0;
}

static agent_service *service(struct agent_config *cfg)
{
	char json[4300];
	struct err e = {0};
	agent_service *a = NULL;
	snprintf(json, sizeof(json),
	         "{\"backends\":[{\"file\":{\"pool\":\"fpool\",\"directory\":\"%s\"}}]}", files);
	if (agent_config_parse(json, strlen(json), cfg, &e) < 0) {
		fprintf(stderr, "config: %s\n", e.msg);
		return NULL;
	}
	struct agent_service_opts o = {.state_dir = state,
	                               .configfs_root = cfs,
	                               .version = "bench",
	                               .device_wait_ms = 1000,
	                               .addr_wait_ms = 1000};
	if (agent_service_new(cfg, &o, &a, &e) < 0)
		fprintf(stderr, "agent: %s\n", e.msg);
	return a;
}

struct vol {
	char id[64];
	PB(FencingToken) t;
	PB(NvmeofTcpExportParams) tcp;
	PB(ExportParams) params;
	PB(ExportDesiredState) ex;
	PB(ExportDesiredState) * exs[1];
	char *host[1];
	PB(VolumeDesiredState) vd;
};

static void vol_init(struct vol *v, size_t i)
{
	PB(FencingToken) t = PILLAR_CSI__AGENT__V1__FENCING_TOKEN__INIT;
	PB(NvmeofTcpExportParams) tcp = PILLAR_CSI__AGENT__V1__NVMEOF_TCP_EXPORT_PARAMS__INIT;
	PB(ExportParams) p = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__INIT;
	PB(ExportDesiredState) ex = PILLAR_CSI__AGENT__V1__EXPORT_DESIRED_STATE__INIT;
	PB(VolumeDesiredState) vd = PILLAR_CSI__AGENT__V1__VOLUME_DESIRED_STATE__INIT;
	snprintf(v->id, sizeof(v->id), "fpool/pvc-%06zu", i);
	v->t = t;
	v->t.volume_uid = "uid-bench";
	v->t.generation = 1;
	v->tcp = tcp;
	v->tcp.bind_address = "127.0.0.1";
	v->params = p;
	v->params.params_case = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__PARAMS_NVMEOF_TCP;
	v->params.nvmeof_tcp = &v->tcp;
	v->host[0] = hosts[i % NHOSTS];
	v->ex = ex;
	v->ex.protocol_type = TCP;
	v->ex.export_params = &v->params;
	v->ex.acl_enabled = true;
	v->ex.allowed_initiators = v->host;
	v->ex.n_allowed_initiators = 1;
	v->exs[0] = &v->ex;
	v->vd = vd;
	v->vd.volume_id = v->id;
	v->vd.backend_type = FILE_T;
	v->vd.exports = v->exs;
	v->vd.n_exports = 1;
	v->vd.fence = &v->t;
}

static int create_all(agent_service *a, struct vol *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		PB(CreateVolumeRequest) req = PILLAR_CSI__AGENT__V1__CREATE_VOLUME_REQUEST__INIT;
		PB(CreateVolumeResponse) *resp = malloc(sizeof(*resp));
		struct grpc_status st = {0};
		if (!resp)
			return -1;
		pillar_csi__agent__v1__create_volume_response__init(resp);
		req.volume_id = v[i].id;
		req.capacity_bytes = 1 << 20;
		req.backend_type = FILE_T;
		req.fence = &v[i].t;
		int code = agent_create_volume(a, &req, resp, &st);
		protobuf_c_message_free_unpacked(&resp->base, NULL);
		if (code != GRPC_OK) {
			fprintf(stderr, "create %s: %s\n", v[i].id, st.msg);
			return -1;
		}
	}
	return 0;
}

/* One ReconcileState(complete); returns the number of failed items (or -1) and the seconds. */
static double cpu_seconds(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Seconds this thread has waited on a run queue (0 when schedstat is not available). */
static double runq_seconds(void)
{
	unsigned long long run = 0, wait = 0;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");
	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &run, &wait) != 2)
		wait = 0;
	fclose(f);
	return (double)wait / 1e9;
}

static int reconcile(agent_service *a, struct vol *v, size_t n, double *secs, double *cpu,
                     double *runq)
{
	PB(ReconcileStateRequest) req = PILLAR_CSI__AGENT__V1__RECONCILE_STATE_REQUEST__INIT;
	PB(ReconcileStateResponse) *resp = malloc(sizeof(*resp));
	PB(VolumeDesiredState) **vols = calloc(n ? n : 1, sizeof(*vols));
	struct grpc_status st = {0};
	struct timespec t0, t1;
	int failed = 0;
	if (!resp || !vols) {
		free(resp);
		free(vols);
		return -1;
	}
	pillar_csi__agent__v1__reconcile_state_response__init(resp);
	for (size_t i = 0; i < n; i++)
		vols[i] = &v[i].vd;
	req.volumes = vols;
	req.n_volumes = n;
	req.complete = true;
	double c0 = cpu_seconds(), q0 = runq_seconds();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int code = agent_reconcile_state(a, &req, resp, &st);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	*cpu = cpu_seconds() - c0;
	*runq = runq_seconds() - q0;
	*secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (code != GRPC_OK) {
		fprintf(stderr, "ReconcileState: %s\n", st.msg);
		failed = -1;
	}
	for (size_t i = 0; code == GRPC_OK && i < resp->n_results; i++)
		if (!resp->results[i]->success) {
			if (failed++ == 0)
				fprintf(stderr, "%s: %s\n", resp->results[i]->volume_id,
				        resp->results[i]->error_message);
		}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	free(vols);
	return failed;
}

int main(int argc, char **argv)
{
	struct agent_config cfg;
	double secs = 0, cpu = 0, runq = 0;
	int failed = 0;
	if (argc < 3 || (strcmp(argv[1], "wipe") != 0 && argc < 4)) {
		fprintf(stderr, "usage: agent_bench setup|restore DIR N | wipe DIR\n");
		return 2;
	}
	int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (devnull >= 0)
		log_set_fd(devnull); /* the agent's per-batch log line is not the bench's output */
	snprintf(cfs, sizeof(cfs), "%s/cfs", argv[2]);
	snprintf(state, sizeof(state), "%s/state", argv[2]);
	snprintf(files, sizeof(files), "%s/files", argv[2]);
	if (strcmp(argv[1], "wipe") == 0)
		return wipe() < 0;
	size_t n = strtoul(argv[3], NULL, 10);
	struct vol *v = calloc(n ? n : 1, sizeof(*v));
	for (int i = 0; i < NHOSTS; i++)
		snprintf(hosts[i], sizeof(hosts[i]),
		         "nqn.2014-08.org.nvmexpress:uuid:bench-host-%02d", i);
	for (size_t i = 0; v && i < n; i++)
		vol_init(&v[i], i);
	if (!v || (strcmp(argv[1], "setup") == 0 &&
	           (mkdir(argv[2], 0755) < 0 || mkdir(files, 0755) < 0 || wipe() < 0)))
		return 1;
	agent_service *a = service(&cfg);
	if (!a)
		return 1;
	if (strcmp(argv[1], "setup") == 0) {
		failed = create_all(a, v, n) < 0 ? -1 : reconcile(a, v, n, &secs, &cpu, &runq);
		if (failed == 0)
			failed = wipe();
	} else {
		failed = reconcile(a, v, n, &secs, &cpu, &runq);
		printf("restore n=%zu seconds=%.6f cpu=%.6f runq=%.6f failed=%d\n", n, secs, cpu,
		       runq, failed);
	}
	agent_service_free(a);
	agent_config_clear(&cfg);
	free(v);
	return failed != 0;
}
