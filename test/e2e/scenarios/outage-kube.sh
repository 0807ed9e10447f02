#!/bin/sh
# e2e-topology: a
# e2e-fast: yes
# e2e-order: 33
# e2e-timeout: 720
# e2e-kube: yes
# Issue 25 on the real kernel, on the test API server (kube-lib.inc): a storage-node outage as
# an operator and a workload see it (outage-body.inc). The controller, the node and the CLI run
# as in csi-kube; the test bed stands in for csi-provisioner (PVC -> CreateVolume -> PV), the
# attacher (ControllerPublishVolume), kubelet (NodeStage/NodePublish per pod, NodeGetVolumeStats
# every 2 s, teardown and the final grace-0 DELETE of a terminating pod) and the StatefulSet
# controller (a deleted pod made again). Four volumes, one per case:
#   keep  protocol sets nothing        kernel defaults in sysfs (600/10); outlives the outage
#   web   ctrlLossTmo 8, recovery on   StatefulSet pod: deleted, replaced, data intact
#   solo  ctrlLossTmo 8, recovery on   bare pod: never deleted, a Warning says restart by hand
#   off   ctrlLossTmo 8, recovery off  ReplicaSet pod: never deleted (recovery is opt-in)
# then the agent alone restarts while a worker writes (outage-agent.inc).
. /e2e/lib/e2e.sh
. /e2e/scenarios/kube-lib.inc
scenario_begin
kube_up
. /e2e/scenarios/outage-lib.inc
. /e2e/scenarios/outage-body.inc
. /e2e/scenarios/outage-agent.inc
role_stop node
role_stop controller
role_stop agent
for r in controller node; do
  assert_not grep -qi forbidden "$(role_home)/logs/$r.log"
done
scenario_end
