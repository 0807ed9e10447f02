#!/bin/sh
# Writes the seed corpora of the gRPC service targets (test/fuzz/corpus/fuzz_{agent_rpc,
# csi_controller,csi_node}/): one file per request, the method's index in the target's table
# (harness.h: fuzz_rpc_pick) as the first byte, then the request encoded by `protoc --encode`
# from the text format below.  Run from the repository root after changing a seed.
set -eu
C=test/fuzz/corpus
seed() { # target index name message text
	mkdir -p "$C/$1"
	{ printf "\\$(printf %03o "$2")"; printf '%s\n' "$5" | protoc -Iproto -I/usr/include \
		--encode="$4" "$6"; } >"$C/$1/$3"
}
A=pillar_csi.agent.v1
AP=proto/pillar_csi/agent/v1/agent.proto
F='fence {volume_uid: "uid-1" generation: 3}'
V='volume_id: "fpool/pvc-1"'
seed fuzz_agent_rpc 0 caps $A.GetCapabilitiesRequest '' $AP
seed fuzz_agent_rpc 1 capacity $A.GetCapacityRequest 'pool_name: "fpool"' $AP
seed fuzz_agent_rpc 4 health $A.HealthCheckRequest '' $AP
seed fuzz_agent_rpc 5 create $A.CreateVolumeRequest "$V capacity_bytes: 1048576 backend_type: BACKEND_TYPE_FILE backend_params {file {}} $F" $AP
seed fuzz_agent_rpc 6 delete $A.DeleteVolumeRequest "$V $F" $AP
seed fuzz_agent_rpc 7 expand $A.ExpandVolumeRequest "$V requested_bytes: 2097152 $F" $AP
seed fuzz_agent_rpc 8 export $A.ExportVolumeRequest "$V protocol_type: PROTOCOL_TYPE_NVMEOF_TCP export_params {nvmeof_tcp {bind_address: \"127.0.0.1\" port: 4420}} device_path: \"/dev/x\" acl_enabled: true $F" $AP
seed fuzz_agent_rpc 9 unexport $A.UnexportVolumeRequest "$V protocol_type: PROTOCOL_TYPE_NVMEOF_TCP $F" $AP
seed fuzz_agent_rpc 10 allow $A.AllowInitiatorRequest "$V protocol_type: PROTOCOL_TYPE_NVMEOF_TCP initiator_id: \"nqn.2014-08.org.nvmexpress:uuid:host-1\" $F" $AP
seed fuzz_agent_rpc 12 reconcile $A.ReconcileStateRequest "volumes {$V backend_type: BACKEND_TYPE_FILE backend_params {file {}} exports {protocol_type: PROTOCOL_TYPE_NVMEOF_TCP export_params {nvmeof_tcp {bind_address: \"127.0.0.1\" port: 4420}} allowed_initiators: \"nqn.2014-08.org.nvmexpress:uuid:host-1\"} $F} complete: true" $AP
seed fuzz_agent_rpc 13 drain $A.DrainRequest '' $AP
# strings that are not the bytes a C string holds: refused before any handler (grpc/strcheck.h)
seed fuzz_agent_rpc 6 delete-nul $A.DeleteVolumeRequest 'volume_id: "fpool/pvc-1\000junk" fence {volume_uid: "uid-1\000x" generation: 3}' $AP
seed fuzz_agent_rpc 5 create-not-utf8 $A.CreateVolumeRequest "volume_id: \"fpool/pvc-\\377\" capacity_bytes: 1048576 backend_type: BACKEND_TYPE_FILE backend_params {file {pool: \"fpool\\000\"}} $F" $AP 2>/dev/null

S=csi.v1
CP=proto/csi.proto
CAP='volume_capabilities {mount {fs_type: "ext4"} access_mode {mode: SINGLE_NODE_WRITER}}'
VID='volume_id: "storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-1111"'
seed fuzz_csi_controller 0 info $S.GetPluginInfoRequest '' $CP
seed fuzz_csi_controller 2 probe $S.ProbeRequest '' $CP
seed fuzz_csi_controller 3 create $S.CreateVolumeRequest "name: \"pvc-1111\" capacity_range {required_bytes: 1073741824} $CAP parameters {key: \"pillar-csi.bhyoo.com/pillar-storage-class\" value: \"fast\"} parameters {key: \"csi.storage.k8s.io/pvc/name\" value: \"c1\"} parameters {key: \"csi.storage.k8s.io/pvc/namespace\" value: \"default\"}" $CP
seed fuzz_csi_controller 3 create-xfs $S.CreateVolumeRequest "name: \"pvc-2222\" capacity_range {required_bytes: 104857600} volume_capabilities {mount {fs_type: \"xfs\"} access_mode {mode: SINGLE_NODE_WRITER}} parameters {key: \"pillar-csi.bhyoo.com/pillar-storage-class\" value: \"fast\"}" $CP
seed fuzz_csi_controller 4 delete $S.DeleteVolumeRequest "$VID" $CP
seed fuzz_csi_controller 5 publish $S.ControllerPublishVolumeRequest "$VID node_id: \"node-a\" volume_capability {mount {} access_mode {mode: SINGLE_NODE_WRITER}}" $CP
seed fuzz_csi_controller 6 unpublish $S.ControllerUnpublishVolumeRequest "$VID node_id: \"node-a\"" $CP
seed fuzz_csi_controller 7 expand $S.ControllerExpandVolumeRequest "$VID capacity_range {required_bytes: 2147483648}" $CP
seed fuzz_csi_controller 8 validate $S.ValidateVolumeCapabilitiesRequest "$VID $CAP" $CP
seed fuzz_csi_controller 4 delete-nul $S.DeleteVolumeRequest 'volume_id: "storage-1/nvmeof-tcp/zfs-zvol/tank/pvc-1111\000junk"' $CP
seed fuzz_csi_controller 3 create-nul $S.CreateVolumeRequest "name: \"n\\000x\" $CAP parameters {key: \"pillar-csi.bhyoo.com/pillar-storage-class\" value: \"fast\\000\"}" $CP
seed fuzz_csi_controller 5 publish-nul $S.ControllerPublishVolumeRequest "$VID node_id: \"node-a\\000junk\" volume_capability {mount {} access_mode {mode: SINGLE_NODE_WRITER}}" $CP
seed fuzz_csi_controller 9 capacity $S.GetCapacityRequest "parameters {key: \"pillar-csi.bhyoo.com/pillar-storage-class\" value: \"fast\"}" $CP

NVID='volume_id: "storage-node-1/nvmeof-tcp/zfs-zvol/tank/pvc-abc123"'
CTX='volume_context {key: "target_id" value: "nqn.2026-01.com.bhyoo.pillar-csi:tank.pvc-abc123"} volume_context {key: "address" value: "10.0.0.5"} volume_context {key: "port" value: "4420"} volume_context {key: "pillar-csi.bhyoo.com/protocol-type" value: "nvmeof-tcp"}'

seed fuzz_csi_node 2 probe $S.ProbeRequest '' $CP
seed fuzz_csi_node 3 stage $S.NodeStageVolumeRequest "$NVID $CTX staging_target_path: \"/tmp/pillar-fuzz-x/staging\" volume_capability {mount {fs_type: \"ext4\"} access_mode {mode: SINGLE_NODE_WRITER}}" $CP
seed fuzz_csi_node 4 unstage $S.NodeUnstageVolumeRequest "$NVID staging_target_path: \"/tmp/pillar-fuzz-x/staging\"" $CP
seed fuzz_csi_node 5 publish $S.NodePublishVolumeRequest "$NVID staging_target_path: \"/tmp/pillar-fuzz-x/staging\" target_path: \"/tmp/pillar-fuzz-x/target\" volume_capability {block {} access_mode {mode: SINGLE_NODE_WRITER}}" $CP
seed fuzz_csi_node 6 unpublish $S.NodeUnpublishVolumeRequest "$NVID target_path: \"/tmp/pillar-fuzz-x/target\"" $CP
seed fuzz_csi_node 7 stats $S.NodeGetVolumeStatsRequest "$NVID volume_path: \"/tmp/pillar-fuzz-x/target\"" $CP
seed fuzz_csi_node 8 expand $S.NodeExpandVolumeRequest "$NVID volume_path: \"/tmp/pillar-fuzz-x/target\" capacity_range {required_bytes: 2147483648}" $CP
seed fuzz_csi_node 10 info $S.NodeGetInfoRequest '' $CP
seed fuzz_csi_node 6 unpublish-nul $S.NodeUnpublishVolumeRequest "$NVID target_path: \"/tmp/pillar-fuzz-x/target\\000/../../etc\"" $CP


# hostile paths and volume_context values (issue 24 #1, #6): each must be refused with nothing
# touched outside the kubelet directory and nothing written to the fabrics device
K=/tmp/pillar-fuzz-x/kubelet
seed fuzz_csi_node 6 unpublish-relative $S.NodeUnpublishVolumeRequest "$NVID target_path: \"../../etc/passwd\"" $CP
seed fuzz_csi_node 6 unpublish-dotdot $S.NodeUnpublishVolumeRequest "$NVID target_path: \"$K/pods/u1/volumes/kubernetes.io~csi/pv1/../../../../../etc/passwd\"" $CP
seed fuzz_csi_node 6 unpublish-socket $S.NodeUnpublishVolumeRequest "$NVID target_path: \"$K/plugins/pillar-csi.bhyoo.com/csi.sock\"" $CP
seed fuzz_csi_node 6 unpublish-layout $S.NodeUnpublishVolumeRequest "$NVID target_path: \"$K/pods/u1/volumes/kubernetes.io~csi/pv1/mount\"" $CP
seed fuzz_csi_node 4 unstage-slashes $S.NodeUnstageVolumeRequest "$NVID staging_target_path: \"$K//plugins/kubernetes.io/csi/pv/pv1/globalmount/\"" $CP
seed fuzz_csi_node 5 publish-outside $S.NodePublishVolumeRequest "$NVID staging_target_path: \"$K/plugins/kubernetes.io/csi/pv/pv1/globalmount\" target_path: \"/etc/pillar-fuzz\" volume_capability {mount {} access_mode {mode: SINGLE_NODE_WRITER}}" $CP
seed fuzz_csi_node 3 stage-inject-address $S.NodeStageVolumeRequest "$NVID volume_context {key: \"target_id\" value: \"nqn.2026-01.com.bhyoo.pillar-csi:tank.pvc-abc123\"} volume_context {key: \"address\" value: \"1.2.3.4,nr_io_queues=1\"} volume_context {key: \"port\" value: \"4420\"} staging_target_path: \"$K/plugins/kubernetes.io/csi/pv/pv1/globalmount\" volume_capability {mount {fs_type: \"ext4\"} access_mode {mode: SINGLE_NODE_WRITER}}" $CP
seed fuzz_csi_node 3 stage-inject-nqn $S.NodeStageVolumeRequest "$NVID volume_context {key: \"target_id\" value: \"nqn.2026-01.com.bhyoo.pillar-csi:tank.x,hostnqn=evil\"} volume_context {key: \"address\" value: \"10.0.0.5\"} volume_context {key: \"port\" value: \"4420,queue_size=1\"} staging_target_path: \"$K/plugins/kubernetes.io/csi/pv/pv1/globalmount\" volume_capability {block {} access_mode {mode: SINGLE_NODE_WRITER}}" $CP
