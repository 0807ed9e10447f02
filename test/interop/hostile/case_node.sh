#!/bin/sh
# Hostile inputs to the node role (node_cases.py): a `pillar-csi node` on fake roots inside
# HOSTILE_TMP, sent what a hostile CSI client would.  Prints ok/not ok lines.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
exec /usr/bin/python3 "$HERE/node_cases.py"
