/* node/health — the condition of a staged volume that NodeGetVolumeStats reports (the CSI node
 * capability VOLUME_CONDITION; kubelet exposes it as kubelet_volume_stats_health_status_abnormal
 * and as pod events).
 *
 * A staged volume is healthy while a controller of its subsystem (stage record subsys_nqn,
 * found as csi.md §7.2 step 1 finds them under the sysfs root) is `live`.  Otherwise it is
 * abnormal:
 *  - a controller exists but is not live (connecting, resetting, new, deleting, dead): the path
 *    is down and I/O stalls.  The message names the controller and its state, since when this
 *    node plugin has seen it so, and the seconds left before the kernel gives up and removes it:
 *    the controller's sysfs ctrl_loss_tmo (the value the kernel applies; "off" never gives up;
 *    the kernel's default of 600 s when the attribute is missing) minus the time since that first
 *    sighting.  The kernel's count began at or before the sighting, so the figure is an upper
 *    bound;
 *  - no controller is left: the kernel removed it (ctrl_loss_tmo ran out, or it was deleted) and
 *    the filesystem or block device on it no longer works; the message says that the workload
 *    must be restarted so that the volume is staged on a new connection.
 * First sightings are kept in memory per volume, forgotten when the volume is live again or its
 * controller is gone, at most NODE_HEALTH_MAX of them (the oldest goes first); a restarted node
 * plugin starts counting again.
 *
 * Lost volumes (the second case) are kept too, with the time the node plugin first saw the
 * controller gone, until the volume is live again (restaged on a new connection); whenever that
 * set changes, report(report_ctx, json) is called with it as a JSON object
 * {"<volume ID>":"<RFC 3339>",...} ("{}" when empty) — in a cluster the node plugin writes it to
 * its CSINode's annotation pillar-csi.bhyoo.com/nvmeof-lost-volumes, from which the controller's
 * opt-in recovery (roles/controller/recovery.h) learns which pods lost their volume.  Reports are
 * serialised, so the last one written is the current set.  Thread-safe.
 */
#ifndef PILLAR_ROLES_NODE_HEALTH_H
#define PILLAR_ROLES_NODE_HEALTH_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "base/err.h"
#include "node/record.h"
#include "nvme/initiator.h"

#define NODE_HEALTH_MAX 1024

struct node_health_seen;

typedef void (*node_health_report_fn)(void *ctx, const char *node_id, const char *lost_json);

struct node_health {
	pthread_mutex_t mu;
	struct node_health_seen *seen; /* newest first */
	size_t n;
	struct node_health_seen *lost; /* volumes whose controller is gone */
	size_t n_lost;
	pthread_mutex_t report_mu;    /* one report at a time, in the order of the changes */
	node_health_report_fn report; /* NULL: none */
	void *report_ctx;
	const char *node_id; /* handed to report */
};

struct node_volume_health {
	bool abnormal;
	char message[1024];
	/* The same as figures (node/metrics.h): the path is live; the kernel removed every
	 * controller; seconds since the path was first seen down (0 while live or removed); the
	 * controller's ctrl_loss_tmo (-1: off; the kernel's default when unreadable). */
	bool live, removed;
	double down_seconds;
	long long ctrl_loss_tmo;
};

void node_health_init(struct node_health *h);
void node_health_fini(struct node_health *h);

/* The condition of the volume staged from r, at now_ms (CLOCK_MONOTONIC) and now_s (wall clock,
 * for the message).  0, or a negative errno when sysfs could not be read (message in e). */
int node_health_check(struct node_health *h, const struct nvme_ctx *c, const struct node_record *r,
                      int64_t now_ms, time_t now_s, struct node_volume_health *out, struct err *e);

#endif
