#!/bin/sh
# e2e-topology: a
# e2e-fast: no
# e2e-order: 80
# e2e-timeout: 420
# Disk full on a real kernel (issue 15): the agent's state directory and the node's stage-record
# directory each on a 4 MiB ext4 filesystem on a loop device, and an embedded store on a third.
# Filled up, each durable write fails with an error naming the file and ENOSPC, the previous
# record stays whole, and the same operation succeeds once space returns.
. /e2e/lib/e2e.sh
. /e2e/scenarios/node-lib.inc
scenario_begin

# small_fs DIR NAME : a 4 MiB ext4 on a loop device mounted at DIR
small_fs() {
  truncate -s 4M "/tmp/$2.img" && mkfs.ext4 -q -F "/tmp/$2.img" && mkdir -p "$1" &&
    mount -o loop "/tmp/$2.img" "$1" || fail "a small ext4 at $1"
}
# fill DIR : one big file until ENOSPC, then small ones until not even one more fits
fill() {
  dd if=/dev/zero of="$1/filler" bs=64k 2>/dev/null || true
  _i=0
  while [ $_i -lt 5000 ] && echo x 2>/dev/null >"$1/filler.$_i"; do _i=$((_i + 1)); done
  sync
  assert_not sh -c "echo x >'$1/probe'" 2>/dev/null
  log "$1 full ($(df -k "$1" | awk 'NR==2{print $4}') KiB left, $_i small files)"
}
unfill() { rm -f "$1"/filler*; sync; }
grant() { echo "\"volume_id\":\"$(agent_vid dfv)\",\"protocol_type\":\"PROTOCOL_TYPE_NVMEOF_TCP\",\"initiator_id\":\"$HOSTNQN\",\"fence\":{\"volume_uid\":\"uid-df\",\"generation\":$1}"; }

small_fs "$AGENT_STATE" agent
small_fs "$NODE_STATE" node
node_setup
vol_provision dfv 64 uid-df
MARK="$AGENT_STATE/generations/$(agent_vid dfv | sed 's|/|_2F|g').mark"
assert_match "$(cat "$MARK")" '"generation":1' "the fencing mark after the grant of generation 1"

step "agent state directory full: a grant is refused naming the mark and ENOSPC; the mark stays"
fill "$AGENT_STATE"
must_fail RESOURCE_EXHAUSTED "write $MARK: No space left on device \\(ENOSPC\\)\$" \
  agent_call AllowInitiator "{$(grant 2)}"
assert_match "$(cat "$MARK")" '"generation":1' "the mark after the refused grant (whole, unchanged)"
assert_eq "$(ls -a "${MARK%/*}" | grep -c '\.tmp\.')" 0 "temporary files left in generations/"
unfill "$AGENT_STATE"
must agent_call AllowInitiator "{$(grant 2)}" >/dev/null
assert_match "$(cat "$MARK")" '"generation":2' "the mark once space returned"

step "stage-record directory full: NodeStageVolume fails naming the record and ENOSPC, then works"
fill "$NODE_STATE"
mkdir -p "$(staging_of dfv)"
REQ="{\"volume_id\":\"$(csi_vid dfv)\",\"staging_target_path\":\"$(staging_of dfv)\",\"volume_capability\":$(cap_json block),\"volume_context\":$(ctx_json dfv block 30 2)}"
must_fail RESOURCE_EXHAUSTED "write stage record: write $(record_of dfv): No space left on device \\(ENOSPC\\)\$" node_call NodeStageVolume "$REQ"
assert_not [ -e "$(record_of dfv)" ]
unfill "$NODE_STATE"
must node_call NodeStageVolume "$REQ" >/dev/null
assert_match "$(cat "$(record_of dfv)")" '"access_type"' "the stage record once space returned"
must node_call NodeUnstageVolume "{\"volume_id\":\"$(csi_vid dfv)\",\"staging_target_path\":\"$(staging_of dfv)\"}" >/dev/null

step "embedded store full: apply refused naming the file and ENOSPC, the stored object unchanged"
STORE=/run/e2e/dfstore
small_fs "$STORE" store
obj() { echo "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarAgent\",\"metadata\":{\"name\":\"df\"},\"spec\":{\"external\":{\"address\":\"$1\",\"port\":9500}}}"; }
obj 10.0.0.1 > /tmp/df1.json
obj 10.0.0.2 > /tmp/df2.json
must "$E2E_BIN" apply -f /tmp/df1.json --store=dir:$STORE >/dev/null
fill "$STORE"
if "$E2E_BIN" apply -f /tmp/df2.json --store=dir:$STORE >/tmp/df.out 2>&1; then fail "apply on a full store succeeded"; fi
assert_match "$(cat /tmp/df.out)" "$STORE/.*: No space left on device \\(ENOSPC\\)" "apply's error on a full store"
assert_match "$("$E2E_BIN" get pa df -o json --store=dir:$STORE)" '"address":[[:space:]]*"10.0.0.1"' "the stored object after the refused apply"
unfill "$STORE"
must "$E2E_BIN" apply -f /tmp/df2.json --store=dir:$STORE >/dev/null
assert_match "$("$E2E_BIN" get pa df -o json --store=dir:$STORE)" '"address":[[:space:]]*"10.0.0.2"' "the stored object once space returned"
scenario_end
