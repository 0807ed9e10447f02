#!/bin/sh
# Check the layering of the source folders from their #include "folder/file.h" lines.
#
# The folders read bottom-up; a folder may include its own headers and those of folders on a
# lower rank, never a higher one (a layer never includes a role's header):
#
#   0 base
#   1 h2 nvme backend rules pbjson metrics
#   2 grpc kube nvmet
#   3 store
#   4 model
#   5 cluster
#   6 the roles (roles/<role>/)
#   7 the role table (roles/*.c, src/main.c)
#
# Folders on one rank may include each other as long as no cycle forms.  A folder under src/ or
# roles/ that has no rank here is an error (give it one).  Includes of folders that are neither
# (generated code: pillar_csi/, google/) are not part of the graph.
#
# Usage: sh test/tools/layers.sh [repository root]   (default: the current directory)
# Prints every offending edge with the include line that makes it; exits 1 if there is one.
set -u
root=${1:-.}
cd "$root" || exit 2

rank_of() {
	case $1 in
	base) echo 0 ;;
	h2 | nvme | backend | rules | pbjson | metrics) echo 1 ;;
	grpc | kube | nvmet) echo 2 ;;
	store) echo 3 ;;
	model) echo 4 ;;
	cluster) echo 5 ;;
	.roles) echo 7 ;;
	*) if [ -d "roles/$1" ]; then echo 6; else echo; fi ;;
	esac
}

is_folder() { [ -d "src/$1" ] || [ -d "roles/$1" ]; }

bad=0
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT

for f in src/*/*.c src/*/*.h src/*.c roles/*.c roles/*.h roles/*/*.c roles/*/*.h; do
	[ -f "$f" ] || continue
	case $f in
	src/*/*) from=${f#src/}; from=${from%%/*} ;;
	roles/*/*) from=${f#roles/}; from=${from%%/*} ;;
	*) from=.roles ;;
	esac
	rf=$(rank_of "$from")
	if [ -z "$rf" ]; then
		echo "layers: $f: folder '$from' has no rank in test/tools/layers.sh"
		bad=1
		continue
	fi
	grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[A-Za-z0-9_.-]+/' "$f" |
		sed -E 's/^([0-9]+):[^"]*"([^/"]+)\/.*/\1 \2/' >"$edges.inc"
	while read -r line to; do
		[ "$to" = "$from" ] && continue
		is_folder "$to" || continue
		rt=$(rank_of "$to")
		if [ -z "$rt" ]; then
			echo "layers: $f:$line: folder '$to' has no rank in test/tools/layers.sh"
			bad=1
		elif [ "$rt" -gt "$rf" ]; then
			echo "layers: $f:$line: $from (rank $rf) includes $to (rank $rt): against the order"
			bad=1
		fi
		echo "$from $to" >>"$edges"
	done <"$edges.inc"
	rm -f "$edges.inc"
done

# A cycle among folders (possible only between folders of one rank once the order holds).
if ! sort -u "$edges" | tsort >/dev/null 2>"$edges.err"; then
	sed 's/^/layers: /' "$edges.err"
	bad=1
fi
rm -f "$edges.err"

if [ "$bad" -ne 0 ]; then
	echo "layers: include graph violates the folder order (see test/tools/layers.sh)"
	exit 1
fi
echo "layers: $(sort -u "$edges" | wc -l) folder edges, all downward, no cycle"
