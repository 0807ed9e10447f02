#!/bin/sh
# Hostile connections to the agent (conn_cases.py): 1,100 silent TCP connections from one peer
# and from twenty, a legitimate grpcio client meanwhile, the handshake deadline, the
# rate-limited refusal and time-out warnings, the agent's RSS before, during and after; then
# refused mTLS handshakes logged with the peer and the reason.  Prints ok/not ok lines.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
exec /usr/bin/python3 "$HERE/conn_cases.py"
