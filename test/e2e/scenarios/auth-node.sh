#!/bin/sh
# e2e-topology: a
# e2e-fast: no
# e2e-kernel: backports
# e2e-timeout: 600
# NVMe in-band authentication through pillar-csi on bookworm-backports' 6.12: the node plugin
# (--dhchap) makes its own keys; our agent, driven by `pillar-csi call` in the controller's part
# with the keys the controller would read from the node's Secret, installs them with the host's
# ACL entry; the node stages a bidirectional volume with them and the worker does I/O. An
# impostor with the worker's host NQN and host ID and no key, or a wrong one, is refused by the
# kernel; the controller's confirmation (a CSINode annotation in the node's embedded store)
# makes the keys current, and `pillar-csi dhchap rotate` during writes brings two generations
# (a new host secret, then a new controller secret) each to the target and then to the live
# controller without a failed re-authentication or an I/O error, after which the old key is
# refused; a target presenting a wrong controller key is refused by the host (the stage answers
# UNAVAILABLE naming the generation); a storage reboot restores the authenticated export (keys
# re-installed by ReconcileState before the port) with the namespace identity unchanged and the
# data intact. Finally no key material (DHHC-1 text, base64 or hex of a key) in any role log
# (--v=5), stage record or agent state file.
. /e2e/lib/e2e.sh
. /e2e/scenarios/node-lib.inc
scenario_begin

NSTORE=/run/e2e/node-store   # the embedded store: CSINode and Node annotations
NODE_ARGS="--dhchap --v=5 --store=dir:$NSTORE"
CTX_EXTRA=',"pillar-csi.bhyoo.com/dhchap":"bidirectional"'
V=auth1
U=5e2e0028-0000-4000-8000-00000000a001

step "the backports kernel, built with NVMe authentication"
assert_match "$(uname -r)" '^6\.12\.' "kernel release"
node_setup

step "worker: the node plugin made its DH-HMAC-CHAP keys (0600, unconfirmed: next, DHHC-1:03)"
KF=$NODE_STATE/dhchap.key
assert_eq "$(stat -c %a "$KF")" 600 "key file mode"
KJ=$(tr -d '\n' < "$KF")
KEY=$(jstr "$KJ" key); CKEY=$(jstr "$KJ" ctrlKey); GEN=$(jnum "$KJ" generation)
assert_match "$KEY" '^DHHC-1:03:[A-Za-z0-9+/]{91}=:$' "the host secret's representation"
assert_match "$CKEY" '^DHHC-1:03:[A-Za-z0-9+/]{91}=:$' "the controller secret's representation"
assert_ne "$KEY" "$CKEY" "host and controller secrets"
assert_match "$KJ" '"next":' "unconfirmed keys are next"
assert_match "$GEN" '^[0-9]{10}$' "generation (the Unix time of making)"

# auth_json KEY CKEY : the HostAuth the controller sends with this worker's grant
auth_json() {
  echo "{\"host_nqn\":\"$HOSTNQN\",\"hash\":\"sha256\",\"dh_group\":\"ffdhe2048\",\"dhchap_key\":\"$1\",\"dhchap_ctrl_key\":\"$2\",\"generation\":\"$GEN\"}"
}
allow_auth() {
  must agent_call AllowInitiator "{\"volume_id\":\"$(agent_vid $V)\",\"protocol_type\":\"PROTOCOL_TYPE_NVMEOF_TCP\",\"initiator_id\":\"$HOSTNQN\",\"auth\":$(auth_json "$1" "$2"),$(fence $U)}" >/dev/null
}
H=hosts/$HOSTNQN

step "storage: the agent exports with the host's ACL entry and installs its keys"
_r=$(must agent_call CreateVolume "{\"volume_id\":\"$(agent_vid $V)\",\"capacity_bytes\":33554432,\"backend_type\":\"BACKEND_TYPE_FILE\",\"backend_params\":{\"file\":{\"pool\":\"$POOL\"}},$(fence $U)}")
must agent_call ExportVolume "{\"volume_id\":\"$(agent_vid $V)\",\"protocol_type\":\"PROTOCOL_TYPE_NVMEOF_TCP\",\"export_params\":$(tcp_params),\"acl_enabled\":true,$(fence $U)}" >/dev/null
allow_auth "$KEY" "$CKEY"
export_check $V
assert_eq "$(on_storage "cfg_read $H/dhchap_key")" "$KEY" "the host entry's dhchap_key"
assert_eq "$(on_storage "cfg_read $H/dhchap_ctrl_key")" "$CKEY" "the host entry's dhchap_ctrl_key"
assert_eq "$(on_storage "cfg_read $H/dhchap_hash")" "hmac(sha256)" "the host entry's dhchap_hash"

step "an impostor with the worker's host NQN and host ID is refused: no key, a wrong key"
E2E_HOSTNQN=$HOSTNQN   # nvme_connect claims the worker's host NQN
OPTS="hostid=$(cat /etc/nvme/hostid),ctrl_loss_tmo=2,reconnect_delay=1"
# The host may miss the target's refusal and wait for its admin timeout (see auth-kernel.sh):
# the timeout is short while the impostor connects, and the refusal is the target's message.
ADMIN_TMO=/sys/module/nvme_core/parameters/admin_timeout
impostor() {
  _at=$(cat $ADMIN_TMO); echo 10 > $ADMIN_TMO
  if nvme_connect "$(nqn_of $V)" "$STORAGE_IP" 4420 "$OPTS${2:+,$2}" >/dev/null 2>&1; then
    echo "$_at" > $ADMIN_TMO
    fail "$1: the connect succeeded"
  fi
  echo "$_at" > $ADMIN_TMO
  assert_eq "$(ctrls_of $V | wc -w)" 0 "controllers after $1"
}
mark nokey
impostor "a connect without a key"
expect_dmesg nokey 'ret=-126' "the kernel's ENOKEY for the impostor without a key"
WRONG=$(nvme gen-dhchap-key --hmac=3 --nqn="$HOSTNQN" | tr -d '\n')
mark wrongkey
impostor "a connect with a wrong key" "dhchap_secret=$WRONG"
expect_dmesg wrongkey 'nvmet: ctrl [0-9]+ qid 0 host response mismatch' "the target refuses the impostor's wrong key"

step "the worker stages the bidirectional volume with its keys and does I/O"
stage $V block 60 2
C=$(ctrls_of $V)
assert_eq "$(sysfs_read /sys/class/nvme/nvme$C/dhchap_secret)" "$KEY" "the controller's dhchap_secret"
assert_eq "$(sysfs_read /sys/class/nvme/nvme$C/dhchap_ctrl_secret)" "$CKEY" "the controller's dhchap_ctrl_secret"
DEV=$(staging_of $V)/device
SUM=$(data_write "$DEV" 4)
data_verify "$DEV" "$SUM" "data written over the authenticated connection"

# confirm GEN : the controller's confirmation, the CSINode annotation (as a merge patch would)
confirm() {
  "$E2E_BIN" get csinode "$NODE_ID" -o json --store=dir:$NSTORE > /tmp/csinode.json ||
    fail "get CSINode"
  sed -i '/"pillar-csi.bhyoo.com\/dhchap-generation": "[0-9]*",\{0,1\}$/d' /tmp/csinode.json
  sed -i "s|\"annotations\": {|\"annotations\": {\"pillar-csi.bhyoo.com/dhchap-generation\": \"$1\",|" /tmp/csinode.json
  "$E2E_BIN" apply -f /tmp/csinode.json --store=dir:$NSTORE >/dev/null || fail "apply CSINode"
}
keys_current() { tr -d '\n' < "$KF" | grep -q "\"current\":{\"generation\":$1,"; }
step "the controller confirms the first generation: the node makes it current"
confirm "$GEN"
wait_for 30 "generation $GEN current in the key file" keys_current "$GEN"
assert_not grep -q '"next"' "$KF"

step "rotation on request during writes: two generations, one secret each, target then live controller"
dd if=/dev/urandom of=/tmp/rot.bin bs=1M count=12 2>/dev/null
mark rotate
bg_start rotwriter sh_true "dd if=/tmp/rot.bin of=$DEV bs=64k oflag=direct conv=fsync 2>/tmp/rot.err"
"$E2E_BIN" dhchap rotate "$NODE_ID" --store=dir:$NSTORE || fail "pillar-csi dhchap rotate"
# next_keys : KEY2, CKEY2, GEN2 from the key file's next generation
next_keys() {
  KJ=$(tr -d '\n' < "$KF" | sed 's/.*"next"://')
  KEY2=$(jstr "$KJ" key); CKEY2=$(jstr "$KJ" ctrlKey); GEN2=$(jnum "$KJ" generation)
}
wait_for 30 "the first half (next) in the key file" grep -q '"next"' "$KF"
next_keys
assert_ne "$KEY2" "$KEY" "the first half's new host secret"
assert_eq "$CKEY2" "$CKEY" "the first half's controller secret (unchanged)"
check "[ $GEN2 -gt $GEN ]" "the first half's generation ($GEN2) is above the old one ($GEN)"
assert_match "$(tr -d '\n' < "$KF")" '"ctrlKeyDue":true' "the key file owes the second half"
assert_eq "$(sysfs_read /sys/class/nvme/nvme$C/dhchap_secret)" "$KEY" "the live controller keeps the old key until the confirmation"
GEN_OLD=$GEN; GEN=$GEN2
allow_auth "$KEY2" "$CKEY2"   # the controller delivers the new generation to the agent
confirm "$GEN2"
wait_for 30 "the live controller has the new host secret" sh_true \
  "[ \"\$(sysfs_read /sys/class/nvme/nvme$C/dhchap_secret)\" = '$KEY2' ]"
wait_for 30 "the second half (next) in the key file, the first current" \
  sh_true "keys_current $GEN2 && grep -q '\"next\"' '$KF'"
assert_eq "$(sysfs_read /sys/class/nvme/nvme$C/dhchap_ctrl_secret)" "$CKEY" "the live controller's controller secret after the first half"
KEY1=$KEY2
next_keys
assert_eq "$KEY2" "$KEY1" "the second half's host secret (unchanged)"
assert_ne "$CKEY2" "$CKEY" "the second half's new controller secret"
assert_not grep -q ctrlKeyDue "$KF"
GEN=$GEN2
allow_auth "$KEY2" "$CKEY2"
confirm "$GEN2"
wait_for 30 "the live controller has the new controller secret" sh_true \
  "[ \"\$(sysfs_read /sys/class/nvme/nvme$C/dhchap_ctrl_secret)\" = '$CKEY2' ]"
wait_for 30 "generation $GEN2 current" keys_current "$GEN2"
assert_not grep -q '"next"' "$KF"
wait_for 120 "the writer during the rotation finished" bg_done rotwriter
assert_eq "$(bg_rc rotwriter)" 0 "the writer's exit status (I/O errors: $(cat /tmp/rot.err))"
assert_eq "$(nvme_ctrl_state "$C")" live "the controller after the rotation"
assert_eq "$(ctrls_of $V)" "$C" "the same controller after the rotation"
log "kernel during the rotation: $(dmesg_since rotate | grep -i -E 'auth|nvme' | tail -5 | tr '\n' '|')"
assert_eq "$(count_dmesg rotate "nvme$C: re-authenticating controller")" 2 "re-authentications the rotation started (one per generation)"
assert_eq "$(count_dmesg rotate 'authentication failed|I/O error|ret=-129|fatal error|Successfully reconnected|starting error recovery')" 0 "failed re-authentications, reconnects or I/O errors during the rotation"
check "cmp -n 12582912 /tmp/rot.bin $DEV" "the data written during the rotation"
SUM=$(data_sum "$DEV")
KEY_OLD=$KEY; CKEY_OLD=$CKEY; KEY=$KEY2; CKEY=$CKEY2
unstage $V
step "the old key is refused by the target at the next authentication"
impostor "a connect with the old key" "dhchap_secret=$KEY_OLD"

step "bidirectional: a target presenting a wrong controller key is refused by the host"
WRONGC=$(nvme gen-dhchap-key --hmac=3 --nqn="$HOSTNQN" | tr -d '\n')
allow_auth "$KEY" "$WRONGC"
mkdir -p "$(staging_of $V)"
must_fail UNAVAILABLE ".*EKEYREJECTED.*keys of generation $GEN" node_call NodeStageVolume \
  "{\"volume_id\":\"$(csi_vid $V)\",\"staging_target_path\":\"$(staging_of $V)\",\"volume_capability\":$(cap_json block),\"volume_context\":$(ctx_json $V block 60 2)}"
assert_eq "$(ctrls_of $V | wc -w)" 0 "controllers after the refused stage"
allow_auth "$KEY" "$CKEY"
stage $V block 60 2
data_verify "$DEV" "$SUM" "data after the right controller key is back"

step "storage reboot: the restore re-installs the keys before the port; identity unchanged"
storage_down
storage_up
must_fail UNAVAILABLE 'export restore pending' agent_call ExportVolume \
  "{\"volume_id\":\"$POOL/nothing\",\"protocol_type\":\"PROTOCOL_TYPE_NVMEOF_TCP\",\"export_params\":$(tcp_params),\"acl_enabled\":true,$(fence u0)}"
_r=$(must agent_call ReconcileState "{\"volumes\":[{\"volume_id\":\"$(agent_vid $V)\",\"backend_type\":\"BACKEND_TYPE_FILE\",\"backend_params\":{\"file\":{\"pool\":\"$POOL\"}},\"exports\":[{\"protocol_type\":\"PROTOCOL_TYPE_NVMEOF_TCP\",\"export_params\":$(tcp_params),\"allowed_initiators\":[\"$HOSTNQN\"],\"acl_enabled\":true,\"host_auth\":[$(auth_json "$KEY" "$CKEY")]}],$(fence $U)}],\"complete\":true}")
assert_match "$_r" '"success": *true' "ReconcileState with host_auth"
export_check $V
assert_eq "$(on_storage "cfg_read $H/dhchap_key")" "$KEY" "the host entry's dhchap_key after the restore"
wait_for 60 "the controller is live again" nvme_ctrl_is "$C" live
data_verify "$DEV" "$SUM" "data after the storage reboot"
assert_eq "$(ctrls_of $V)" "$C" "the same controller (reconnected, authenticated)"
unstage $V

step "no key material in any log, record or state file"
b64() { printf '%s' "$1" | cut -d: -f3; }
hexkey() { b64 "$1" | base64 -d 2>/dev/null | head -c 64 | od -An -tx1 | tr -d ' \n'; }
for _k in "$KEY" "$CKEY" "$KEY_OLD" "$CKEY_OLD"; do
  for _p in "DHHC-1" "$(b64 "$_k")" "$(hexkey "$_k")"; do
    [ ${#_p} -ge 6 ] || fail "scan pattern too short"
    for _side in worker storage; do
      _n=$(_on $_side "cat \"\$(role_home)\"/logs/*.log 2>/dev/null" | grep -c -F -- "$_p" || true)
      assert_eq "$_n" 0 "lines with key material in the $_side role logs"
    done
    _n=$(find "$NODE_STATE" -type f ! -name dhchap.key -exec cat {} + 2>/dev/null | grep -c -F -- "$_p" || true)
    assert_eq "$_n" 0 "key material in the node's state directory (records)"
    _n=$(on_storage "find $AGENT_STATE -type f -exec cat {} + 2>/dev/null | grep -c -F -- '$_p' || true")
    assert_eq "$_n" 0 "key material in the agent's state directory"
  done
done
assert_match "$(role_log node)" 'dhchap_secret=\(secret\),dhchap_ctrl_secret=\(secret\)' "the node's connect line, redacted"

scenario_end
