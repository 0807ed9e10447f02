#include "agent/metrics.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent/service_int.h"

static const char *const complete_label[] = {"complete", NULL};
static const double reconcile_buckets[] = {.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, -1};
static struct metrics_family reconcile_seconds = METRICS_FAMILY(
    "pillar_csi_agent_reconcile_state_duration_seconds",
    "Time one ReconcileState batch took, by whether it carried the complete export list.",
    METRICS_HISTOGRAM, complete_label, reconcile_buckets, 2);

void agent_metrics_reconcile(bool complete, double seconds)
{
	const char *v[] = {complete ? "true" : "false"};
	metrics_observe(&reconcile_seconds, v, seconds);
}

void agent_metrics_register(agent_service *a)
{
	metrics_register(&reconcile_seconds);
	backend_metrics_register();
	metrics_register_collector(agent_metrics_collect, a);
}

/* Entries of <nvmet>/subsystems/<nqn>/allowed_hosts (the hosts allowed to connect). */
static int allowed_hosts(agent_service *a, const char *nqn)
{
	char path[PATH_MAX];
	struct dirent *de;
	int n = 0;
	snprintf(path, sizeof(path), "%s/subsystems/%s/allowed_hosts", nvmet_dir(a->nv), nqn);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

static void collect_exports(struct metrics_text *t, agent_service *a)
{
	struct nvmet_export_entry *v = NULL;
	size_t n = 0;
	int hosts = 0;
	pthread_mutex_lock(&a->nv_mu);
	int r = nvmet_export_list(a->nv, &v, &n, NULL);
	for (size_t i = 0; r == 0 && i < n; i++)
		hosts += allowed_hosts(a, v[i].nqn);
	pthread_mutex_unlock(&a->nv_mu);
	free(v);
	if (r < 0)
		return;
	metrics_text_single(t, "pillar_csi_agent_exports",
	                    "Volumes exported through the kernel NVMe-oF target (subsystems).",
	                    METRICS_GAUGE, (double)n);
	metrics_text_single(t, "pillar_csi_agent_allowed_hosts",
	                    "Host NQNs allowed to connect, summed over every export.",
	                    METRICS_GAUGE, hosts);
}

static void collect_pools(struct metrics_text *t, agent_service *a)
{
	int64_t *total = calloc(a->n_backends + 1, sizeof(*total));
	int64_t *avail = calloc(a->n_backends + 1, sizeof(*avail));
	bool *ok = calloc(a->n_backends + 1, sizeof(*ok));
	for (size_t i = 0; total && avail && ok && i < a->n_backends; i++) {
		backend *b = a->backends[i];
		ok[i] = b->ops->capacity(b, &total[i], &avail[i], NULL) == 0;
	}
	const char *names[2] = {"pillar_csi_agent_pool_capacity_bytes",
	                        "pillar_csi_agent_pool_available_bytes"};
	const char *helps[2] = {"Size of the pool (ZFS pool, LVM volume group or file directory).",
	                        "Space left in the pool for new volumes."};
	for (int k = 0; total && avail && ok && k < 2; k++) {
		metrics_text_header(t, names[k], helps[k], METRICS_GAUGE);
		for (size_t i = 0; i < a->n_backends; i++) {
			backend *b = a->backends[i];
			const char *labels[] = {"backend", backend_kind_name(b->cfg.kind), "pool",
			                        b->cfg.pool, NULL};
			if (ok[i])
				metrics_text_sample(t, names[k], labels,
				                    (double)(k == 0 ? total[i] : avail[i]));
		}
	}
	free(total);
	free(avail);
	free(ok);
}

void agent_metrics_collect(struct metrics_text *t, void *arg)
{
	agent_service *a = arg;
	metrics_text_single(
	    t, "pillar_csi_agent_export_restore_pending",
	    "1 while the export gate is closed: the agent waits for the controller's complete "
	    "export list before it serves exports (restore after a restart), else 0.",
	    METRICS_GAUGE, agent_service_restore_pending(a) ? 1 : 0);
	metrics_text_single(t, "pillar_csi_agent_draining",
	                    "1 while the agent drains before it stops, else 0.", METRICS_GAUGE,
	                    agent_service_draining(a) ? 1 : 0);
	collect_exports(t, a);
	collect_pools(t, a);
}
