"""The per-call klog lines every pillar-csi role writes (src/grpc/calllog.h), parsed for the
component suites:

  I1203 07:32:44.196738    7801 calllog.c:101] "GRPC call" method="/csi.v1.Controller/CreateVolume" volumeID="…" code="OK" duration="135.120ms"
"""
import re

_KV = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_HEAD = r'^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [\w.]+:\d+\] "%s" (.*)$'


def _unquote(v):
    return v.encode("latin-1", "backslashreplace").decode("unicode_escape")


def call_logs(text, msg, method):
    """The lines '"msg" method="method" k="v"...' of a log as (severity, {key: value}), in order.
    msg: "GRPC call", "GRPC call failed", "GRPC request" or "GRPC response"."""
    head = re.compile(_HEAD % re.escape(msg))
    out = []
    for line in text.splitlines():
        m = head.match(line)
        if m:
            kv = {k: _unquote(v) for k, v in _KV.findall(m.group(2))}
            if kv.get("method") == method:
                out.append((m.group(1), kv))
    return out


def duration_ok(kv):
    """duration is milliseconds with three decimals."""
    return re.fullmatch(r"\d+\.\d{3}ms", kv.get("duration", "")) is not None
