#!/bin/sh
# A string is the bytes that were sent (strings_cases.py): an agent, a controller and a node on
# fake roots inside HOSTILE_TMP, sent strings with a NUL byte or bytes that are not UTF-8 over
# every boundary — gRPC requests to each role, `pillar-csi apply` files, the agent's
# configuration.  Prints ok/not ok lines.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
exec /usr/bin/python3 "$HERE/strings_cases.py"
