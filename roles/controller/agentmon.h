/* agentmon — notices an agent restart, a storage-node reboot or an outage within a second,
 * not only at the next periodic PillarAgent pass.
 *
 * One thread looks at every known agent each AGENTMON_FAST_MS.  A serving agent whose connection
 * is still the one of its last probe (agentclient_conn_id; a restart drops it) costs nothing
 * until AGENTMON_REPROBE_MS have passed (a host that vanished without closing it); one whose
 * last probe found it unreachable, or whose connection dropped, is probed again after
 * AGENTMON_FAST_MS (a refused connection costs next to nothing, and an agent back from a reboot
 * is noticed within that, not within a whole tick); any other (gated: its restore may be
 * running) after AGENTMON_TICK_MS (agentmon_due).  A probe is agentclient_probe (HealthCheck
 * with a short deadline, reconnecting at once): a
 * dropped connection shows as a failed probe or a new connection, a restarted agent as one whose
 * restore gate is closed (export_restore_pending).  Whenever an
 * agent's probe state (unreachable / gate closed / serving) differs from the previous probe's,
 * kick(arg, name) runs, and the PillarAgent reconcile does the rest (status, the restore).  A
 * state that stays the same kicks nothing, so an agent that stays down costs one probe per tick
 * and no store write.  With a transport that has no connections (agentclient_probe -ENOTSUP,
 * the unit tests' scripted fake) the thread probes nothing.
 *
 * agentmon_set records or forgets (addr NULL) an agent's resolved address and the state its
 * PillarAgent's status records (agentmon_recorded); the loop feeds it from the PillarAgent watch.
 * A recorded state other than AGENTMON_UNKNOWN becomes the state the next probe is compared
 * with: a probe that agrees with the status kicks nothing (a controller that starts does not
 * reconcile every agent twice, once for its listed PillarAgent and once for the first probe),
 * one that disagrees kicks, as does a later change.  Functions return 0 or a negative errno.
 */
#ifndef PILLAR_ROLES_CONTROLLER_AGENTMON_H
#define PILLAR_ROLES_CONTROLLER_AGENTMON_H

#include "controller/ctl.h"
#include "model/pillar.h"

#define AGENTMON_FAST_MS    100
#define AGENTMON_TICK_MS    500
#define AGENTMON_PROBE_MS   1000 /* deadline of one probe */
#define AGENTMON_REPROBE_MS 5000

struct agentmon;

enum agentmon_state { AGENTMON_UNKNOWN, AGENTMON_DOWN, AGENTMON_GATED, AGENTMON_SERVING };

/* Whether an agent in state (its last probe's, or as recorded) is probed now, since_ms after its
 * last probe: a serving agent whose connection is still that probe's (same_conn) after
 * AGENTMON_REPROBE_MS, a gated one after AGENTMON_TICK_MS, any other (unreachable, unknown, or
 * serving on a dropped connection) after AGENTMON_FAST_MS. */
bool agentmon_due(enum agentmon_state state, bool same_conn, int64_t since_ms);

/* The state pa's status records: AgentConnected False: down; True with ExportsReady
 * ExportsServing: serving, with ExportRestorePending or ExportRestoreFailed: gated; anything
 * else (no status yet): unknown. */
enum agentmon_state agentmon_recorded(const struct model_pa *pa);

/* 0, -ENOMEM or -EAGAIN (no thread). */
int agentmon_start(struct ctl *c, void (*kick)(void *arg, const char *agent), void *arg,
                   struct agentmon **out);
/* Stops and joins the thread and frees everything.  NULL is a no-op. */
void agentmon_stop(struct agentmon *m);
/* The agent's address ("ip:port"), or NULL when it has none or is gone, and its recorded state.
 * A new or changed address starts in the recorded state (unknown: the next probe's result
 * kicks).  0, or -ENOMEM: the agent is then not monitored (not at its old address either) until
 * a later call succeeds; the loop calls again from the next periodic pass (agentmon_lost). */
int agentmon_set(struct agentmon *m, const char *agent, const char *addr,
                 enum agentmon_state recorded);
/* Whether an agentmon_set failed since the previous call (which clears it).  NULL: false. */
bool agentmon_lost(struct agentmon *m);

#endif
