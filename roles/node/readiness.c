#include "node/readiness.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"

/* The one place that looks at the files; logs when the answer changes. */
static void check(struct node_readiness *r)
{
	char path[PATH_MAX];
	struct stat sb;
	const char *why = NULL;

	snprintf(path, sizeof(path), "%s/nvme-fabrics", r->dev_root);
	if (stat(path, &sb) < 0)
		why = "no /dev/nvme-fabrics (load nvme_fabrics)";
	else if (access(r->state_dir, W_OK) < 0)
		why = "state directory not writable";
	else if (r->shared_identity)
		why = "shared NVMe host identity";
	bool ready = why == NULL;
	if (atomic_exchange(&r->ready, ready) != ready) {
		if (ready)
			log_info("node ready: Probe answers ready");
		else
			log_info("node not ready: Probe answers not ready", "reason", why,
			         "stateDir", r->state_dir);
	}
}

/* Watches the device directory (nvme-fabrics appearing or going) and the state directory
 * (its mode, its removal).  A watch that cannot be set leaves the periodic re-check. */
static void watch(struct node_readiness *r)
{
	r->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (r->inotify_fd < 0)
		return;
	inotify_add_watch(r->inotify_fd, r->dev_root,
	                  IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB |
	                      IN_DELETE_SELF | IN_MOVE_SELF);
	inotify_add_watch(r->inotify_fd, r->state_dir, IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF);
}

static void *readiness_main(void *arg)
{
	struct node_readiness *r = arg;
	struct pollfd fds[2] = {{.fd = r->stop_fd, .events = POLLIN},
	                        {.fd = r->inotify_fd, .events = POLLIN}};

	for (;;) {
		int n = poll(fds, r->inotify_fd >= 0 ? 2 : 1, NODE_READINESS_RECHECK_MS);
		if (n < 0 && errno != EINTR)
			break;
		if (fds[0].revents)
			break;
		if (n > 0 && fds[1].revents) {
			char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
			while (read(r->inotify_fd, buf, sizeof(buf)) > 0)
				;
		}
		check(r);
	}
	return NULL;
}

int node_readiness_start(struct node_readiness *r, const char *dev_root, const char *state_dir,
                         bool shared_identity, struct err *e)
{
	int rc;

	r->dev_root = dev_root;
	r->state_dir = state_dir;
	r->shared_identity = shared_identity;
	r->inotify_fd = -1;
	r->running = false;
	atomic_init(&r->ready, true); /* so that the first check logs only "not ready" */
	check(r);
	r->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (r->stop_fd < 0)
		return err_set(e, -errno, "readiness: eventfd: %s", strerror(errno));
	watch(r);
	rc = pthread_create(&r->thread, NULL, readiness_main, r);
	if (rc) {
		node_readiness_stop(r);
		return err_set(e, -rc, "readiness thread: %s", strerror(rc));
	}
	r->running = true;
	return 0;
}

bool node_readiness_ready(struct node_readiness *r)
{
	return atomic_load(&r->ready);
}

void node_readiness_stop(struct node_readiness *r)
{
	uint64_t one = 1;

	if (!r->dev_root)
		return; /* never started */
	if (r->running) {
		if (write(r->stop_fd, &one, sizeof(one)) < 0) {
			/* an eventfd write of 1 cannot fail */
		}
		pthread_join(r->thread, NULL);
		r->running = false;
	}
	if (r->inotify_fd >= 0)
		close(r->inotify_fd);
	if (r->stop_fd >= 0)
		close(r->stop_fd);
	r->inotify_fd = r->stop_fd = -1;
}
