#!/bin/sh
# e2e-topology: b
# e2e-fast: no
# e2e-timeout: 900
# Power cut of the storage VM in the middle of a stream of CSI calls (issue 30): the worker
# runs the controller (embedded store) and the node plugin; a volume is staged and mounted and
# a writer appends fsync'd records to it; meanwhile a stream of CreateVolume,
# ControllerPublishVolume and DeleteVolume calls goes through the controller, each retried
# until it is answered OK as the sidecars retry.  In the middle of the stream the host SIGKILLs
# the storage VM's qemu (host_ctl storage-kill: no SIGTERM, no guest shutdown) and boots it
# again from its disk.  Then every volume whose CreateVolume was acknowledged exists with its
# identity (namespace 1, uuid and nguid of agent-api.md §8.2, serial) and its backing file,
# every acknowledged publish still admits the worker, every acknowledged DeleteVolume stays
# gone, the exports serve (the staged volume's controller is live again without a remount) and
# the writer resumes with every record it had fsync'd before the cut intact on the storage.
#
# Why this is a power cut: qemu dies between two instructions of the guest, so the guest
# kernel's page cache (dirty pages of the agent's state files and of the volumes' backing files
# not yet written back, ext4's running journal transaction) is gone, and so are the requests
# qemu had not yet issued to the image.  What the guest had already written to its virtual disk
# stays in the image file (cache=writeback: the host's page cache holds it and the host keeps
# running), i.e. the disk behaves like one whose volatile cache had been written out; a cut that
# also loses writes the guest sent but never flushed is what test/interop/powercut-calls
# (the binary's fault point at each fsync) covers.  So what survives here is what the guest
# made durable with fsync/fdatasync plus possibly some of what it had written back on its own;
# an acknowledged call must never depend on the latter.
#
# The data path: the worker's kernel retries the I/O the cut interrupted, its outstanding flush
# included, on the rebooted target, where that flush finds nothing to write and succeeds.  So a
# write the target acknowledged must be durable when it is acknowledged: the file backend's
# images write through (chattr +S, docs/architecture.md "The data path").  Checked directly by
# a pattern written with O_DIRECT to a volume of its own and never flushed before the cut, and
# by every record of the writer, whenever its fsync returned.
. /e2e/lib/e2e.sh
scenario_begin

B=$E2E_BIN
STORE=/run/e2e/store
CLI="--store=dir:$STORE"
CTL=unix:///run/e2e/csi-controller.sock
NODE_EP=unix:///run/e2e/csi-node.sock
AGENT=storage-1; PSC=fast; NODE=worker-1; POOL=fp
P=pillar-csi.bhyoo.com
KUBELET=/run/e2e/kubelet
CAP='{"mount":{"fs_type":"ext4"},"access_mode":{"mode":"SINGLE_NODE_MULTI_WRITER"}}'
TOPO="{\"requisite\":[{\"segments\":{\"$P/nvmeof\":\"true\"}}],\"preferred\":[{\"segments\":{\"$P/nvmeof\":\"true\"}}]}"
STREAM_N=${STREAM_N:-10}     # volumes the stream creates
ACKS=/run/e2e/stream.acked   # one line per acknowledged call (the worker is not cut)
RECS=/run/e2e/writer.acked   # one line per fsync'd writer record: "index md5"
ID_NS=3c6e0b8a-6a0f-5c1d-9f5e-8d2b7a4e1c90

uuid5() {  # uuid5 NS_UUID NAME : RFC 4122 name-based UUID (SHA-1)
  _h=$( { printf "$(printf '%s' "$1" | tr -d - | sed 's/../\\x&/g')"; printf '%s' "$2"; } |
        sha1sum | cut -c1-32)
  _v=$(printf '%x' $(( (0x$(echo "$_h" | cut -c13-14) & 0x0f) | 0x50 )))
  _r=$(printf '%02x' $(( (0x$(echo "$_h" | cut -c17-18) & 0x3f) | 0x80 )))
  echo "$(echo "$_h" | cut -c1-8)-$(echo "$_h" | cut -c9-12)-$_v$(echo "$_h" | cut -c15-16)-$_r$(echo "$_h" | cut -c19-20)-$(echo "$_h" | cut -c21-32)"
}
assert_eq "$(uuid5 $ID_NS 'uuid:nqn.2026-01.com.bhyoo.pillar-csi:tank.pvc-abc123/namespaces/1')" \
  0b661a8a-9925-5917-b52c-a5719096bc2b "uuid5 helper on the spec's test vector"
nqn_of() { echo "nqn.2026-01.com.bhyoo.pillar-csi:$POOL.$1"; }   # nvmet.md §2.1
vid_of() { echo "$AGENT/nvmeof-tcp/file/$POOL/$1"; }
jflat() { sed 's/^[[:space:]]*//' | tr -d '\n\t' | sed 's/": /":/g'; }
jstr() { sed -n 's|.*"'"$1"'":"\([^"]*\)".*|\1|p'; }
jobj() { sed -n 's|.*"'"$1"'":\({[^}]*}\).*|\1|p'; }
cond() {
  _c=$("$B" get "$1" "$2" -o json $CLI 2>/dev/null | jflat | tr '{' '\n' | grep "\"type\":\"$3\"" | head -1)
  [ -n "$_c" ] || { echo none; return 0; }
  echo "$(echo "$_c" | jstr status)/$(echo "$_c" | jstr reason)"
}
cond_is() { [ "$(cond "$1" "$2" "$3")" = "$4" ]; }
mounted() { awk -v p="$1" '$2 == p {f=1} END {exit !f}' /proc/mounts; }
csi() { "$B" call --timeout=120s "${3:-$CTL}" "$1" "$2" || fail "$1 failed (request: $2)"; }
create_req() {  # create_req NAME MIB : csi-provisioner's CreateVolume for claim NAME
  echo "{\"name\":\"$1\",\"capacity_range\":{\"required_bytes\":$(($2 * 1048576))},\"volume_capabilities\":[$CAP],\"parameters\":{\"$P/storage-class\":\"$PSC\",\"csi.storage.k8s.io/pvc/name\":\"$1\",\"csi.storage.k8s.io/pvc/namespace\":\"default\",\"csi.storage.k8s.io/pv/name\":\"$1\"},\"accessibility_requirements\":$TOPO}"
}
# until_ok METHOD JSON : a sidecar's retries of one call until it is answered OK (5 min)
until_ok() {
  _end=$(( $(cut -d. -f1 /proc/uptime) + 300 ))
  while ! "$B" call --timeout=30s "$CTL" "$1" "$2" >/dev/null 2>>/run/e2e/stream.err; do
    [ "$(cut -d. -f1 /proc/uptime)" -lt "$_end" ] || return 1
    sleep 1
  done
}

# ---- roles, configuration --------------------------------------------------------------------
step "storage: the agent (file backend, state on the storage disk); worker: controller, node"
on_storage "mkdir -p $E2E_STATE/vols $E2E_STATE/agent &&
  printf '%s\n' '{\"backends\":[{\"file\":{\"pool\":\"$POOL\",\"directory\":\"$E2E_STATE/vols\"}}]}' > $E2E_STATE/agent.json && state_sync" ||
  fail "storage: agent configuration"
role_start agent -- --listen-address="$STORAGE_IP:9500" --config=/var/lib/pillar-csi/agent.json \
  --configfs-root=/sys/kernel/config --state-dir=/var/lib/pillar-csi/agent
export PILLAR_RECONCILE_INTERVAL=2s
mkdir -p "$STORE" /etc/nvme "$KUBELET"
"$B" modprobe nvme_fabrics nvme_tcp || fail "pillar-csi modprobe nvme_fabrics nvme_tcp"
role_start controller -- --csi-endpoint="$CTL" $CLI \
  --health-probe-bind-address=127.0.0.1:18081 --metrics-bind-address=127.0.0.1:18080
role_start node -- --csi-endpoint="$NODE_EP" --node-id=$NODE --state-dir=/run/e2e/node \
  --kubelet-dir="$KUBELET" $CLI
wait_for 20 "controller and node sockets" sh_true "[ -S ${CTL#unix://} ] && [ -S ${NODE_EP#unix://} ]"
HOSTNQN=$(sysfs_read /etc/nvme/hostnqn)
wait_for 20 "CSINode $NODE in the store" sh_true "$B get csinode $NODE -o json $CLI >/dev/null 2>&1"
cat > /tmp/objects.json <<EOF
[{"apiVersion":"$P/v1alpha1","kind":"PillarAgent","metadata":{"name":"$AGENT"},
  "spec":{"external":{"address":"$STORAGE_IP","port":9500}}},
 {"apiVersion":"$P/v1alpha1","kind":"PillarStore","metadata":{"name":"files"},
  "spec":{"agentRef":"$AGENT","backend":{"file":{"pool":"$POOL"}}}},
 {"apiVersion":"$P/v1alpha1","kind":"PillarProtocol","metadata":{"name":"tcp"},
  "spec":{"protocol":{"nvmeofTcp":{"port":4420,"acl":true,"ctrlLossTmo":600,"reconnectDelay":2}}}},
 {"apiVersion":"$P/v1alpha1","kind":"PillarStorageClass","metadata":{"name":"$PSC"},
  "spec":{"storeRef":"files","protocolRef":"tcp"}}]
EOF
out=$("$B" apply -f /tmp/objects.json $CLI) || fail "pillar-csi apply: $out"
wait_for 90 "PillarAgent ExportsReady=True/ExportsServing" cond_is pa $AGENT ExportsReady True/ExportsServing
wait_for 60 "the generated StorageClass" sh_true "$B get sc $PSC -o json $CLI >/dev/null 2>&1"

# ---- the staged volume and its writer ----------------------------------------------------------
step "volume data: create, publish, stage, publish; a writer appends fsync'd records"
DATA=pvc-pc-data; DVID=$(vid_of $DATA); DNQN=$(nqn_of $DATA)
r=$(csi /csi.v1.Controller/CreateVolume "$(create_req $DATA 32)")
CTX=$(echo "$r" | jflat | jobj volumeContext)
csi /csi.v1.Controller/ControllerPublishVolume "{\"volume_id\":\"$DVID\",\"node_id\":\"$NODE\",\"volume_capability\":$CAP}" >/dev/null
STAGE=$KUBELET/plugins/kubernetes.io/csi/$P/$(printf %s "$DVID" | sha256sum | cut -c1-64)/globalmount
TARGET=$KUBELET/pods/pod-1/volumes/kubernetes.io~csi/$DATA/mount
csi /csi.v1.Node/NodeStageVolume "{\"volume_id\":\"$DVID\",\"staging_target_path\":\"$STAGE\",\"volume_capability\":$CAP,\"volume_context\":$CTX}" "$NODE_EP" >/dev/null
csi /csi.v1.Node/NodePublishVolume "{\"volume_id\":\"$DVID\",\"staging_target_path\":\"$STAGE\",\"target_path\":\"$TARGET\",\"volume_capability\":$CAP,\"volume_context\":$CTX}" "$NODE_EP" >/dev/null
assert mounted "$TARGET"
I=$(nvme_ctrl_by_nqn "$DNQN")
DEV=$(nvme_ns_dev "$(uuid5 $ID_NS "uuid:$DNQN/namespaces/1")") || fail "no block device for $DATA"
mkdir -p "$TARGET/w"
: > "$RECS"
# each record: 64 KiB in a file of its own, fsync'd (file and directory: a new name is durable
# only with its directory) before its line goes to $RECS
writer() {
  _i=0
  while [ ! -e /run/e2e/writer.stop ]; do
    _i=$((_i + 1))
    dd if=/dev/urandom of="$TARGET/w/$_i" bs=64k count=1 conv=fsync 2>/dev/null || return 1
    sync -f "$TARGET/w/$_i" || return 1
    echo "$_i $(md5sum < "$TARGET/w/$_i" | cut -d' ' -f1) $(up)" >> "$RECS"
  done
}
bg_start writer writer
wait_for 60 "the writer's first records" sh_true '[ "$(wc -l < $RECS)" -ge 3 ]'

# ---- a write acknowledged but not flushed before the cut ----------------------------------------
step "volume raw: create, publish, connect the worker (no file system on it)"
RAW=pvc-pc-raw; RNQN=$(nqn_of $RAW)
csi /csi.v1.Controller/CreateVolume "$(create_req $RAW 4)" >/dev/null
csi /csi.v1.Controller/ControllerPublishVolume "{\"volume_id\":\"$(vid_of $RAW)\",\"node_id\":\"$NODE\",\"volume_capability\":$CAP}" >/dev/null
RI=$(E2E_HOSTNQN=$HOSTNQN nvme_connect "$RNQN" "$STORAGE_IP" 4420 "ctrl_loss_tmo=600,reconnect_delay=2,keep_alive_tmo=5") ||
  fail "connect to $RNQN"
RUUID=$(uuid5 $ID_NS "uuid:$RNQN/namespaces/1")
wait_for 30 "the raw volume's namespace on the worker" nvme_ns_present "$RUUID"
RDEV=$(nvme_ns_dev "$RUUID")
assert_eq "$(sysfs_read /sys/block/${RDEV#/dev/}/queue/write_cache)" "write back" \
  "the namespace reports a volatile write cache (the worker flushes)"
dd if=/dev/urandom of=/tmp/raw.pat bs=64k count=1 2>/dev/null
RSUM=$(md5sum < /tmp/raw.pat | cut -d' ' -f1)

# ---- the stream of calls -----------------------------------------------------------------------
# create s-1..s-N; publish the even ones; delete each odd one two steps after its create
stream() {
  _i=0
  while [ $_i -lt "$STREAM_N" ]; do
    _i=$((_i + 1)); _n=pvc-pc-s$_i
    until_ok /csi.v1.Controller/CreateVolume "$(create_req $_n 4)" || return 1
    echo "created $_n" >> "$ACKS"
    if [ $((_i % 2)) = 0 ]; then
      until_ok /csi.v1.Controller/ControllerPublishVolume "{\"volume_id\":\"$(vid_of $_n)\",\"node_id\":\"$NODE\",\"volume_capability\":$CAP}" || return 1
      echo "published $_n" >> "$ACKS"
    fi
    if [ $_i -ge 3 ] && [ $(((_i - 2) % 2)) = 1 ]; then
      _d=pvc-pc-s$((_i - 2))
      until_ok /csi.v1.Controller/DeleteVolume "{\"volume_id\":\"$(vid_of $_d)\"}" || return 1
      echo "deleted $_d" >> "$ACKS"
    fi
  done
}
step "a stream of $STREAM_N CreateVolume (+ publish, delete) through the controller; power cut in its middle"
: > "$ACKS"
t=$(up)
bg_start stream stream
wait_for 300 "the stream's first acknowledged calls" sh_true '[ "$(wc -l < $ACKS)" -ge 3 ]'
REC0=$(wc -l < "$RECS")
ACK0=$(wc -l < "$ACKS")
# 1 MiB in: never written, so the target allocates the image's blocks for it
dd if=/tmp/raw.pat of="$RDEV" bs=64k seek=16 count=1 oflag=direct 2>/dev/null ||
  fail "the raw volume's write before the cut"
CUT_AT=$(up)
storage_power_cut
# the worker's flush of that write: sent after the reboot, it succeeds there
bg_start rawflush dd if=/dev/null of="$RDEV" bs=4k count=0 conv=fsync
log "cut after $ACK0 acknowledged calls ($(tr '\n' ',' < "$ACKS")) and $REC0 fsync'd records"
bg_done stream && log "the stream had ended before the cut" || log "the stream was in flight at the cut"
sleep 3
storage_up 300
wait_for 300 "PillarAgent back at ExportsServing" cond_is pa $AGENT ExportsReady True/ExportsServing
wait_for 600 "the stream ends" bg_done stream
assert_eq "$(bg_rc stream)" 0 "the stream (every call answered OK in the end)"
echo "@@TIME stream of $STREAM_N creates across the power cut: $(since "$t")s" >&2
log "acknowledged: $(tr '\n' ',' < "$ACKS")"

# ---- what survived ------------------------------------------------------------------------------
step "every acknowledged volume exists with its identity; acknowledged deletes stay gone"
for n in $(sed -n 's/^created //p' "$ACKS") $DATA; do
  q=$(nqn_of "$n")
  if grep -qx "deleted $n" "$ACKS"; then
    assert_not on_storage "[ -e \$NVMET/subsystems/$q ]"
    assert_not on_storage "[ -e $E2E_STATE/vols/$n.img ]"
    assert_not sh_true "$B get pvst $n -o json $CLI >/dev/null 2>&1"
    continue
  fi
  assert_eq "$("$B" get pvst $n -o json $CLI | jflat | jstr phase)" Ready "PillarVolumeState $n"
  assert_eq "$(on_storage "cfg_read subsystems/$q/namespaces/1/enable")" 1 "$n: namespace 1 enabled"
  assert_eq "$(on_storage "cfg_read subsystems/$q/namespaces/1/device_uuid")" \
    "$(uuid5 $ID_NS "uuid:$q/namespaces/1")" "$n: namespace uuid"
  assert_eq "$(on_storage "cfg_read subsystems/$q/namespaces/1/device_nguid")" \
    "$(uuid5 $ID_NS "nguid:$q/namespaces/1")" "$n: namespace nguid"
  assert_eq "$(on_storage "cfg_read subsystems/$q/attr_serial")" \
    "$(printf '%s' "serial:$q" | sha256sum | cut -c1-20)" "$n: serial"
  assert_eq "$(on_storage "cfg_read subsystems/$q/namespaces/1/device_path")" \
    "$E2E_STATE/vols/$n.img" "$n: backing file"
  if [ "$n" = $DATA ] || grep -qx "published $n" "$ACKS"; then
    assert_eq "$(on_storage "ls \$NVMET/subsystems/$q/allowed_hosts")" "$HOSTNQN" "$n: admitted hosts"
  fi
done

step "the exports serve: the staged volume reconnects, the writer resumes, fsync'd data intact"
wait_for 300 "nvme$I live again" nvme_ctrl_is "$I" live
wait_for 300 "the raw volume's flush after the cut" bg_done rawflush
assert_eq "$(bg_rc rawflush)" 0 "the raw volume's flush after the cut"
assert_eq "$(dd if="$RDEV" bs=64k skip=16 count=1 iflag=direct 2>/dev/null | md5sum | cut -d' ' -f1)" \
  "$RSUM" "the raw volume's write acknowledged before the cut (flushed after it)"
wait_for 120 "the writer writes after the restore" sh_true "[ \"\$(wc -l < $RECS)\" -gt $((REC0 + 3)) ]"
touch /run/e2e/writer.stop
wait_for 60 "the writer stops" bg_done writer
assert_eq "$(bg_rc writer)" 0 "the writer across the power cut"
assert_eq "$(nvme_ns_dev "$(uuid5 $ID_NS "uuid:$DNQN/namespaces/1")")" "$DEV" "block device after the cut"
drop_caches
# Every record whose fsync returned reads back intact: before the cut, and also one whose fsync
# returned after it (its data acknowledged before the cut, its flush done by the next boot).
bad=0
while read -r i sum at; do
  [ "$(md5sum < "$TARGET/w/$i" | cut -d' ' -f1)" != "$sum" ] || continue
  log "record $i (fsync returned at uptime $at, the cut asked for at $CUT_AT) differs: $(wc -c < "$TARGET/w/$i") bytes, $(tr -d '\000' < "$TARGET/w/$i" | wc -c) not zero"
  bad=$((bad + 1))
done < "$RECS"
assert_eq "$bad" 0 "fsync'd records that differ after the cut (of $(wc -l < "$RECS"), $REC0 before it)"
echo "@@TIME records: $REC0 before the cut, $(wc -l < "$RECS") in all" >&2

step "teardown"
nvme_disconnect "$RI"
csi /csi.v1.Node/NodeUnpublishVolume "{\"volume_id\":\"$DVID\",\"target_path\":\"$TARGET\"}" "$NODE_EP" >/dev/null
csi /csi.v1.Node/NodeUnstageVolume "{\"volume_id\":\"$DVID\",\"staging_target_path\":\"$STAGE\"}" "$NODE_EP" >/dev/null
role_stop node
role_stop controller
role_stop agent
scenario_end
