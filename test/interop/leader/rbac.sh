#!/bin/sh
# rbac.sh ROOT WORKDIR [VALUES]: prints the path of a YAML file with the chart's own Roles, ClusterRoles and
# bindings, rendered by test/chart's renderer for release "pillar-csi" in namespace "pillar-csi"
# (ServiceAccounts pillar-csi-controller and pillar-csi-node), with recovery.deletePods on so that
# its rule is rendered too (VALUES: more values YAML text, e.g. "dhchap: {enabled: true}"): what test/interop/leader and test/interop/rbac run the roles under, so
# a permission missing from the chart fails them.
set -eu
ROOT=$1 T=$2 EXTRA=${3:-}
B=${BUILD:-$ROOT/build}
sh "$ROOT/test/chart/build-render.sh" "$B/chart-render" >&2
printf 'agent:\n  backends:\n  - zfs: {pool: tank}\nrecovery:\n  deletePods: true\n%s\n' "$EXTRA" > "$T/values.yaml"
"$B/chart-render" --release-name pillar-csi --namespace pillar-csi -f "$T/values.yaml" \
	"$ROOT/charts/pillar-csi" > "$T/chart.yaml"
/usr/bin/python3 - "$T/chart.yaml" "$T/rbac-chart.yaml" <<'PY'
import sys, yaml
kinds = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d.get("kind") in kinds]
if not docs:
    sys.exit("the chart renders no RBAC objects")
yaml.safe_dump_all(docs, open(sys.argv[2], "w"))
PY
echo "$T/rbac-chart.yaml"
