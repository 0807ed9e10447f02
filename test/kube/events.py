"""events.k8s.io/v1 Events are core/v1 Events seen through another schema: both APIs read and
write the same stored objects (transcripts 09j, 09k).  The store keeps the core/v1 form;
to_core and from_core convert a whole object (metadata and managedFields unchanged)."""

PAIRS = (("regarding", "involvedObject"), ("note", "message"), ("reportingController", "reportingComponent"),
         ("deprecatedSource", "source"), ("deprecatedFirstTimestamp", "firstTimestamp"),
         ("deprecatedLastTimestamp", "lastTimestamp"), ("deprecatedCount", "count"))
CORE_DEFAULTS = (("source", {}), ("firstTimestamp", None), ("lastTimestamp", None), ("eventTime", None),
                 ("reportingComponent", ""), ("reportingInstance", ""))
SAME = ("eventTime", "series", "related", "action", "reason", "type", "reportingInstance")


def to_core(o):
    out = {"kind": "Event", "apiVersion": "v1", "metadata": o.get("metadata", {})}
    for new, old in PAIRS:
        if new in o:
            out[old] = o[new]
    for k in SAME:
        if k in o:
            out[k] = o[k]
    for k, v in CORE_DEFAULTS:
        out.setdefault(k, v)
    return out


def from_core(o):
    out = {"kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": o.get("metadata", {})}
    for k in SAME:
        if k in o and o[k] != "":
            out[k] = o[k]
    for new, old in PAIRS:
        if old in o and o[old] not in ("", 0):
            out[new] = o[old]
    out.setdefault("eventTime", None)
    out.setdefault("deprecatedSource", {})
    out.setdefault("deprecatedFirstTimestamp", None)
    out.setdefault("deprecatedLastTimestamp", None)
    return out
