#!/bin/sh
# Hostile inputs to the controller and the agent (issue 24 #3, #5, #9): a `pillar-csi controller`
# on an embedded store and a `pillar-csi agent` on a fake configfs root with a file backend, both
# inside HOSTILE_TMP, sent sizes that overflow when rounded, a GetCapacity for a class that does
# not exist, and a truncated PillarVolumeState record found at a restart and at a storage-node
# reboot.  Prints ok/not ok lines (run.sh's case contract).
set -u
: "${PILLAR_BIN:?}" "${HOSTILE_TMP:?}"
D=$HOSTILE_TMP
failed=0
ok() { echo "ok - $1"; }
bad() {
	echo "not ok - $1"
	failed=$((failed + 1))
}
# check WHAT COMMAND...: ok when COMMAND succeeds
check() {
	what=$1
	shift
	if "$@" > "$D/check.out" 2>&1; then ok "$what"; else
		bad "$what: $(head -c 600 "$D/check.out")"
	fi
}
pc() { "$PILLAR_BIN" "$@"; }
# wait_for SECONDS COMMAND...
wait_for() {
	n=$(($1 * 5))
	shift
	while [ "$n" -gt 0 ]; do
		"$@" > /dev/null 2>&1 && return 0
		sleep 0.2
		n=$((n - 1))
	done
	return 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

mkdir -p "$D/configfs/nvmet/subsystems" "$D/configfs/nvmet/ports" "$D/configfs/nvmet/hosts" \
	"$D/host/sys/module/nvmet_tcp" "$D/volumes"
echo "{\"backends\": [{\"file\": {\"pool\": \"files\", \"directory\": \"$D/volumes\"}}]}" \
	> "$D/agent.json"
PORT=$(free_port)
AGENT=127.0.0.1:$PORT
CSI=unix://$D/controller.sock
export PILLAR_CSI_STORE=dir:$D/store
AGENT_PID= CONTROLLER_PID=

start_agent() {
	"$PILLAR_BIN" agent --config="$D/agent.json" --state-dir="$D/agent" --listen-address="$AGENT" \
		--shutdown-grace-period=0s --configfs-root="$D/configfs" --host-root="$D/host" \
		2>> "$D/agent.log" &
	AGENT_PID=$!
	wait_for 20 pc call "$AGENT" /grpc.health.v1.Health/Check
}
start_controller() {
	PILLAR_RECONCILE_INTERVAL=1s "$PILLAR_BIN" controller --store="$PILLAR_CSI_STORE" \
		--csi-endpoint="$CSI" --health-probe-bind-address=127.0.0.1:0 \
		--metrics-bind-address=0 2>> "$D/controller.log" &
	CONTROLLER_PID=$!
	wait_for 20 pc call "$CSI" /csi.v1.Identity/Probe
}
stop() { # PID: killed at once, as a crash or a power loss would
	[ -n "$1" ] && kill -9 "$1" 2> /dev/null && wait "$1" 2> /dev/null
	return 0
}
cleanup() {
	stop "$AGENT_PID"
	stop "$CONTROLLER_PID"
}
trap cleanup EXIT

create() { # NAME REQUIRED [LIMIT]
	pc call "$CSI" /csi.v1.Controller/CreateVolume "{\"name\": \"$1\",
	  \"capacityRange\": {\"requiredBytes\": \"$2\"${3:+, \"limitBytes\": \"$3\"}},
	  \"volumeCapabilities\": [{\"mount\": {\"fsType\": \"ext4\"},
	                          \"accessMode\": {\"mode\": \"SINGLE_NODE_WRITER\"}}],
	  \"parameters\": {\"pillar-csi.bhyoo.com/storage-class\": \"fast\"}}"
}
# expect_error WHAT CODE MESSAGE-FRAGMENT COMMAND...: the command fails with CODE: ...MESSAGE...
expect_error() {
	what=$1 code=$2 frag=$3
	shift 3
	if "$@" > "$D/call.out" 2>&1; then
		bad "$what: succeeded: $(head -c 300 "$D/call.out")"
	elif grep -q "^$code: .*$frag" "$D/call.out"; then
		ok "$what"
	else
		bad "$what: $(head -c 600 "$D/call.out")"
	fi
}
restore_done() {
	pc call "$AGENT" /pillar_csi.agent.v1.AgentService/HealthCheck |
		grep -q '"exportRestorePending":true' && return 1
	return 0
}

check "agent starts on fake roots" start_agent
check "controller starts on an embedded store" start_controller
cat > "$D/storage.json" << EOF
[
  {"apiVersion": "pillar-csi.bhyoo.com/v1alpha1", "kind": "PillarAgent",
   "metadata": {"name": "storage-1"},
   "spec": {"external": {"address": "127.0.0.1", "port": $PORT}}},
  {"apiVersion": "pillar-csi.bhyoo.com/v1alpha1", "kind": "PillarStore",
   "metadata": {"name": "files"},
   "spec": {"agentRef": "storage-1", "backend": {"file": {"pool": "files"}}}},
  {"apiVersion": "pillar-csi.bhyoo.com/v1alpha1", "kind": "PillarProtocol",
   "metadata": {"name": "tcp"},
   "spec": {"protocol": {"nvmeofTcp": {"port": 4420}}}},
  {"apiVersion": "pillar-csi.bhyoo.com/v1alpha1", "kind": "PillarStorageClass",
   "metadata": {"name": "fast"},
   "spec": {"storeRef": "files", "protocolRef": "tcp"}}
]
EOF
check "the storage objects are applied" pc apply -f "$D/storage.json"
check "the class becomes Ready" wait_for 60 sh -c "'$PILLAR_BIN' get psc fast | grep -q True"

# ---- #3: sizes checked before arithmetic ------------------------------------------------------
MAX=9223372036854775807
LARGEST="the largest size accepted is 9223372035781033984 bytes"
expect_error "CreateVolume required_bytes 2^63-1: OUT_OF_RANGE naming the largest size" \
	OUT_OF_RANGE "$LARGEST" create pvc-big $MAX
expect_error "CreateVolume required_bytes and limit_bytes 2^63-1: OUT_OF_RANGE" \
	OUT_OF_RANGE "$LARGEST" create pvc-big $MAX $MAX
expect_error "nothing is recorded for the refused CreateVolume" \
	"Error from server (NotFound)" "" pc get pvst pvc-big
check "CreateVolume pvc-1 (64 MiB)" create pvc-1 67108864
check "CreateVolume pvc-2 (64 MiB)" create pvc-2 67108864
VOL1=storage-1/nvmeof-tcp/file/files/pvc-1
expect_error "ControllerExpandVolume 2^63-1: OUT_OF_RANGE naming the largest size" \
	OUT_OF_RANGE "$LARGEST" pc call "$CSI" /csi.v1.Controller/ControllerExpandVolume \
	"{\"volumeId\": \"$VOL1\", \"capacityRange\": {\"requiredBytes\": \"$MAX\"}}"
check "the expanded volume's record keeps its capacity" \
	sh -c "'$PILLAR_BIN' get pvst pvc-1 -o json | grep -q '\"capacityBytes\": *67108864'"
expect_error "agent CreateVolume capacity 2^63-1: OUT_OF_RANGE" OUT_OF_RANGE \
	"exceeds the largest size accepted" pc call "$AGENT" \
	/pillar_csi.agent.v1.AgentService/CreateVolume \
	"{\"volumeId\": \"files/big\", \"capacityBytes\": \"$MAX\", \"backendType\": 6,
	  \"fence\": {\"volumeUid\": \"u-big\", \"generation\": \"1\"}}"
check "no backend file for the refused agent CreateVolume" test ! -e "$D/volumes/big.img"

# ---- #9: GetCapacity of an unknown class ------------------------------------------------------
expect_error "GetCapacity with an unknown storage class: INVALID_ARGUMENT naming it" \
	INVALID_ARGUMENT 'PillarStorageClass "nope" (named via pillar-csi.bhyoo.com/storage-class) not found' \
	pc call "$CSI" /csi.v1.Controller/GetCapacity \
	'{"parameters": {"pillar-csi.bhyoo.com/storage-class": "nope"}}'
check "GetCapacity of the existing class answers" pc call "$CSI" /csi.v1.Controller/GetCapacity \
	'{"parameters": {"pillar-csi.bhyoo.com/storage-class": "fast"}}'

# ---- #5: one truncated record -----------------------------------------------------------------
NQN2=nqn.2026-01.com.bhyoo.pillar-csi:files.pvc-2
NQN1=nqn.2026-01.com.bhyoo.pillar-csi:files.pvc-1
check "both volumes are exported" test -d "$D/configfs/nvmet/subsystems/$NQN1" -a \
	-d "$D/configfs/nvmet/subsystems/$NQN2"
REC=$D/store/pillarvolumestates/pvc-2.json
stop "$CONTROLLER_PID"
stop "$AGENT_PID"
if [ -f "$REC" ]; then
	cp "$REC" "$D/pvc-2.backup"
	head -c 40 "$REC" > "$D/rec" && mv "$D/rec" "$REC" && ok "pvc-2's record is truncated"
else
	bad "no record file $REC"
fi
(cd "$D/configfs/nvmet/subsystems/$NQN2" && find . | sort && cat attr_serial) > "$D/export2.before"
# 1. the agent and the controller restart (the kernel target keeps its exports)
check "agent restarts" start_agent
check "controller restarts" start_controller
check "the agent's restore completes despite the unreadable record" wait_for 60 restore_done
(cd "$D/configfs/nvmet/subsystems/$NQN2" && find . | sort && cat attr_serial) > "$D/export2.after"
check "the unreadable volume's export is left exactly as it was" \
	cmp "$D/export2.before" "$D/export2.after"
check "pvc-2's record file is left as it was (40 bytes)" test "$(wc -c < "$REC")" -eq 40
pc get pvst > "$D/get.out" 2> "$D/get.err"
check "pillar-csi get pvst lists the readable volume" grep -q '^pvc-1 ' "$D/get.out"
check "pillar-csi get pvst prints the unreadable one as an error row naming its file" \
	grep -q "^pvc-2 .*$REC" "$D/get.out"
check "the PillarAgent names the unreadable record and the repair command" wait_for 30 \
	sh -c "'$PILLAR_BIN' get pa storage-1 -o json | grep -q 'pvc-2.json is corrupt.*pillar-csi'"
# 2. storage-node reboot: the kernel target is empty
stop "$CONTROLLER_PID"
stop "$AGENT_PID"
for d in subsystems ports hosts; do
	rm -rf "${D:?}/configfs/nvmet/$d" && mkdir "$D/configfs/nvmet/$d"
done
check "agent starts after the reboot" start_agent
check "controller restarts after the reboot" start_controller
check "the restore after the reboot completes" wait_for 60 restore_done
check "the readable volume is exported again" test -d "$D/configfs/nvmet/subsystems/$NQN1"
check "CreateVolume works on the storage node with the unreadable record" create pvc-3 67108864
check "the new volume is exported" test -d \
	"$D/configfs/nvmet/subsystems/nqn.2026-01.com.bhyoo.pillar-csi:files.pvc-3"
check "pvc-2's backend file is kept" test -f "$D/volumes/pvc-2.img"
# 3. the repair of troubleshooting.md: the file restored from its backup
cp "$D/pvc-2.backup" "$D/rec" && mv "$D/rec" "$REC"
check "the repaired record reads again" wait_for 30 pc get pvst pvc-2
check "the PillarAgent says every record reads again" wait_for 30 \
	sh -c "'$PILLAR_BIN' get pa storage-1 -o json | grep -q '\"reason\": *\"VolumeStatesReadable\"'"
check "the repaired volume is exported again" wait_for 30 \
	test -d "$D/configfs/nvmet/subsystems/$NQN2"

# ---- snapshots: hostile names, IDs, tokens and sizes (issue 27) -----------------------------
LONG=$(head -c 70000 /dev/zero | tr '\0' a)
snap() { # NAME SOURCE
	pc call "$CSI" /csi.v1.Controller/CreateSnapshot "{\"name\": \"$1\", \"sourceVolumeId\": \"$2\"}"
}
ls "$D/volumes" > "$D/volumes.before"
expect_error "CreateSnapshot name ../../etc: INVALID_ARGUMENT naming the pattern" \
	INVALID_ARGUMENT 'must match ^\[A-Za-z0-9\]' snap ../../etc "$VOL1"
expect_error "CreateSnapshot with a 70000-byte name: INVALID_ARGUMENT" \
	INVALID_ARGUMENT 'must match' snap "$LONG" "$VOL1"
expect_error "CreateSnapshot from a source ID with ../: NOT_FOUND" NOT_FOUND \
	'source volume .* not found' snap s-dots storage-1/nvmeof-tcp/file/files/../pvc-1
expect_error "CreateSnapshot from a snapshot-shaped source ID: NOT_FOUND" NOT_FOUND \
	'not found' snap s-kind storage-1/snapshot/file/files/pvc-1
check "DeleteSnapshot of an ID with ../ is OK (not found) and touches nothing" \
	pc call "$CSI" /csi.v1.Controller/DeleteSnapshot \
	'{"snapshotId": "storage-1/snapshot/file/files/../../../etc/passwd"}'
check "DeleteSnapshot of a 70000-byte ID is OK (not found)" \
	pc call "$CSI" /csi.v1.Controller/DeleteSnapshot "{\"snapshotId\": \"$LONG\"}"
expect_error "ListSnapshots with a junk starting_token: ABORTED saying to list again" ABORTED \
	'list again without one' pc call "$CSI" /csi.v1.Controller/ListSnapshots \
	'{"startingToken": "99999999999999999999999"}'
expect_error "ListSnapshots with max_entries -1: INVALID_ARGUMENT" INVALID_ARGUMENT \
	'max_entries must not be negative' pc call "$CSI" /csi.v1.Controller/ListSnapshots \
	'{"maxEntries": -1}'
check "ListSnapshots with max_entries 2^31-1 answers" pc call "$CSI" \
	/csi.v1.Controller/ListSnapshots '{"maxEntries": 2147483647}'
restore() { # SNAPSHOT-ID
	pc call "$CSI" /csi.v1.Controller/CreateVolume "{\"name\": \"pvc-r\",
	  \"capacityRange\": {\"requiredBytes\": \"67108864\"},
	  \"volumeCapabilities\": [{\"mount\": {\"fsType\": \"ext4\"},
	                          \"accessMode\": {\"mode\": \"SINGLE_NODE_WRITER\"}}],
	  \"parameters\": {\"pillar-csi.bhyoo.com/storage-class\": \"fast\"},
	  \"volumeContentSource\": {\"snapshot\": {\"snapshotId\": \"$1\"}}}"
}
expect_error "CreateVolume from a snapshot ID with ../: NOT_FOUND" NOT_FOUND 'not found' \
	restore storage-1/snapshot/file/files/../pvc-1
expect_error "CreateVolume from a volume ID given as a snapshot ID: NOT_FOUND" NOT_FOUND \
	'not found' restore "$VOL1"
expect_error "CreateVolume from a 70000-byte snapshot ID: NOT_FOUND" NOT_FOUND 'not found' \
	restore "$LONG"
agent_snap() { # METHOD JSON-MEMBERS
	pc call "$AGENT" "/pillar_csi.agent.v1.AgentService/$1" "{$2, \"backendType\": 6,
	  \"fence\": {\"volumeUid\": \"u-snap\", \"generation\": \"1\"}}"
}
expect_error "agent CreateSnapshot snapshot_id files/../../x: INVALID_ARGUMENT" \
	INVALID_ARGUMENT '' agent_snap CreateSnapshot \
	'"snapshotId": "files/../../x", "sourceVolumeId": "files/pvc-1"'
expect_error "agent CreateSnapshot source_volume_id files/../pvc-1: INVALID_ARGUMENT" \
	INVALID_ARGUMENT '' agent_snap CreateSnapshot \
	'"snapshotId": "files/s1", "sourceVolumeId": "files/../pvc-1"'
expect_error "agent CreateSnapshot of a 70000-byte snapshot_id: INVALID_ARGUMENT" \
	INVALID_ARGUMENT '' agent_snap CreateSnapshot \
	"\"snapshotId\": \"files/$LONG\", \"sourceVolumeId\": \"files/pvc-1\""
expect_error "agent DeleteSnapshot snapshot_id ../x: INVALID_ARGUMENT" INVALID_ARGUMENT '' \
	agent_snap DeleteSnapshot '"snapshotId": "../x"'
check "no file appeared or went in the volume directory" sh -c \
	"ls '$D/volumes' | cmp -s - '$D/volumes.before'"

# ---- a record with a raw control byte inside a string: invalid JSON (RFC 8259 §7) ------------
REC9=$D/store/pillarvolumestates/pvc-9.json
sed 's/pvc-2/pvc-9/g; s/"pvc-9"/"pvc-9\x01"/' "$D/pvc-2.backup" > "$D/rec" && mv "$D/rec" "$REC9"
pc get pvst > "$D/get.out" 2> "$D/get.err"
check "a record holding a raw control byte is an error row naming the field" \
	grep -q "^pvc-9 .*contains a control character" "$D/get.out"
check "the readable volumes are still listed beside it" grep -q '^pvc-2 ' "$D/get.out"
check "the controller still answers" pc call "$CSI" /csi.v1.Identity/Probe
check "the record with the control byte is left as it was" grep -q "$(printf '\001')" "$REC9"

cleanup
trap - EXIT
[ "$failed" -eq 0 ]
