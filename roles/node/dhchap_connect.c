/* The keyed connect of NodeStageVolume (docs/authentication.md): the node's secrets on the
 * connect line, a kernel without host authentication refused by name, and the kernel's
 * authentication errnos turned into statuses that say what to check. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "node/internal.h"
#include "rules/keys.h"

/* The refusal on a worker whose kernel cannot authenticate (csi code FAILED_PRECONDITION:
 * retrying does not help until the worker runs another kernel). */
#define NO_HOST_AUTH                                                                          \
	"volume \"%s\" asks for NVMe in-band authentication (nvmeofTcp.dhchap) but this "     \
	"worker's kernel has no host authentication (CONFIG_NVME_HOST_AUTH; Debian 12's 6.1 " \
	"kernel is built without it, bookworm-backports' 6.12 has it): run the worker on a "  \
	"kernel with CONFIG_NVME_HOST_AUTH=y or use a PillarProtocol without dhchap "         \
	"(docs/authentication.md)"

/* A dhchap volume on a node plugin that does not make keys. */
#define NOT_ENABLED                                                                            \
	"volume \"%s\" asks for NVMe in-band authentication (nvmeofTcp.dhchap) but this node " \
	"plugin runs without --dhchap (the chart's dhchap.enabled), so it has no keys the "    \
	"storage "                                                                             \
	"node knows (docs/authentication.md)"

int node_dhchap_mode_parse(const char *value, enum node_dhchap_mode *mode, struct grpc_status *st)
{
	*mode = NODE_DHCHAP_OFF;
	if (!value)
		return GRPC_OK;
	if (!strcmp(value, RULES_CTX_DHCHAP_BIDIRECTIONAL))
		*mode = NODE_DHCHAP_BI;
	else if (!strcmp(value, RULES_CTX_DHCHAP_UNIDIRECTIONAL))
		*mode = NODE_DHCHAP_UNI;
	else
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
		                       "volume_context \"%s\" must be \"%s\" or \"%s\", not \"%s\"",
		                       RULES_CTX_DHCHAP, RULES_CTX_DHCHAP_BIDIRECTIONAL,
		                       RULES_CTX_DHCHAP_UNIDIRECTIONAL, value);
	return GRPC_OK;
}

/* Whether the fabrics device (a character device: the kernel's) lists its connect options
 * without dhchap_secret — the answer of a kernel that does not parse the option (it would
 * refuse the connect with EINVAL).  An older kernel that lists no options, or one that
 * lists it, is not refused here. */
static bool fabrics_lacks_dhchap(const char *dev_root)
{
	char path[PATH_MAX], buf[4096];
	struct stat sb;
	ssize_t n;
	int fd;
	if (snprintf(path, sizeof(path), "%s/nvme-fabrics", dev_root) >= (int)sizeof(path))
		return false;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return false;
	if (fstat(fd, &sb) < 0 || !S_ISCHR(sb.st_mode)) {
		close(fd);
		return false;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	return strstr(buf, "transport=") && !strstr(buf, "dhchap_secret=");
}

int node_dhchap_prepare(struct node *n, const char *id, enum node_dhchap_mode mode,
                        const char *hostnqn, struct model_dhchap_file *k,
                        struct nvme_connect_args *a, struct grpc_status *st)
{
	struct err e = {0};
	int r;
	if (mode == NODE_DHCHAP_OFF && !n->dhchap)
		return GRPC_OK;
	if (fabrics_lacks_dhchap(n->dev_root))
		return mode == NODE_DHCHAP_OFF
		           ? GRPC_OK
		           : grpc_status_set(st, GRPC_FAILED_PRECONDITION, NO_HOST_AUTH, id);
	if (!n->dhchap)
		return grpc_status_set(st, GRPC_FAILED_PRECONDITION, NOT_ENABLED, id);
	pthread_mutex_lock(&n->dhchap_mu);
	r = node_dhchap_keys_ensure(n->state_dir, n->node_id, hostnqn, (uint64_t)time(NULL), k,
	                            NULL, &e);
	pthread_mutex_unlock(&n->dhchap_mu);
	if (r < 0)
		return grpc_status_set(st,
		                       r == -ENOSPC || r == -EDQUOT || r == -ENOMEM
		                           ? GRPC_RESOURCE_EXHAUSTED
		                           : GRPC_INTERNAL,
		                       "DH-HMAC-CHAP keys of this node: %s", e.msg);
	/* A volume without dhchap offers the host secret once keys are confirmed: its storage
	 * node's host entry may ask for it for another volume (a target that does not ask
	 * ignores it). */
	if (mode == NODE_DHCHAP_OFF && !k->has_current)
		return GRPC_OK;
	const struct model_dhchap_generation *g = node_dhchap_connect_gen(k);
	a->dhchap_secret = g->key;
	a->dhchap_ctrl_secret = mode == NODE_DHCHAP_BI ? g->ctrl_key : NULL;
	return GRPC_OK;
}

bool node_dhchap_fallback(const struct model_dhchap_file *k, enum node_dhchap_mode mode,
                          struct nvme_connect_args *a)
{
	if (!k->has_current || !k->has_next || a->dhchap_secret != k->current.key)
		return false;
	log_info("the target refused the current DH-HMAC-CHAP keys; trying the next generation");
	a->dhchap_secret = k->next.key;
	a->dhchap_ctrl_secret = mode == NODE_DHCHAP_BI ? k->next.ctrl_key : NULL;
	return true;
}

int node_dhchap_verify(struct node *n, const char *id, const char *ctrl, const char *nqn,
                       struct grpc_status *st)
{
	char path[PATH_MAX];
	struct err e = {0};
	if (!ctrl || !*ctrl ||
	    snprintf(path, sizeof(path), "%s/class/nvme/%s/dhchap_secret", n->sysfs_root, ctrl) >=
	        (int)sizeof(path) ||
	    access(path, F_OK) == 0)
		return GRPC_OK;
	log_error("the kernel connected without host authentication; disconnecting", "volume", id,
	          "controller", ctrl, "nqn", nqn);
	if (nvme_detach_subsys(&n->nvme, nqn, &e) < 0)
		log_error("disconnect failed", "volume", id, "nqn", nqn, "error", e.msg);
	return grpc_status_set(st, GRPC_FAILED_PRECONDITION, NO_HOST_AUTH, id);
}

int node_dhchap_connect_status(int r, const struct err *e, enum node_dhchap_mode mode,
                               const struct model_dhchap_file *k, const struct nvme_connect_args *a,
                               struct grpc_status *st)
{
	uint64_t generation =
	    a->dhchap_secret == k->next.key ? k->next.generation : k->current.generation;
	const char *msg = e->msg[0] ? e->msg : strerror(-r);
	if ((r == -ENOKEY || r == -EKEYREJECTED) && mode != NODE_DHCHAP_OFF)
		/* UNAVAILABLE: the node's keys reach the storage node through the controller, so
		 * a retry succeeds once they are there (new keys, a rotation in flight). */
		return grpc_status_set(
		    st, GRPC_UNAVAILABLE,
		    "%s; check that the storage node's agent holds this worker's DH-HMAC-CHAP keys "
		    "of generation %" PRIu64 " (published by the node plugin, installed by the "
		    "controller: docs/authentication.md)",
		    msg, generation);
	if (r == -ENOKEY || r == -EKEYREJECTED)
		return grpc_status_set(
		    st, GRPC_FAILED_PRECONDITION,
		    "%s; the volume's PillarProtocol has no nvmeofTcp.dhchap, yet "
		    "the target asks this worker to authenticate "
		    "(docs/authentication.md)",
		    msg);
	if (r == -EINVAL && mode != NODE_DHCHAP_OFF)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
		                       "%s; or the worker's kernel does not know dhchap_secret= "
		                       "(no CONFIG_NVME_HOST_AUTH: docs/authentication.md)",
		                       msg);
	return node_status_from_nvme(r, e, st);
}

void node_dhchap_start(struct node *n)
{
	struct model_dhchap_file k;
	struct err e = {0};
	if (!n->dhchap)
		return;
	if (fabrics_lacks_dhchap(n->dev_root)) {
		log_error("--dhchap: this worker's kernel has no NVMe host authentication "
		          "(CONFIG_NVME_HOST_AUTH); volumes that ask for it are refused");
		return;
	}
	pthread_mutex_lock(&n->dhchap_mu);
	int r = node_dhchap_keys_ensure(n->state_dir, n->node_id, n->id.hostnqn,
	                                (uint64_t)time(NULL), &k, NULL, &e);
	pthread_mutex_unlock(&n->dhchap_mu);
	model_dhchap_file_wipe(&k);
	if (r < 0)
		log_error("--dhchap: no DH-HMAC-CHAP keys; volumes that ask for authentication are "
		          "refused until this is fixed",
		          "error", e.msg);
}
