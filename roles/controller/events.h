/* controller/events — the Kubernetes Events of the controller's objects, recorded from what the
 * reconcilers and CSI handlers write (crds.md §3.3–§7.3: the conditions' reasons and messages;
 * §7.2: a CreateVolume attempt's partialFailure).
 *
 * The reconcile loop's watches hand every object over (controller_loop_opts.observe).  Each
 * pillar-csi object's conditions are compared with the last version seen: each condition whose
 * status or reason changed becomes one Event on the object (reason = the condition's reason,
 * message = its message or "<Type> is <Status>").  Its type is Normal when the status is True or
 * the reason is a step of normal progress (Provisioning, CreatePartial, Deleting, BackendPending,
 * ExportPending, ExportRestorePending, WaitingForAgentData, WaitingForStore), else Warning: a
 * normal provisioning records no Warning.  A PillarVolumeState's Warning events (except
 * AgentUnavailable, which the outage Events below stand for), and a new partialFailure (reason
 * BackendCreateFailed, ExportPending or AgentRPCFailed with its message), are recorded on its
 * PersistentVolumeClaim (spec.claimRef) and on its PersistentVolume (the PV named as the volume,
 * with the uid its watch last delivered) too, so `kubectl describe pvc` and `kubectl describe pv`
 * show them.
 *
 * Storage-node outages: when a PillarAgent's AgentConnected turns False because the agent does
 * not answer (HealthCheckFailed, TLSHandshakeFailed), each PVC of the agent's published volumes
 * gets one Warning StorageNodeUnreachable naming the storage node, since when (the condition's
 * lastTransitionTime) and when the workers' kernels give up (since + the volume's effective
 * ctrlLossTmo: spec.resolved, or the kernel's 600 s); when the agent is connected with
 * ExportsReady True again, each gets one Normal StorageNodeRestored.  They are Events only (no
 * object is written), from what the watches delivered: one pass over the volumes per outage.
 * The pass keeps a reference to each claim's volume (8 bytes a claim) and the recorder is fed
 * as the Events budget writes (kube_events_set_feeder): none waits as a formatted Event in the
 * recorder's bounded queue, so none is dropped for lack of room while at most 2^20 wait
 * (beyond that they are dropped, counted as queue_full); a claim's Restored is recorded after
 * its Unreachable.  A volume deleted meanwhile still gets the Events of the outages that began
 * or ended before.  A controller that stops (or loses the Lease) does not record those still
 * waiting.
 *
 * The first version of an object seen after start is the baseline (no Event), so a new leader
 * does not repeat its predecessor's events; a baseline agent that is unreachable still gets its
 * StorageNodeRestored Events.  Writing, the rate budget and aggregation are cluster/events.h's.
 *
 * Runs only on the Lease holder (controller.c starts and stops it with the reconcilers).
 * Functions return 0 or a negative errno with a message in e.
 */
#ifndef PILLAR_ROLES_CONTROLLER_EVENTS_H
#define PILLAR_ROLES_CONTROLLER_EVENTS_H

#include "base/err.h"
#include "cluster/events.h"
#include "model/model.h"
#include "store/store.h"

struct ctl_events;

/* rec must outlive it. */
int ctl_events_new(struct kube_events *rec, struct ctl_events **out, struct err *e);
/* NULL is a no-op.  The outage Events still waiting for the budget are not recorded. */
void ctl_events_free(struct ctl_events *x);

/* One watch event (arg: the struct ctl_events *); objects of other kinds are ignored.
 * Thread-safe. */
void ctl_events_observe(void *arg, const struct model_kind *k, enum store_event_type type,
                        const void *obj);

#endif
