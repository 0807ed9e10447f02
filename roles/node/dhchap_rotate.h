/* node/dhchap_rotate — the node's side of DH-HMAC-CHAP key publication, confirmation and
 * rotation (docs/authentication.md "Keys", "Rotation").
 *
 * One step (node_dhchap_tick), run every few seconds by a thread of the node plugin with
 * --dhchap:
 *   - `next` keys that are not yet published are published (the Secret
 *     pillar-csi-dhchap-<node>-<generation>; AlreadyExists means an earlier attempt of this
 *     node made it: the name carries node and generation, and only this node may create it);
 *   - once the controller confirms `next` (CSINode annotation
 *     pillar-csi.bhyoo.com/dhchap-generation), every live controller that authenticates with
 *     the current keys gets the new ones through /sys/class/nvme/nvmeX/dhchap_secret and
 *     dhchap_ctrl_secret (the kernel re-authenticates it without dropping I/O), and `next`
 *     becomes `current`;
 *   - without `next`: a new value of the Node annotation pillar-csi.bhyoo.com/dhchap-rotate (set
 *     by `pillar-csi dhchap rotate <node>`), or current keys older than the rotation interval,
 *     make new `next` keys.
 * The sources are hooks, so that the store (kube or embedded) and tests plug in alike.
 */
#ifndef PILLAR_ROLES_NODE_DHCHAP_ROTATE_H
#define PILLAR_ROLES_NODE_DHCHAP_ROTATE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "node/dhchap.h"
#include "rules/keys.h"

struct node_dhchap_hooks {
	/* The generation the controller confirmed for node: 0 with *gen (0: none yet). */
	int (*confirmed)(void *ctx, const char *node, uint64_t *gen, struct err *e);
	/* The node's rotation request (the annotation's value, "" for none) into buf. */
	int (*requested)(void *ctx, const char *node, char *buf, size_t cap, struct err *e);
	/* Creates the Secret of k's `next` keys: 0, -EEXIST (it exists), or another errno. */
	int (*publish)(void *ctx, const char *node, const struct model_dhchap_file *k,
	               struct err *e);
	void *ctx;
};

struct node;

/* One step (above) at Unix time now, with rotation interval interval_s (0: never).  0, or a
 * negative errno with e set (the next step tries again). */
int node_dhchap_tick(struct node *n, const struct node_dhchap_hooks *h, uint64_t now,
                     uint64_t interval_s, struct err *e);

/* Writes the keys of to into every controller below sysfs_root whose dhchap_secret (and
 * dhchap_ctrl_secret) is the one of from: the host secret first, then the controller
 * secret.  Returns the number of controllers updated, or a negative errno (e set) for the
 * first failed write (the others are still tried). */
int node_dhchap_live_rotate(const char *sysfs_root, const struct model_dhchap_generation *from,
                            const struct model_dhchap_generation *to, struct err *e);

/* The thread that runs node_dhchap_tick every period_ms (the first step at once); h and n must
 * outlive it.  0 or a negative errno. */
struct node_dhchap_loop;
int node_dhchap_loop_start(struct node_dhchap_loop **out, struct node *n,
                           const struct node_dhchap_hooks *h, uint64_t interval_s, int period_ms,
                           struct err *e);
/* Stops and frees the thread; NULL is a no-op. */
void node_dhchap_loop_stop(struct node_dhchap_loop *l);

/* Hooks over an object store (ctx = store *): the CSINode and Node annotations above, and the
 * Secret created through the API in namespace (POD_NAMESPACE) when the store is the API
 * server's; the embedded store keeps no Secrets yet, so publishing there is logged once and
 * counted as done. */
void node_dhchap_store_hooks(struct node_dhchap_hooks *h, void *st);

#endif
