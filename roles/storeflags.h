/* storeflags — the flags of the kube store that every role opening the object store shares
 * (controller, node, and the CLI verbs get/apply/delete): --kubeconfig (standalone.md) and the
 * client-side rate limits --kube-api-qps/--kube-api-burst with the CSI sidecars' names and
 * defaults (5 and 10, kube/ratelimit.h).  --store itself stays each role's own flag.
 *
 * Use: `struct store_flags sf = STORE_FLAGS_INIT;`, append STORE_FLAG_DEFS(&sf) to the role's
 * flag_def table, then store_flags_opts() after parsing.
 */
#ifndef PILLAR_ROLES_STOREFLAGS_H
#define PILLAR_ROLES_STOREFLAGS_H

#include <stdint.h>

#include "base/err.h"
#include "base/flags.h"
#include "store/store.h"

struct store_flags {
	const char *kubeconfig; /* NULL: in-cluster configuration */
	const char *qps;        /* decimal, e.g. "5" or "20.5" */
	int64_t burst;
};

/* clang-format off */
#define STORE_FLAGS_INIT {NULL, "5", 10}

#define STORE_FLAG_DEFS(f)                                                                        \
	{"kubeconfig", FLAG_STRING, &(f)->kubeconfig,                                             \
	 "kubeconfig file for --store=kube (default: the in-cluster configuration)", false},      \
	{"kube-api-qps", FLAG_STRING, &(f)->qps,                                                  \
	 "API requests per second this client may send (default 5)", false},                      \
	{"kube-api-burst", FLAG_INT, &(f)->burst,                                                 \
	 "API requests this client may send in a burst (default 10)", false}
/* clang-format on */

/* Checks the flag values and fills o for store_open (component: the User-Agent product, e.g.
 * "pillar-csi-controller").  0, or -EINVAL with a usage message in e ("--kube-api-qps must be a
 * positive number", "--kube-api-burst must be at least 1"). */
int store_flags_opts(const struct store_flags *f, const char *component, struct store_open_opts *o,
                     struct err *e);

#endif
