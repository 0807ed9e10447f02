/* controller/recovery — opt-in recovery after ctrlLossTmo: the pods that lost their volume are
 * deleted so that their controllers recreate them and the volume is staged on a new connection
 * (the "After a timeout" procedure of maintenance.md, done for the operator; off by default).
 *
 * Who notices: the worker.  Its node plugin sees the kernel remove a staged volume's NVMe
 * controller (NodeGetVolumeStats, node/health.h) and writes the set of such volumes, with the time
 * it saw each, to the annotation pillar-csi.bhyoo.com/nvmeof-lost-volumes of its own CSINode,
 * which it may already patch: the node plugin gets no new permission.  The controller alone may
 * list and delete pods (the chart grants it only with recovery.deletePods), and it acts on a
 * node's report only within what that node could do itself: pods scheduled on that node, of
 * volumes published to that node.
 *
 * reconcile_lost(c, node) runs on each event of CSINode `node`.  For each reported volume:
 *  - its PillarVolumeState must resolve nvmeofTcp.deletePodsAfterCtrlLoss true (the
 *    PillarProtocol's opt-in, fixed at creation), have a claimRef and be published to the node;
 *    else nothing happens;
 *  - the claim's pods (its namespace, spec.nodeName = node, a volume of that claim) that are not
 *    being deleted and were created before the node saw the controller gone (so that a
 *    replacement is never deleted) are examined: one whose controller owner reference is a
 *    ReplicaSet, StatefulSet, DaemonSet or Job is deleted with its UID as precondition, and a
 *    Normal Event PodDeletedAfterCtrlLoss is recorded on the pod and on the claim; any other pod
 *    (a bare pod, or one another kind of controller owns) is never deleted: a Warning Event
 *    PodNotDeletedAfterCtrlLoss on the pod and the claim says to restart it by hand.
 * Without the permission to list or delete pods, a Warning Event PodRecoveryForbidden on the claim
 * says to set recovery.deletePods.  A report that is not such a JSON object is logged and
 * ignored.  The node drops a volume from its report once it is live again.
 *
 * Returns 0, or a negative errno (a store error other than a refusal) with a message in e.
 */
#ifndef PILLAR_ROLES_CONTROLLER_RECOVERY_H
#define PILLAR_ROLES_CONTROLLER_RECOVERY_H

#include "base/err.h"
#include "controller/ctl.h"

#define RECOVERY_LOST_MAX 256 /* reported volumes read per CSINode */

int reconcile_lost(struct ctl *c, const char *node, struct err *e);

#endif
