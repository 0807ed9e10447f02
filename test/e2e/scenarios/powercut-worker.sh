#!/bin/sh
# e2e-topology: b
# e2e-fast: no
# e2e-timeout: 900
# e2e-worker-disk: yes
# Hard power-off of the worker VM (issue 30).  The storage VM runs the agent and the controller
# (embedded store on the storage disk); the worker runs the node plugin with its state
# directory, kubelet's directory and /etc/nvme on a disk of its own.  A volume is staged and
# published on the worker and a writer appends fsync'd records to it.  Then the host SIGKILLs
# the worker's qemu (worker_power_cut: no shutdown, no sync) and boots it again from its disk;
# this script runs again from its start and goes on with its second part.
#
# While the worker is off: the storage side keeps the export (namespace enabled, the worker's
# host NQN admitted), its target drops the worker's controller once the keep-alive timer runs
# out, and the controller keeps the volume published to the worker and refuses to publish it to
# another node (maintain-nodes.txt, "A worker that went down without a drain").  After the boot:
# the stage record is there and whole, nothing is mounted and no controller exists yet; the
# node plugin starts; kubelet's NodeStageVolume and NodePublishVolume, retried with the same
# requests until OK, converge on one controller of the same namespace identity, one mount at
# the staging path and one at the target path, the record unchanged; every record the writer
# had fsync'd before the cut reads back intact.  Then the volume unpublishes, unstages and is
# deleted.
. /e2e/lib/e2e.sh
scenario_begin

B=$E2E_BIN
W=$E2E_STATE                             # the worker's disk
SSTORE=/var/lib/pillar-csi/store          # the controller's store, on the storage disk
CLI="--store=dir:$SSTORE"
CTL=unix:///run/e2e/csi-controller.sock  # on the storage VM
NODE_EP=unix:///run/e2e/csi-node.sock
AGENT=storage-1; PSC=fast; NODE=worker-1; POOL=fp
P=pillar-csi.bhyoo.com
KUBELET=$W/kubelet
NSTATE=$W/node
CAP='{"mount":{"fs_type":"ext4"},"access_mode":{"mode":"SINGLE_NODE_WRITER"}}'
TOPO="{\"requisite\":[{\"segments\":{\"$P/nvmeof\":\"true\"}}],\"preferred\":[{\"segments\":{\"$P/nvmeof\":\"true\"}}]}"
RECS=$W/e2e/writer.acked   # one line per fsync'd writer record: "index md5"
DATA=pvc-pw-data; DVID=$AGENT/nvmeof-tcp/file/$POOL/$DATA
DNQN=nqn.2026-01.com.bhyoo.pillar-csi:$POOL.$DATA
STAGE=$KUBELET/plugins/kubernetes.io/csi/$P/$(printf %s "$DVID" | sha256sum | cut -c1-64)/globalmount
TARGET=$KUBELET/pods/pod-1/volumes/kubernetes.io~csi/$DATA/mount
RECORD=$NSTATE/$(echo "$DVID" | tr / _).json

jflat() { sed 's/^[[:space:]]*//' | tr -d '\n\t' | sed 's/": /":/g'; }
jstr() { sed -n 's|.*"'"$1"'":"\([^"]*\)".*|\1|p'; }
jobj() { sed -n 's|.*"'"$1"'":\({[^}]*}\).*|\1|p'; }
mounts_at() { awk -v p="$1" '$2 == p {n++} END {print n + 0}' /proc/mounts; }
# ctl METHOD JSON : a call to the controller on the storage VM; its answer, or fail
ctl() {
  on_storage "\"\$E2E_BIN\" call --timeout=120s $CTL $1 '$2'" || fail "$1 failed (request: $2)"
}
# node_until_ok METHOD JSON : kubelet's retries of one node call with the same request (5 min)
node_until_ok() {
  _end=$(( $(cut -d. -f1 /proc/uptime) + 300 ))
  while ! "$B" call --timeout=120s "$NODE_EP" "$1" "$2" >/dev/null 2>>/run/e2e/node-calls.err; do
    [ "$(cut -d. -f1 /proc/uptime)" -lt "$_end" ] || fail "$1 never answered OK: $(tail -3 /run/e2e/node-calls.err)"
    sleep 2
  done
}
# cond KIND NAME TYPE : "status/reason" of a condition of an object in the controller's store
cond() {
  _c=$(on_storage "\"\$E2E_BIN\" get $1 $2 -o json $CLI" 2>/dev/null | jflat | tr '{' '\n' |
       grep "\"type\":\"$3\"" | head -1)
  echo "$(echo "$_c" | jstr status)/$(echo "$_c" | jstr reason)"
}
pa_serving() { [ "$(cond pa $AGENT ExportsReady)" = True/ExportsServing ]; }
pvst_nodes() {
  on_storage "\"\$E2E_BIN\" get pvst $DATA -o json $CLI" | jflat |
    sed -n 's|.*"publishedNodes":\[\([^]]*\)\].*|\1|p'
}
node_start() {
  "$B" modprobe nvme_fabrics nvme_tcp || fail "pillar-csi modprobe nvme_fabrics nvme_tcp"
  mkdir -p "$KUBELET"
  role_start node -- --csi-endpoint="$NODE_EP" --node-id=$NODE --state-dir="$NSTATE" \
    --kubelet-dir="$KUBELET"
  wait_for 20 "the node's socket" sh_true "[ -S ${NODE_EP#unix://} ]"
}

if [ "$(worker_boot_count)" = 1 ]; then
# ==== first boot: set up, stage, publish, write; then the power cut ============================
step "storage: the agent and the controller (store on the storage disk); worker: the node"
on_storage "mkdir -p $E2E_STATE/vols $SSTORE &&
  printf '%s\n' '{\"backends\":[{\"file\":{\"pool\":\"$POOL\",\"directory\":\"$E2E_STATE/vols\"}}]}' > $E2E_STATE/agent.json && state_sync" ||
  fail "storage: agent configuration"
role_start agent -- --listen-address="$STORAGE_IP:9500" --config=/var/lib/pillar-csi/agent.json \
  --configfs-root=/sys/kernel/config --state-dir=/var/lib/pillar-csi/agent
role_start --on storage controller -- --csi-endpoint="$CTL" $CLI \
  --health-probe-bind-address=127.0.0.1:18081 --metrics-bind-address=127.0.0.1:18080
node_start
HOSTNQN=$(sysfs_read /etc/nvme/hostnqn)
HOSTID=$(sysfs_read /etc/nvme/hostid)
# kubelet makes the CSINode objects; the node plugin's annotations (csi.md §6.1 step 4) are
# written here because the node has no store of its own in this topology; worker-2 is another
# worker the volume must not be published to while worker-1 holds it
on_storage "cat > /tmp/objects.json <<'EOF'
[{\"apiVersion\":\"storage.k8s.io/v1\",\"kind\":\"CSINode\",\"metadata\":{\"name\":\"$NODE\",
  \"annotations\":{\"$P/nvmeof-host-nqn\":\"$HOSTNQN\",\"$P/nvmeof-host-id\":\"$HOSTID\"}},
  \"spec\":{\"drivers\":[{\"name\":\"$P\",\"nodeID\":\"$NODE\",\"topologyKeys\":[\"$P/nvmeof\"]}]}},
 {\"apiVersion\":\"storage.k8s.io/v1\",\"kind\":\"CSINode\",\"metadata\":{\"name\":\"worker-2\",
  \"annotations\":{\"$P/nvmeof-host-nqn\":\"nqn.2014-08.org.nvmexpress:uuid:0e2e0e2e-0000-4000-8000-0000000000a2\",
  \"$P/nvmeof-host-id\":\"0e2e0e2e-0000-4000-8000-0000000000a2\"}},
  \"spec\":{\"drivers\":[{\"name\":\"$P\",\"nodeID\":\"worker-2\",\"topologyKeys\":[\"$P/nvmeof\"]}]}},
 {\"apiVersion\":\"$P/v1alpha1\",\"kind\":\"PillarAgent\",\"metadata\":{\"name\":\"$AGENT\"},
  \"spec\":{\"external\":{\"address\":\"$STORAGE_IP\",\"port\":9500}}},
 {\"apiVersion\":\"$P/v1alpha1\",\"kind\":\"PillarStore\",\"metadata\":{\"name\":\"files\"},
  \"spec\":{\"agentRef\":\"$AGENT\",\"backend\":{\"file\":{\"pool\":\"$POOL\"}}}},
 {\"apiVersion\":\"$P/v1alpha1\",\"kind\":\"PillarProtocol\",\"metadata\":{\"name\":\"tcp\"},
  \"spec\":{\"protocol\":{\"nvmeofTcp\":{\"port\":4420,\"acl\":true,\"ctrlLossTmo\":600,\"reconnectDelay\":2}}}},
 {\"apiVersion\":\"$P/v1alpha1\",\"kind\":\"PillarStorageClass\",\"metadata\":{\"name\":\"$PSC\"},
  \"spec\":{\"storeRef\":\"files\",\"protocolRef\":\"tcp\"}}]
EOF
\"\$E2E_BIN\" apply -f /tmp/objects.json $CLI >/dev/null" || fail "pillar-csi apply on the storage VM"
wait_for 180 "PillarAgent ExportsReady=True/ExportsServing" pa_serving

step "volume $DATA: create, publish to $NODE, stage, publish; a writer appends fsync'd records"
r=$(ctl /csi.v1.Controller/CreateVolume "{\"name\":\"$DATA\",\"capacity_range\":{\"required_bytes\":33554432},\"volume_capabilities\":[$CAP],\"parameters\":{\"$P/storage-class\":\"$PSC\",\"csi.storage.k8s.io/pvc/name\":\"$DATA\",\"csi.storage.k8s.io/pvc/namespace\":\"default\",\"csi.storage.k8s.io/pv/name\":\"$DATA\"},\"accessibility_requirements\":$TOPO}")
CTX=$(echo "$r" | jflat | jobj volumeContext)
[ -n "$CTX" ] || fail "CreateVolume answered no volume context: $r"
ctl /csi.v1.Controller/ControllerPublishVolume "{\"volume_id\":\"$DVID\",\"node_id\":\"$NODE\",\"volume_capability\":$CAP}" >/dev/null
# kubelet's requests, kept on the worker's disk for its calls after the reboot
mkdir -p "$W/e2e"
echo "{\"volume_id\":\"$DVID\",\"staging_target_path\":\"$STAGE\",\"volume_capability\":$CAP,\"volume_context\":$CTX}" > "$W/e2e/stage.json"
echo "{\"volume_id\":\"$DVID\",\"staging_target_path\":\"$STAGE\",\"target_path\":\"$TARGET\",\"volume_capability\":$CAP,\"volume_context\":$CTX}" > "$W/e2e/publish.json"
node_until_ok /csi.v1.Node/NodeStageVolume "$(cat "$W/e2e/stage.json")"
node_until_ok /csi.v1.Node/NodePublishVolume "$(cat "$W/e2e/publish.json")"
assert_eq "$(mounts_at "$TARGET")" 1 "mounts at the target path"
I=$(nvme_ctrl_by_nqn "$DNQN")
[ -n "$I" ] || fail "no controller of $DNQN"
UUID=$(sed -n 's|.*"namespace_uuid":[[:space:]]*"\([^"]*\)".*|\1|p' "$RECORD")
[ -n "$UUID" ] && nvme_ns_present "$UUID" || fail "the stage record names no namespace of this worker: $(cat "$RECORD")"
cp "$RECORD" "$W/e2e/record.before"
echo "$UUID" > "$W/e2e/uuid.before"
mkdir -p "$TARGET/w"
: > "$RECS"
sync -f "$RECS"
writer() {
  _i=0
  while :; do
    _i=$((_i + 1))
    dd if=/dev/urandom of="$TARGET/w/$_i" bs=64k count=1 conv=fsync 2>/dev/null || return 1
    sync -f "$TARGET/w/$_i" || return 1   # the new name too (syncfs of the volume)
    echo "$_i $(md5sum < "$TARGET/w/$_i" | cut -d' ' -f1)" >> "$RECS"
    sync -f "$RECS" || return 1
  done
}
bg_start writer writer
wait_for 120 "the writer's first records" sh_true '[ "$(wc -l < $RECS)" -ge 5 ]'
step "worker POWER CUT after $(wc -l < "$RECS") fsync'd records"
worker_power_cut
fi

# ==== second boot: the worker is back from its power cut =======================================
assert_eq "$(worker_boot_count)" 2 "the worker's boot"
step "storage side after the worker's power cut: export kept, worker still the volume's node"
HOSTNQN=$(sysfs_read /etc/nvme/hostnqn)
assert_eq "$(on_storage "cfg_read subsystems/$DNQN/namespaces/1/enable")" 1 "namespace 1 enabled"
assert_eq "$(on_storage "ls \$NVMET/subsystems/$DNQN/allowed_hosts")" "$HOSTNQN" "admitted hosts (the worker's host NQN, kept on its disk)"
pn=$(pvst_nodes)
assert_match "$pn" "\"nodeID\":\"$NODE\"" "the volume's publications"
case $pn in *worker-2*|*'"revoking":true'*) fail "the volume's publications: $pn" ;; esac
out=$(on_storage "\"\$E2E_BIN\" call --timeout=60s $CTL /csi.v1.Controller/ControllerPublishVolume '{\"volume_id\":\"$DVID\",\"node_id\":\"worker-2\",\"volume_capability\":$CAP}' 2>&1; echo rc=\$?")
assert_match "$out" "published to another node" "ControllerPublishVolume to worker-2 while $NODE holds the volume"
case $out in *rc=0*) fail "ControllerPublishVolume to worker-2 answered OK: $out" ;; esac
wait_for 120 "the target drops the worker's old controller (keep-alive timer expired)" \
  on_storage "dmesg | grep -q 'keep-alive timer ([0-9]* seconds) expired'"

step "the worker after the boot: the record whole, nothing mounted, no controller yet"
assert_eq "$(cat "$RECORD")" "$(cat "$W/e2e/record.before")" "the stage record across the power cut"
assert_eq "$(mounts_at "$STAGE")$(mounts_at "$TARGET")" 00 "mounts at the staging and target paths"
assert_eq "$(nvme_ctrl_by_nqn "$DNQN")" "" "controllers of $DNQN"
t=$(up)
node_start
step "kubelet: NodeStageVolume and NodePublishVolume with the same requests until OK"
node_until_ok /csi.v1.Node/NodeStageVolume "$(cat "$W/e2e/stage.json")"
node_until_ok /csi.v1.Node/NodePublishVolume "$(cat "$W/e2e/publish.json")"
echo "@@TIME node start to the volume published again: $(since "$t")s" >&2
UUID=$(cat "$W/e2e/uuid.before")
assert nvme_ns_present "$UUID"
assert_eq "$(nvme_ctrl_by_nqn "$DNQN" | wc -l)" 1 "controllers of $DNQN"
I=$(nvme_ctrl_by_nqn "$DNQN")
assert nvme_ctrl_is "$I" live
assert_eq "$(mounts_at "$STAGE")$(mounts_at "$TARGET")" 11 "mounts at the staging and target paths"
assert_eq "$(sed -n 's|.*"namespace_uuid":[[:space:]]*"\([^"]*\)".*|\1|p' "$RECORD")" "$UUID" "the record's namespace"
assert_eq "$(sed -n 's|.*"staging_path":[[:space:]]*"\([^"]*\)".*|\1|p' "$RECORD")" "$STAGE" "the record's staging path"
assert_eq "$(on_storage "ls \$NVMET/subsystems/$DNQN/allowed_hosts")" "$HOSTNQN" "admitted hosts"

step "every record the writer fsync'd before the cut reads back intact"
drop_caches
n=0; bad=0
while read -r i sum; do
  [ -n "$sum" ] || continue   # a line the cut tore (its sync never returned)
  n=$((n + 1))
  [ "$(md5sum < "$TARGET/w/$i" | cut -d' ' -f1)" = "$sum" ] || { log "record $i differs"; bad=$((bad + 1)); }
done < "$RECS"
assert_eq "$bad" 0 "records that differ (of $n fsync'd before the cut)"
echo "@@TIME records fsync'd before the worker's power cut: $n, all intact" >&2
date > "$TARGET/after-the-cut" && sync -f "$TARGET/after-the-cut" || fail "write after the cut"

step "teardown: unpublish, unstage, controller unpublish, delete"
node_until_ok /csi.v1.Node/NodeUnpublishVolume "{\"volume_id\":\"$DVID\",\"target_path\":\"$TARGET\"}"
node_until_ok /csi.v1.Node/NodeUnstageVolume "{\"volume_id\":\"$DVID\",\"staging_target_path\":\"$STAGE\"}"
assert_not test -e "$RECORD"
assert_eq "$(nvme_ctrl_by_nqn "$DNQN")" "" "controllers of $DNQN after the unstage"
ctl /csi.v1.Controller/ControllerUnpublishVolume "{\"volume_id\":\"$DVID\",\"node_id\":\"$NODE\"}" >/dev/null
ctl /csi.v1.Controller/DeleteVolume "{\"volume_id\":\"$DVID\"}" >/dev/null
assert_not on_storage "[ -e \$NVMET/subsystems/$DNQN ]"
role_stop node
role_stop --on storage controller
role_stop agent
scenario_end
