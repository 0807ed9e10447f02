#!/bin/sh
# e2e-topology: a
# e2e-fast: yes
# e2e-order: 72
# e2e-kernel: backports
# e2e-timeout: 600
# e2e-kube: yes
# e2e-kube-values: dhchap: {enabled: true}
# NVMe in-band authentication through the whole system on bookworm-backports' 6.12
# (docs/authentication.md), on the test API server (kube-lib.inc) under the chart's RBAC with
# dhchap.enabled: the agent serves mutual TLS (throwaway certificates from the host); the
# controller runs with --dhchap and the agent mTLS flags, the node plugin with --dhchap, every
# role at --v=5. The node makes its keys and publishes them in its Secret, the controller
# confirms them on the CSINode; a PillarProtocol with `dhchap: {}` (bidirectional) gets a PVC
# provisioned, attached (the controller installs the worker's keys with the host's ACL entry),
# staged and published by the stand-ins of outage-lib.inc, and a writer runs on it. Proves:
#  a. an impostor with the worker's host NQN and host ID is refused by the kernel without a key
#     (the host's ENOKEY) and with a wrong one (the target's "host response mismatch") while the
#     worker writes;
#  b. a target that presents a wrong controller key is refused by the worker's kernel with the
#     worker's own keys (EKEYREJECTED); the controller's next pass puts the right key back;
#  c. `pillar-csi dhchap rotate` through the controller during the writes: two generations, a
#     new host secret then a new controller secret, each through its Secret, the target, the
#     CSINode annotation and one write to the live controller; the old Secrets deleted; no
#     failed authentication, no reconnect, no I/O error, the same controller, the writer goes
#     on; the old keys are refused at the next authentication;
#  d. a storage reboot: the controller's one complete ReconcileState re-installs the keys, the
#     worker reconnects on the same controller, NSID/UUID/NGUID unchanged, data intact;
#  e. no key material in any role log, in the objects, or in the roles' state directories.
. /e2e/lib/e2e.sh
. /e2e/scenarios/kube-lib.inc
scenario_begin

step "the backports kernel, built with NVMe authentication"
assert_match "$(uname -r)" '^6\.12\.' "kernel release"
kube_up

step "mutual TLS between the controller and the agent (certificates made on the host)"
TW=/run/e2e/tls; TS=$E2E_STATE/tls   # the controller's (worker) and the agent's (storage disk)
mkdir -p "$TW" "$TS"
for f in ca.crt agent.crt agent.key; do
  kube_rpc mtls "$STORAGE_IP" $f > "$TS/$f" || fail "mTLS material $f: $(cat "$TS/$f")"
done
for f in ca.crt controller.crt controller.key; do
  kube_rpc mtls "$STORAGE_IP" $f > "$TW/$f" || fail "mTLS material $f: $(cat "$TW/$f")"
done
chmod 600 "$TS/agent.key" "$TW/controller.key"
state_sync
AGENT_EXTRA="--tls-cert=$TS/agent.crt --tls-key=$TS/agent.key --tls-ca=$TS/ca.crt --v=5"
CTL_EXTRA="--dhchap --agent-tls-cert=$TW/controller.crt --agent-tls-key=$TW/controller.key
  --agent-tls-ca=$TW/ca.crt --v=5"
NODE_EXTRA="--dhchap --v=5"
AGENT_CALL_FLAGS="--tls-ca=$TW/ca.crt --tls-cert=$TW/controller.crt --tls-key=$TW/controller.key"
. /e2e/scenarios/outage-lib.inc

KF=/run/e2e/node/dhchap.key
H=hosts/$HOSTNQN
# kf_part SECTION N : field N (1 generation, 2 host secret, 3 controller secret) of the key
# file's SECTION (current or next); empty when there is none
kf_part() {
  tr -d '\n ' < "$KF" 2>/dev/null |
    sed -n 's/.*"'"$1"'":{"generation":\([0-9]*\),"key":"\([^"]*\)","ctrlKey":"\([^"]*\)"}.*/\'"$2"'/p'
}
secrets() {
  kubectl get secrets -n pillar-csi -l pillar-csi.bhyoo.com/dhchap=host-keys -o name | sort | tr '\n' ' '
}
csinode_gen() {
  kubectl get csinode $NODE -o jsonpath='{.metadata.annotations.pillar-csi\.bhyoo\.com/dhchap-generation}'
}
target_key() { on_storage "cfg_read $H/$1"; }

step "configuration: PillarAgent (mTLS), PillarStore, PillarProtocol auth (dhchap: {})"
cat > /tmp/objects.json <<EOF
[{"apiVersion":"$P/v1alpha1","kind":"PillarAgent","metadata":{"name":"$AGENT"},
  "spec":{"external":{"address":"$STORAGE_IP","port":9500}}},
 {"apiVersion":"$P/v1alpha1","kind":"PillarStore","metadata":{"name":"files"},
  "spec":{"agentRef":"$AGENT","backend":{"file":{"pool":"fp"}}}},
 {"apiVersion":"$P/v1alpha1","kind":"PillarProtocol","metadata":{"name":"auth"},
  "spec":{"protocol":{"nvmeofTcp":{"port":4420,"acl":true,"ctrlLossTmo":120,"reconnectDelay":2,"dhchap":{}}}}},
 {"apiVersion":"$P/v1alpha1","kind":"PillarStorageClass","metadata":{"name":"auth"},
  "spec":{"storeRef":"files","protocolRef":"auth"}}]
EOF
out=$("$B" apply -f /tmp/objects.json $CLI_STORE) || fail "pillar-csi apply: $out"
wait_for 90 "PillarAgent ExportsReady=True/ExportsServing" cond_is pa $AGENT ExportsReady True/ExportsServing
assert_eq "$(cond pa $AGENT AgentConnected)" True/Authenticated "PillarAgent AgentConnected (mutual TLS)"
assert_eq "$(kubectl get pa $AGENT -o jsonpath='{.status.capabilities.nvmeTargetAuth}')" true \
  "PillarAgent status.capabilities.nvmeTargetAuth (the 6.12 target)"
wait_for 60 "PillarStorageClass auth Ready and its StorageClass" \
  sh_true "[ \"\$(cond psc auth Ready | cut -d/ -f1)\" = True ] && kubectl get sc auth >/dev/null 2>&1"

step "worker: the node's keys, published in its Secret and confirmed by the controller"
wait_for 90 "the controller confirms the node's first keys (current in the key file)" \
  sh_true '[ -n "$(kf_part current 1)" ]'
assert_eq "$(stat -c %a "$KF")" 600 "key file mode"
GEN=$(kf_part current 1); KEY=$(kf_part current 2); CKEY=$(kf_part current 3)
assert_match "$KEY" '^DHHC-1:03:[A-Za-z0-9+/]{91}=:$' "the host secret's representation"
assert_match "$CKEY" '^DHHC-1:03:[A-Za-z0-9+/]{91}=:$' "the controller secret's representation"
assert_eq "$(csinode_gen)" "$GEN" "CSINode $NODE dhchap-generation annotation"
assert_eq "$(secrets)" "secret/pillar-csi-dhchap-$NODE-$GEN " "the node's key Secrets"

step "provision and attach a claim of class auth: the controller installs the worker's keys"
claim vol auth; provision vol; attach vol
assert_match "$(get CTX vol)" "\"$P/dhchap\":\"bidirectional\"" "the volume context's dhchap mode"
assert_eq "$(kubectl get pvst "$(get PV vol)" -o jsonpath='{.spec.resolved.protocol.nvmeofTcp.dhchap}')" \
  '{"bidirectional":true,"dhGroup":"ffdhe2048","hash":"sha256"}' "the volume's resolved dhchap"
assert_eq "$(target_key dhchap_key)" "$KEY" "the target's dhchap_key for $HOSTNQN"
assert_eq "$(target_key dhchap_ctrl_key)" "$CKEY" "the target's dhchap_ctrl_key"
assert_eq "$(target_key dhchap_hash)" "hmac(sha256)" "the target's dhchap_hash"
assert_eq "$(target_key dhchap_dhgroup)" ffdhe2048 "the target's dhchap_dhgroup"
NQN=$(get NQN vol)
assert_eq "$(on_storage "ls \$NVMET/subsystems/$NQN/allowed_hosts")" "$HOSTNQN" "hosts admitted"

step "kubelet stages and publishes it: an authenticated connection, data written"
pod_make app vol ""
pod_mount app vol
C=$(ctrl_of vol)
assert_eq "$(echo "$C" | wc -w)" 1 "NVMe controllers of the volume"
assert_eq "$(sysfs_read /sys/class/nvme/nvme$C/dhchap_secret)" "$KEY" "the controller's dhchap_secret"
assert_eq "$(sysfs_read /sys/class/nvme/nvme$C/dhchap_ctrl_secret)" "$CKEY" "the controller's dhchap_ctrl_secret"
HOSTID=$(sysfs_read /sys/class/nvme/nvme$C/hostid)
TGT=$(target_of app vol)
S1=$(data_write "$TGT/a.bin" 4)

# a writer on the volume until stopped: 4 MiB O_DIRECT + fsync rounds, the count in a file
dd if=/dev/urandom of=/tmp/w.bin bs=1M count=4 2>/dev/null
writer_start() {
  rm -f /run/e2e/w.stop /run/e2e/w.count /run/e2e/w.failed
  bg_start writer sh_true "n=0; while [ ! -e /run/e2e/w.stop ]; do
      dd if=/tmp/w.bin of=$TGT/w.bin bs=64k oflag=direct conv=fsync 2>>/tmp/w.err ||
        { touch /run/e2e/w.failed; break; }
      n=\$((n + 1)); echo \$n > /run/e2e/w.count.new; mv /run/e2e/w.count.new /run/e2e/w.count
    done; [ ! -e /run/e2e/w.failed ]"
}
writes() { cat /run/e2e/w.count 2>/dev/null || echo 0; }
# writer_rounds N : the writer completes N more rounds
writer_rounds() {
  _w0=$(writes)
  wait_for 120 "$1 more rounds of the writer" sh_true "[ \$(writes) -ge $((_w0 + $1)) ] || bg_done writer"
  bg_done writer && fail "the writer stopped: $(cat /tmp/w.err 2>/dev/null)"
  return 0
}
writer_stop() {
  touch /run/e2e/w.stop
  wait_for 120 "the writer stops" bg_done writer
  assert_eq "$(bg_rc writer)" 0 "the writer's status (I/O errors: $(cat /tmp/w.err 2>/dev/null))"
  cmp /tmp/w.bin "$TGT/w.bin" || fail "the writer's data"
}
# impostor WHAT OPTS : a connect as the worker (its host NQN and host ID) with OPTS is refused
# and leaves the worker's one controller alone (duplicate_connect: the kernel would otherwise
# refuse a second controller to the same target before any authentication). When the target
# refuses a key it ends the connection right after its failure message, and the host either
# reads that message (EKEYREJECTED) or waits for its admin timeout: a new controller's admin
# timeout is nvme_core's admin_timeout when it is made, so it is short for the impostor only.
E2E_HOSTNQN=$HOSTNQN
ADMIN_TMO=/sys/module/nvme_core/parameters/admin_timeout
impostor() {
  _at=$(cat $ADMIN_TMO); echo 10 > $ADMIN_TMO
  if nvme_connect "$NQN" "$STORAGE_IP" 4420 \
       "hostid=$HOSTID,duplicate_connect,ctrl_loss_tmo=2,reconnect_delay=1${2:+,$2}" >/dev/null 2>&1; then
    echo "$_at" > $ADMIN_TMO
    fail "$1: the connect succeeded"
  fi
  echo "$_at" > $ADMIN_TMO
  assert_eq "$(ctrl_of vol)" "$C" "controllers of the volume after $1"
}

step "a: impostors with the worker's host NQN and host ID are refused while the worker writes"
writer_start
writer_rounds 1
mark nokey
impostor "a connect without a key"
expect_dmesg nokey 'ret=-126' "the kernel's ENOKEY for the impostor without a key"
WRONG=$(nvme gen-dhchap-key --hmac=3 --nqn="$HOSTNQN" | tr -d '\n')
mark wrongkey
impostor "a connect with a wrong key" "dhchap_secret=$WRONG"
expect_dmesg wrongkey 'nvmet: ctrl [0-9]+ qid 0 host response mismatch' "the target refuses the impostor's wrong key"
writer_rounds 1
assert_eq "$(nvme_ctrl_state "$C")" live "the worker's controller"

step "b: a target presenting a wrong controller key is refused by the worker's own keys"
CPID=$(cat /run/e2e/roles/controller.pid)
kill -STOP "$CPID"   # no pass of the controller rewrites the entry meanwhile
WRONGC=$(nvme gen-dhchap-key --hmac=3 --nqn="$HOSTNQN" | tr -d '\n')
on_storage "cfg_write '$WRONGC' \$NVMET/$H/dhchap_ctrl_key" || { kill -CONT "$CPID"; fail "writing a wrong controller key"; }
mark wrongctrl
impostor "a connect with the worker's keys to a target with a wrong controller key" \
  "dhchap_secret=$KEY,dhchap_ctrl_secret=$CKEY"
expect_dmesg wrongctrl 'ret=-129' "the worker's kernel refuses the target (EKEYREJECTED)"
kill -CONT "$CPID"
wait_for 60 "the controller's next pass puts the right controller key back" \
  sh_true '[ "$(target_key dhchap_ctrl_key)" = "$CKEY" ]'
writer_rounds 1

step "c: rotation through the controller during the writes: two generations, one secret each"
NL0=$(role_log node | wc -l)
# rotation_log ERE : the node's log lines since the rotation request that match ERE
rotation_log() { role_log node | sed -n "$((NL0 + 1)),\$p" | grep -E -- "$1" || true; }
# log_field LINE KEY : the quoted value of KEY="…" in a log line
log_field() { printf '%s' "$1" | sed -n 's/.* '"$2"'="\([^"]*\)".*/\1/p'; }
sysfs_key() { sysfs_read /sys/class/nvme/nvme$C/$1; }
FATAL0=$(dmesg | grep -c 'fatal error occurred' || true)
mark rotate
out=$("$B" dhchap rotate $NODE $CLI_STORE) || fail "pillar-csi dhchap rotate: $out"
assert_match "$out" "^node/$NODE: DH-HMAC-CHAP rotation requested" "the verb's answer"
t=$(up)
# Each half takes one pass of the controller (its 30 s resync) to reach the agent and the
# CSINode; only then does the node write the live controller. A secret once changed in sysfs
# stays changed, so these waits observe no race.
wait_for 120 "the first half: the live controller has a new host secret" \
  sh_true "[ \"\$(sysfs_key dhchap_secret)\" != '$KEY' ]"
echo "@@TIME rotation request to the live controller's new host secret: $(since "$t")s" >&2
KEY2=$(sysfs_key dhchap_secret)
wait_for 120 "the second half: the live controller has a new controller secret" \
  sh_true "[ \"\$(sysfs_key dhchap_ctrl_secret)\" != '$CKEY' ]"
echo "@@TIME rotation request to the live controller's new controller secret: $(since "$t")s" >&2
CKEY2=$(sysfs_key dhchap_ctrl_secret)
assert_eq "$(sysfs_key dhchap_secret)" "$KEY2" "the live controller's host secret after the second half"
wait_for 30 "the rotation's last generation current in the key file" \
  sh_true '[ "$(kf_part current 3)" = "$CKEY2" ] && [ -z "$(kf_part next 1)" ]'
GEN2=$(kf_part current 1)
assert_eq "$(kf_part current 2)" "$KEY2" "the key file's host secret"
assert_not grep -q ctrlKeyDue "$KF"
echo "@@TIME rotation request to the live controller re-keyed: $(since "$t")s" >&2
# the node made two generations, a new host secret and then a new controller secret, and wrote
# each live controller once per generation, one attribute each
MADE=$(rotation_log 'made new DH-HMAC-CHAP keys \(rotation\)')
assert_eq "$(printf '%s\n' "$MADE" | grep -c .)" 2 "generations the rotation made"
M1=$(printf '%s\n' "$MADE" | head -1); M2=$(printf '%s\n' "$MADE" | tail -1)
GEN1=$(log_field "$M1" generation)
assert_eq "$(log_field "$M1" secret)/$(log_field "$M2" secret)" host/controller "the secret each generation changed"
assert_eq "$(log_field "$M2" generation)" "$GEN2" "the second half's generation"
check "[ $GEN -lt $GEN1 ] && [ $GEN1 -lt $GEN2 ]" "generations $GEN < $GEN1 < $GEN2"
WROTE=$(rotation_log "written to a live controller.* controller=\"nvme$C\"")
assert_eq "$(printf '%s\n' "$WROTE" | sed -n 's/.* secret="\([a-z]*\)".*/\1/p' | tr '\n' ' ')" \
  "host controller " "the node's writes to nvme$C (one secret per generation)"
assert_ne "$KEY2" "$KEY" "the rotated host secret"
wait_for 90 "CSINode annotation dhchap-generation $GEN2" sh_true '[ "$(csinode_gen)" = "$GEN2" ]'
wait_for 60 "the older Secrets deleted" sh_true '[ "$(secrets)" = "secret/pillar-csi-dhchap-$NODE-$GEN2 " ]'
assert_eq "$(target_key dhchap_key)" "$KEY2" "the target's new host key"
assert_eq "$(target_key dhchap_ctrl_key)" "$CKEY2" "the target's new controller key"
writer_rounds 2
writer_stop
assert_eq "$(nvme_ctrl_state "$C")" live "the controller after the rotation"
assert_eq "$(ctrl_of vol)" "$C" "the volume's controller after the rotation (not removed)"
log "kernel during the rotation: $(dmesg_since rotate | grep -i -E 'auth|nvme' | tail -8 | tr '\n' '|')"
REAUTH=$(count_dmesg rotate "nvme$C: re-authenticating controller")
FAILED=$(count_dmesg rotate 'authentication failed')
RECONN=$(count_dmesg rotate "nvme$C: (Successfully reconnected|starting error recovery)")
FATAL=$(( $(dmesg | grep -c 'fatal error occurred' || true) - FATAL0 ))
echo "@@FIGURE rotation: re-authentications started $REAUTH, failed $FAILED, controller recoveries or reconnects $RECONN, target fatal errors $FATAL" >&2
assert_eq "$REAUTH" 2 "re-authentications the rotation started (one per generation)"
assert_eq "$FAILED" 0 "failed authentications during the rotation"
assert_eq "$RECONN" 0 "error recoveries or reconnects of nvme$C during the rotation"
assert_eq "$FATAL" 0 "the target's fatal controller errors during the rotation"
assert_eq "$(count_dmesg rotate 'I/O error|Removing ctrl|Buffer I/O|requeuing I/O')" 0 "I/O errors or requeued I/O during the rotation"
KEY_OLD=$KEY; CKEY_OLD=$CKEY; KEY=$KEY2; CKEY=$CKEY2
mark oldkey
impostor "a connect with the old keys" "dhchap_secret=$KEY_OLD,dhchap_ctrl_secret=$CKEY_OLD"
expect_dmesg oldkey 'nvmet: ctrl [0-9]+ qid 0 host response mismatch' \
  "the target refuses the old key at the next authentication"

step "d: storage reboot: the controller restores the authenticated export, identities unchanged"
DEV=$(nvme_ns_dev "$(on_storage "cfg_read subsystems/$NQN/namespaces/1/device_uuid")") ||
  fail "no block device for the volume's namespace uuid"
BLK=/sys/block/${DEV#/dev/}
UUID0=$(sysfs_read "$BLK/uuid"); NGUID0=$(sysfs_read "$BLK/nguid"); NSID0=$(sysfs_read "$BLK/nsid")
NREST0=$(role_log controller | grep -c 'restoring the exports of an agent' || true)
mark reboot
t=$(up)
storage_down
wait_for 60 "the worker notices the outage" nvme_ctrl_isnt "$C" live
S2=$(data_write /tmp/during.bin 2)
bg_start outage sh_true "cp /tmp/during.bin '$TGT/during.bin' && sync"
storage_up 120
wait_for 120 "PillarAgent back at ExportsReady=True/ExportsServing" cond_is pa $AGENT ExportsReady True/ExportsServing
wait_for 120 "nvme$C live again" nvme_ctrl_is "$C" live
echo "@@TIME storage reboot to the controller live again: $(since "$t")s" >&2
wait_for 60 "the writer blocked by the outage finishes" bg_done outage
assert_eq "$(bg_rc outage)" 0 "the blocked writer's status"
NREST=$(( $(role_log controller | grep -c 'restoring the exports of an agent' || true) - NREST0 ))
assert_eq "$NREST" 1 "complete ReconcileState requests sent by the controller for the reboot"
assert_eq "$(target_key dhchap_key)" "$KEY" "the target's dhchap_key after the restore"
assert_eq "$(target_key dhchap_ctrl_key)" "$CKEY" "the target's dhchap_ctrl_key after the restore"
assert_eq "$(ctrl_of vol)" "$C" "the same controller (reconnected, authenticated)"
assert_eq "$(sysfs_read /sys/class/nvme/nvme$C/dhchap_secret)" "$KEY" "the reconnected controller's secret"
assert_eq "$(sysfs_read "$BLK/uuid")" "$UUID0" "namespace uuid after the reboot"
assert_eq "$(sysfs_read "$BLK/nguid")" "$NGUID0" "namespace nguid after the reboot"
assert_eq "$(sysfs_read "$BLK/nsid")" "$NSID0" "namespace id after the reboot"
expect_dmesg reboot "nvme$C: Successfully reconnected" "the kernel initiator reconnected"
assert_eq "$(count_dmesg reboot 'ret=-12[69]')" 0 "refused authentications across the reboot"
data_verify "$TGT/a.bin" "$S1" "data written before the reboot"
data_verify "$TGT/during.bin" "$S2" "data written during the outage"
wait_for 30 "volume ExportReconciled=True/Reconciled" cond_is pvst "$(get PV vol)" ExportReconciled True/Reconciled

# ---- e: no key material anywhere ------------------------------------------------------------
step "e: no key material in the objects, role logs (--v=5) or state directories"
kubectl get pv,pvc,pods,events,csinodes,nodes -A -o json > /tmp/objects.out 2>&1 || fail "kubectl get: $(tail -3 /tmp/objects.out)"
"$B" get pvst -o json $CLI_STORE >> /tmp/objects.out || fail "get pvst"
"$B" get pa -o json $CLI_STORE >> /tmp/objects.out || fail "get pa"
touch /run/e2e/kubelet.stop
pod_unmount app vol
csi /csi.v1.Controller/ControllerUnpublishVolume "{\"volume_id\":\"$(get VID vol)\",\"node_id\":\"$NODE\"}" >/dev/null
csi /csi.v1.Controller/DeleteVolume "{\"volume_id\":\"$(get VID vol)\"}" >/dev/null
assert_not on_storage "[ -e \$NVMET/subsystems/$NQN ]"
role_stop node
role_stop controller
role_stop agent
b64() { printf '%s' "$1" | cut -d: -f3; }
hexkey() { b64 "$1" | base64 -d 2>/dev/null | head -c 64 | od -An -tx1 | tr -d ' \n'; }
for _k in "$KEY" "$CKEY" "$KEY_OLD" "$CKEY_OLD"; do
  for _p in "DHHC-1" "$(b64 "$_k")" "$(hexkey "$_k")"; do
    [ ${#_p} -ge 6 ] || fail "scan pattern too short"
    for _side in worker storage; do
      _n=$(_on $_side "cat \"\$(role_home)\"/logs/*.log 2>/dev/null" | grep -c -F -- "$_p" || true)
      assert_eq "$_n" 0 "lines with key material in the $_side role logs"
    done
    assert_eq "$(grep -c -F -- "$_p" /tmp/objects.out || true)" 0 "key material in the objects"
    _n=$(find /run/e2e/node -type f ! -name dhchap.key -exec cat {} + 2>/dev/null | grep -c -F -- "$_p" || true)
    assert_eq "$_n" 0 "key material in the node's state directory (records)"
    _n=$(on_storage "find $E2E_STATE/agent -type f -exec cat {} + 2>/dev/null | grep -c -F -- '$_p' || true")
    assert_eq "$_n" 0 "key material in the agent's state directory"
  done
done
for r in controller node agent; do
  _side=worker; [ $r = agent ] && _side=storage
  assert_match "$(_on $_side "head -1 \"\$(role_home)\"/logs/$r.log")" "'--v=5'" "$r runs at --v=5"
done
assert_match "$(role_log node)" 'dhchap_secret=\(secret\),dhchap_ctrl_secret=\(secret\)' "the node's connect line, redacted"
for r in controller node; do
  assert_not grep -qi forbidden "$(role_home)/logs/$r.log"
done
scenario_end
