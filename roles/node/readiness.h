/* node/readiness — what Probe answers, kept current off the call path.
 *
 * The node is ready when <dev>/nvme-fabrics exists (nvme_fabrics is loaded), its state
 * directory is writable and its host identity is not shared.  A thread of its own re-checks the
 * files when inotify reports a change to the device directory or the state directory (and every
 * NODE_READINESS_RECHECK_MS regardless, for what inotify cannot see: a read-only remount, a watch
 * that could not be set), so that a Probe reads one atomic flag and touches no file.  The first
 * check runs in node_readiness_start, so the flag is right from the start.
 */
#ifndef PILLAR_ROLES_NODE_READINESS_H
#define PILLAR_ROLES_NODE_READINESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "base/err.h"

#define NODE_READINESS_RECHECK_MS 10000

struct node_readiness {
	atomic_bool ready;
	bool shared_identity;             /* const after start */
	const char *dev_root, *state_dir; /* borrowed from the node */
	int inotify_fd, stop_fd;          /* -1 when not open */
	bool running;
	pthread_t thread;
};

/* Checks once and starts the thread.  0, or a negative errno with the reason in e. */
int node_readiness_start(struct node_readiness *r, const char *dev_root, const char *state_dir,
                         bool shared_identity, struct err *e);
bool node_readiness_ready(struct node_readiness *r);
/* Stops the thread and closes its descriptors.  A zeroed one (never started) is a no-op. */
void node_readiness_stop(struct node_readiness *r);

#endif
