/* model/outage — what an outage of a storage node means for its volumes: each volume's
 * effective ctrlLossTmo and reconnectDelay (the resolved protocol, else the kernel's defaults),
 * the outage budget, the PillarAgent's status counts (crds.md §3.2 additions, docs/objects.md)
 * and the documents `pillar-csi outage-plan` and `outage-status` print with -o json|yaml
 * (docs/cli.md).
 *
 * The budget of a storage node is the smallest effective ctrlLossTmo among its volumes that are
 * published to at least one node: only a published volume has worker kernels that retry and
 * give up.  ctrlLossTmo -1 (crds.md §16: retry forever) never runs out and does not count; a
 * node with no such volume has no budget (has_budget false).
 */
#ifndef PILLAR_MODEL_OUTAGE_H
#define PILLAR_MODEL_OUTAGE_H

#include "model/model.h"
#include "model/pillar.h"

/* The kernel's values when nothing sets them (nvme-fabrics: NVMF_DEF_CTRL_LOSS_TMO 600 s,
 * NVMF_DEF_RECONNECT_DELAY 10 s; crds.md §4.1). */
#define MODEL_KERNEL_CTRL_LOSS_TMO   600
#define MODEL_KERNEL_RECONNECT_DELAY 10

/* The effective ctrlLossTmo / reconnectDelay of a volume whose resolved nvmeofTcp is n (NULL:
 * nothing resolved); *kernel_default (optional) tells whether the kernel's value applies. */
int64_t model_ctrl_loss_tmo(const struct model_nvmeof_tcp *n, bool *kernel_default);
int64_t model_reconnect_delay(const struct model_nvmeof_tcp *n, bool *kernel_default);
/* The resolved nvmeofTcp of a PillarVolumeState, or NULL. */
const struct model_nvmeof_tcp *model_pvst_nvmeof_tcp(const struct model_pvst *v);
/* The same from a PV's volumeAttributes (csi.md §3: an absent key is unset) into *out, for a
 * volume whose PillarVolumeState has no resolved protocol.  0, or -EINVAL when a present value
 * is not an integer. */
int model_nvmeof_tcp_from_attributes(const struct model_map *attrs, struct model_nvmeof_tcp *out);

/* The numbers of one storage node, added up volume by volume. */
struct model_agent_counts {
	int64_t volumes, published; /* PillarVolumeStates; those with a published node */
	struct model_strs hosts;    /* distinct nodeIDs of every publishedNodes list */
	bool has_budget;
	int64_t budget; /* seconds */
};
/* Adds volume v (its effective ctrlLossTmo from n).  0 or -ENOMEM. */
int model_agent_counts_add(struct model_agent_counts *c, const struct model_pvst *v,
                           const struct model_nvmeof_tcp *n);
void model_agent_counts_clear(struct model_agent_counts *c);

/* ---- ExportReconciled during an outage -------------------------------------------------------
 *
 * An agent that cannot reconcile its exports (unreachable, restore gate closed, restore failed)
 * is one fact, recorded once on its PillarAgent; it is not written again on each of its volumes
 * (an outage costs O(1) store writes, whatever the number of volumes).  Readers derive each
 * volume's ExportReconciled from the two: while the agent's AgentConnected or ExportsReady is
 * not True, every volume the resyncs send (status.exportSpec recorded, not deleting, phase not
 * Provisioning) whose recorded ExportReconciled is not ExportSpecMissing (a repair by hand,
 * whatever the agent does) reads False/AgentUnavailable; otherwise the volume's recorded
 * condition holds. */

/* Whether pa's status says its exports cannot be reconciled now (AgentConnected or
 * ExportsReady not True, or either absent). */
bool model_pa_exports_unavailable(const struct model_pa *pa);
/* The ExportReconciled status and reason of v as derived above ("" for both when v has none
 * and is not derived); agent_unavailable from model_pa_exports_unavailable of v's
 * agent (true also when the PillarAgent does not exist). */
void model_pvst_export_reconciled(const struct model_pvst *v, bool agent_unavailable,
                                  const char **status, const char **reason);

/* ---- the documents (docs/cli.md "outage-plan -o json") ------------------------------------ */

struct model_outage_ref {
	void *rest;
	char *kind, *ns, *name;
};

struct model_outage_pod {
	void *rest;
	char *ns, *name, *node;
	bool has_owner;
	struct model_outage_ref owner; /* the controlling workload, as outage-plan resolved it */
};

struct model_outage_volume {
	void *rest;
	char *pv, *capacity;
	bool has_claim;
	struct model_outage_ref claim; /* namespace and name (no kind) */
	bool has_ctrl_loss_tmo, has_ctrl_loss_tmo_default, has_reconnect_delay,
	    has_reconnect_delay_default;
	int64_t ctrl_loss_tmo, reconnect_delay;
	bool ctrl_loss_tmo_default, reconnect_delay_default;
	bool has_published_nodes, has_pods; /* written as [] when empty */
	struct model_strs published_nodes;
	size_t n_pods;
	struct model_outage_pod *pods;
	bool has_at_risk, at_risk; /* plan with a duration: ctrlLossTmo shorter than it */
	char *export_reconciled;   /* status: the ExportReconciled reason */
	bool has_seconds_left, has_given_up, given_up;
	int64_t seconds_left; /* status: until the workers' kernels give up */
};

struct model_outage_workload {
	void *rest;
	char *kind, *ns, *name;
	bool has_replicas;
	int64_t replicas;
	char *stop, *start, *note; /* commands, or what to do instead */
	struct model_strs pods;    /* namespace/name */
};

struct model_outage_cond {
	void *rest;
	char *status, *reason, *message, *since;
};

struct model_outage {
	void *rest;
	char *kind, *agent; /* kind: OutagePlan or OutageStatus */
	bool has_volume_count, has_published_volumes, has_connected_hosts, has_budget;
	int64_t volume_count, published_volumes, connected_hosts, budget;
	bool has_duration;
	int64_t duration; /* plan: --duration in seconds */
	bool has_reachable, reachable;
	char *unreachable_since; /* status */
	bool has_agent_connected, has_exports_ready;
	struct model_outage_cond agent_connected, exports_ready;
	bool has_volumes; /* written as [] when empty */
	size_t n_volumes;
	struct model_outage_volume *volumes;
	bool has_workloads; /* plan with a duration: present, possibly empty */
	size_t n_workloads;
	struct model_outage_workload *workloads;
};
extern const struct model_type model_outage_type, model_outage_workload_type;

/* obj as -o json (kubectl's layout: four spaces, keys sorted) or -o yaml; NULL when out of
 * memory. */
char *model_outage_print(const struct model_outage *o, bool yaml);

#endif
