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
 *     the current keys gets the one secret that changed through
 *     /sys/class/nvme/nvmeX/dhchap_secret or dhchap_ctrl_secret (the kernel re-authenticates
 *     it without dropping I/O), and `next` becomes `current`;
 *   - without `next`: a new value of the Node annotation pillar-csi.bhyoo.com/dhchap-rotate (set
 *     by `pillar-csi dhchap rotate <node>`), or current keys older than the rotation interval,
 *     start a rotation.
 * A rotation is two generations, each changing one secret: first a new host secret with the
 * current controller secret, then (once the first is current, marked in the key file so that a
 * restart resumes it) a new controller secret with that host secret.  Each write to a live
 * controller thus starts one re-authentication that pairs secrets the target already holds; a
 * generation changing both would have the first of two writes pair a new host secret with an
 * old controller secret, which the target refuses (it holds the new pair), and the kernel's
 * error recovery then races the second write's re-authentication.
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

/* Re-keys the live controllers below sysfs_root from the keys of from to those of to, which
 * differ in one secret (a half of a rotation): the new host secret into every controller whose
 * dhchap_secret is from's, or the new controller secret into every controller whose
 * dhchap_ctrl_secret is from's and whose dhchap_secret is to's.  One attribute per controller,
 * so that the re-authentication it starts pairs secrets the target holds.  Returns the number
 * of controllers updated (0 when from and to hold the same secrets), -EINVAL (e set, nothing
 * written) when they differ in both, or a negative errno (e set) for the first failed write
 * (the others are still tried). */
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
