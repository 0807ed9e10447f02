/* rules/bounds — the numeric bounds of the NVMe/TCP tunables (crds.md §4.1, §6.1: int32), which
 * the controller enforces on PillarProtocol, overrides and annotations and the node again on the
 * volume context (csi.md §3).  Constants only.
 */
#ifndef PILLAR_RULES_BOUNDS_H
#define PILLAR_RULES_BOUNDS_H

#include <limits.h>

#define RULES_MAX_QUEUE_SIZE_MIN       16
#define RULES_MAX_QUEUE_SIZE_MAX       1024
#define RULES_IN_CAPSULE_DATA_SIZE_MIN 1024
#define RULES_IN_CAPSULE_DATA_SIZE_MAX INT_MAX
#define RULES_CTRL_LOSS_TMO_MIN        (-1) /* -1: retry for ever (crds.md §16) */
#define RULES_CTRL_LOSS_TMO_MAX        INT_MAX
#define RULES_RECONNECT_DELAY_MIN      1 /* the kernel refuses 0 (crds.md §4.1) */
#define RULES_RECONNECT_DELAY_MAX      INT_MAX

/* What the Linux kernel uses when the connect string names no ctrl_loss_tmo / reconnect_delay
 * (operations.md OPS-05). */
#define RULES_KERNEL_CTRL_LOSS_TMO   600
#define RULES_KERNEL_RECONNECT_DELAY 10

#endif
