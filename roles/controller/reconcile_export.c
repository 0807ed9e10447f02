/* reconcile_export — ReconcileState requests built from PillarVolumeStates: the full restore
 * (agent-api.md §12.2), the per-volume and per-agent resyncs (§12.3) and the mapping of the
 * results to ExportReconciled (§12.4). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/time.h"
#include "controller/agents.h"
#include "controller/dhchap.h"
#include "controller/metrics.h"
#include "controller/pvst.h"
#include "controller/reconcile.h"
#include "controller/reconcile_batch.h"
#include "rules/conditions.h"

struct cond_update {
	const char *reason, *message;
	const char *digest; /* for Reconciled: the digest the agent confirmed (NULL: unchanged) */
};

static int m_exportcond(struct model_pvst *v, void *arg, struct grpc_status *gs)
{
	(void)gs;
	struct cond_update *s = arg;
	bool ok = !strcmp(s->reason, RULES_REASON_RECONCILED);
	int r = model_cond_set(&v->status.conditions, RULES_COND_EXPORT_RECONCILED,
	                       ok ? "True" : "False", s->reason, s->message, v->meta.generation);
	if (r >= 0 && ok && s->digest &&
	    (!v->status.reconciled_digest || strcmp(v->status.reconciled_digest, s->digest))) {
		if (model_str_set(&v->status.reconciled_digest, s->digest) < 0)
			return grpc_status_oom(gs);
		r = 1;
	}
	return r > 0 ? 0 : r == 0 ? PVST_SKIP : grpc_status_oom(gs);
}

static void set_export_cond(struct ctl *c, const char *name, const char *uid, const char *reason,
                            const char *msg, const char *digest)
{
	struct cond_update s = {reason, msg ? msg : "", digest};
	struct grpc_status gs = {0};
	pvst_update(c, name, uid, m_exportcond, &s, NULL, &gs);
}

void reconcile_set_export_cond(struct ctl *c, const struct model_pvst *v, const char *reason,
                               const char *msg)
{
	set_export_cond(c, v->meta.name, v->meta.uid, reason, msg, NULL);
}

/* ExportReconciled of a volume read under its lock (x): written only when the condition as read
 * differs, so an unchanged outcome costs no store access; a changed one is written through
 * pvst_update (pinned to the UID read).
 *
 * Reconciled also records the digest of what the item carried (status.reconciledDigest,
 * vdigest.h) in the same write; on its own, the digest is written by a one-volume resync (a
 * change the agent just confirmed) and in place of another one recorded, never merely because
 * none is: a whole-agent pass over volumes recorded before the digest existed writes nothing. */
static void set_cond_if_changed(struct ctl *c, const struct batch_item *x, bool whole,
                                const char *reason, const char *msg)
{
	bool ok = x->state == BATCH_ITEM_EXPORTED && !strcmp(reason, RULES_REASON_RECONCILED);
	bool digest = ok && !x->digest_recorded && (!whole || x->digest_stale);
	if (digest || !batch_item_cond_same(x, reason, msg))
		set_export_cond(c, x->name, x->uid, reason, msg, ok ? x->digest : NULL);
}

/* The result for volume_id: results[at] when it is that volume's (the agent answers in request
 * order), else the first one that is; NULL when none. */
static const PillarCsi__Agent__V1__VolumeReconcileResult *
result_of(const PillarCsi__Agent__V1__ReconcileStateResponse *resp, const char *volume_id,
          size_t at)
{
	const PillarCsi__Agent__V1__VolumeReconcileResult *res;
	if (!resp)
		return NULL;
	if (at < resp->n_results && (res = resp->results[at])->volume_id &&
	    !strcmp(res->volume_id, volume_id))
		return res;
	for (size_t k = 0; k < resp->n_results; k++)
		if ((res = resp->results[k])->volume_id && !strcmp(res->volume_id, volume_id))
			return res;
	return NULL;
}

/* The ExportReconciled reason and message of the volume at position at of the request after the
 * RPC (§12.4). */
static void map_result(int r, const struct grpc_status *ast,
                       const PillarCsi__Agent__V1__ReconcileStateResponse *resp,
                       const char *volume_id, size_t at, const char **reason, const char **msg)
{
	*reason = RULES_REASON_AGENT_UNAVAILABLE;
	*msg = ast->msg;
	if (r == GRPC_OK) {
		*reason = RULES_REASON_RECONCILE_FAILED;
		*msg = "the agent returned no result for this volume";
		const PillarCsi__Agent__V1__VolumeReconcileResult *res =
		    result_of(resp, volume_id, at);
		if (res) {
			if (res->success) {
				*reason = RULES_REASON_RECONCILED;
				*msg = "";
			} else {
				static const char stale[] =
				    "FAILED_PRECONDITION: stale fencing token";
				*msg = res->error_message ? res->error_message : "";
				*reason = !strncmp(*msg, stale, sizeof(stale) - 1)
				              ? RULES_REASON_STALE_GENERATION
				              : RULES_REASON_RECONCILE_FAILED;
			}
		}
	} else if (r != GRPC_UNAVAILABLE && r != GRPC_DEADLINE_EXCEEDED) {
		*reason = RULES_REASON_RECONCILE_FAILED;
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sends the request (or not: no address, nothing to resync); returns the RPC's code. */
static int send(struct ctl *c, const char *agent, const char *addr, bool complete,
                const struct grpc_status *noaddr, PillarCsi__Agent__V1__ReconcileStateRequest *q,
                PillarCsi__Agent__V1__ReconcileStateResponse **resp, struct grpc_status *ast)
{
	if (!addr) {
		*ast = *noaddr; /* no address to dial: nothing is sent */
		return GRPC_UNAVAILABLE;
	}
	if (q->n_volumes == 0 && !complete)
		return GRPC_OK; /* nothing to resync */
	int r = agentclient_reconcile_state(c->ac, addr, q, resp, ast);
	if (r != GRPC_OK && agentclient_restore_pending(ast) && c->restore_kick)
		c->restore_kick(c->restore_kick_arg, agent);
	return r;
}

/* The DH-HMAC-CHAP keys of the items that ask for authentication (controller/dhchap.h), the
 * workers' Secrets listed once; -ENOMEM (what was added is freed with the request). */
static int attach_keys(struct ctl *c, struct dhchap_pass *p, const char *agent,
                       struct batch_item **order, PillarCsi__Agent__V1__VolumeDesiredState **vols,
                       size_t n)
{
	int r = 0;
	for (size_t i = 0; i < n && r == 0; i++)
		if (order[i]->dhchap_hash && vols[i]->n_exports == 1)
			r = dhchap_attach(c, p, i, agent, order[i]->name, order[i]->dhchap_hash,
			                  order[i]->dhchap_group, order[i]->dhchap_bidirectional,
			                  order[i]->initiator_nodes, vols[i]->exports[0]);
	return r;
}

/* Which generation of which node's keys the agent holds now (dhchap_record). */
static void record_keys(struct ctl *c, const char *agent, bool whole, const struct dhchap_pass *p,
                        int r, const PillarCsi__Agent__V1__ReconcileStateResponse *resp,
                        struct batch_item **order, size_t n)
{
	if (!p->n && !whole)
		return;
	bool *ok = calloc(n ? n : 1, sizeof(*ok));
	if (!ok)
		return; /* unrecorded: the node waits for the next whole pass */
	for (size_t i = 0; i < n; i++) {
		const PillarCsi__Agent__V1__VolumeReconcileResult *res =
		    result_of(resp, order[i]->volume_id, i);
		ok[i] = r == GRPC_OK && res && res->success;
	}
	dhchap_record(c, agent, whole && r == GRPC_OK, p, ok, n);
	free(ok);
}

static void detach_keys(PillarCsi__Agent__V1__VolumeDesiredState **vols, size_t n)
{
	for (size_t i = 0; vols && i < n; i++)
		if (vols[i]->n_exports == 1)
			dhchap_detach(vols[i]->exports[0]);
}

/* One ReconcileState over the exported items and ExportReconciled from its results; the items
 * without exportSpec get ExportSpecMissing (§12.2 step 2). */
static int reconcile_built(struct ctl *c, const char *agent, const char *addr, bool complete,
                           bool whole, const struct grpc_status *noaddr,
                           const struct reconcile_sent *sent, const struct reconcile_batch *b,
                           struct grpc_status *gs)
{
	unsigned epoch = atomic_load(&c->agents_epoch);
	struct dhchap_pass keys = {0};
	struct batch_item **order = NULL;
	PillarCsi__Agent__V1__VolumeDesiredState **vols = NULL;
	size_t n = 0;
	int r;
	for (size_t i = 0; i < b->n; i++)
		if (b->items[i].state == BATCH_ITEM_NO_SPEC)
			set_cond_if_changed(c, &b->items[i], whole,
			                    RULES_REASON_EXPORT_SPEC_MISSING,
			                    "status.exportSpec is missing; the controller will not "
			                    "guess it (see operations.md §9)");
	if (reconcile_batch_request(b, &order, &vols, &n) < 0 ||
	    attach_keys(c, &keys, agent, order, vols, n) < 0) {
		detach_keys(vols, n);
		reconcile_batch_request_free(vols, n);
		vols = NULL;
		r = grpc_status_oom(gs);
		if (sent && sent->fn)
			sent->fn(sent->arg, r, gs);
		goto out;
	}
	PillarCsi__Agent__V1__ReconcileStateRequest q =
	    PILLAR_CSI__AGENT__V1__RECONCILE_STATE_REQUEST__INIT;
	PillarCsi__Agent__V1__ReconcileStateResponse *resp = NULL;
	struct grpc_status ast = {0};
	q.volumes = vols;
	q.n_volumes = n;
	q.complete = complete;
	r = send(c, agent, addr, complete, noaddr, &q, &resp, &ast);
	detach_keys(vols, n);
	if (addr)
		record_keys(c, agent, whole, &keys, r, resp, order, n);
	reconcile_batch_request_free(
	    vols, n); /* before the writes: the request's memory is not held across them */
	vols = NULL;
	if (sent && sent->fn)
		sent->fn(sent->arg, r, &ast);
	for (size_t i = 0; i < n; i++) {
		const char *reason, *msg;
		if (!complete && r != GRPC_OK && atomic_load(&c->agents_epoch) != epoch)
			break; /* the agent changed meanwhile: its restore (or next pass) records them */
		map_result(r, &ast, resp, order[i]->volume_id, i, &reason, &msg);
		/* an agent that cannot be reached is its PillarAgent's condition, which readers
		 * derive each volume's from (model/outage.h): nothing is written per volume */
		if (strcmp(reason, RULES_REASON_AGENT_UNAVAILABLE) != 0)
			set_cond_if_changed(c, order[i], whole, reason, msg);
	}
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	gs->code = r;
	snprintf(gs->msg, sizeof(gs->msg), "%s", ast.msg);
out:
	dhchap_pass_free(&keys);
	free(order);
	return r;
}

/* One pass of the agent with every volume of b locked: read again when an operation ended
 * since b was read (then no operation on any of them ended in between, nor was one running:
 * its lock would have had to be released to us), then the request.  names (sorted) are copies
 * of b's names.  GRPC_OK, or an error in gs: then
 * no request goes out (one without a volume's initiators would revoke them, a complete one
 * without a volume would leave it unexported). */
static int locked_pass(struct ctl *c, const char *agent, const char *addr, const char *only,
                       bool complete, const struct grpc_status *noaddr,
                       const struct reconcile_sent *sent, struct reconcile_batch *b, bool reread,
                       const char *const *names, size_t nnames, struct grpc_status *gs)
{
	int r = GRPC_OK;
	if (reread)
		r = reconcile_batch_reread(c, agent, only, b, names, nnames, gs);
	/* a change-triggered resync of an export this controller's CreateVolume has just built
	 * and recorded, the volume unchanged since (ctl.h ctl_export_take) */
	if (r == GRPC_OK && only && b->n == 1 && b->items[0].state == BATCH_ITEM_EXPORTED &&
	    ctl_export_take(c, only, b->items[0].resource_version))
		return GRPC_OK;
	if (r == GRPC_OK && complete && !only) {
		uint64_t t0 = time_mono_ns();
		r = reconcile_built(c, agent, addr, complete, true, noaddr, sent, b, gs);
		size_t exported = 0;
		for (size_t i = 0; i < b->n; i++)
			exported += b->items[i].state == BATCH_ITEM_EXPORTED;
		ctl_metrics_restore(agent, exported, (double)(time_mono_ns() - t0) / 1e9);
		return r;
	}
	if (r == GRPC_OK)
		return reconcile_built(c, agent, addr, complete, !only, noaddr, sent, b, gs);
	if (sent && sent->fn)
		sent->fn(sent->arg, r,
		         gs); /* nothing sent: a restore records ExportRestoreFailed */
	return r;
}

int reconcile_exports(struct ctl *c, const char *agent, const char *addr, const char *only,
                      bool complete, const struct grpc_status *noaddr,
                      const struct reconcile_sent *sent, struct grpc_status *gs)
{
	struct reconcile_batch b = {.agent = only ? agent : NULL};
	char akey[300];
	struct keylock_hold ahold;
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	/* One request per agent at a time: the restore and the resyncs never interleave (volume
	 * names contain no '/', so this key is nobody's volume lock).  Taken before any volume
	 * lock, and no holder of a volume lock waits for it. */
	snprintf(akey, sizeof(akey), "PillarAgent/%s", agent);
	keylock_wait(&c->locks, &ahold, akey);
	unsigned long released = keylock_releases(&c->locks);
	int r = reconcile_batch_read(c, agent, only, &b, gs);
	/* the names are copied: b is read again under the locks when an operation ended */
	struct model_strs names = {0};
	for (size_t i = 0; r == GRPC_OK && i < b.n; i++)
		if (model_strs_add(&names, b.items[i].name) < 0)
			r = grpc_status_oom(gs);
	struct keylock_hold *holds =
	    r != GRPC_OK ? NULL : calloc(names.n ? names.n : 1, sizeof(*holds));
	if (!holds) {
		reconcile_batch_clear(&b);
		model_strs_clear(&names);
		keylock_release(&c->locks, &ahold);
		return r != GRPC_OK ? r : grpc_status_oom(gs);
	}
	qsort(names.v, names.n, sizeof(char *), cmp_str);
	/* the per-volume locks in name order */
	for (size_t i = 0; i < names.n; i++)
		keylock_wait(&c->locks, &holds[i], names.v[i]);
	bool reread = keylock_releases(&c->locks) != released; /* an operation ended */
	r = locked_pass(c, agent, addr, only, complete, noaddr, sent, &b, reread,
	                (const char *const *)names.v, names.n, gs);
	if (!only) /* what this pass read, for the next (a written outcome moves the version) */
		reconcile_batch_keep(c, agent, &b);
	reconcile_batch_clear(&b);
	for (size_t i = names.n; i > 0; i--)
		keylock_release(&c->locks, &holds[i - 1]);
	keylock_release(&c->locks, &ahold);
	free(holds);
	model_strs_clear(&names);
	struct err e = {0};
	if (!only && addr && dhchap_confirm(c, &e) < 0) /* after the locks: CSINodes, Secrets */
		log_warnf("DH-HMAC-CHAP confirmation: %s", e.msg);
	return r;
}

int reconcile_agent_restore(struct ctl *c, const char *agent, const char *addr,
                            const struct reconcile_sent *sent, struct grpc_status *gs)
{
	return reconcile_exports(c, agent, addr, NULL, true, NULL, sent, gs);
}

/* The agent's address, or NULL with the reason in *why (UNAVAILABLE). */
static const char *agent_addr(struct ctl *c, const char *agent, char *buf, size_t cap,
                              struct grpc_status *why)
{
	int r = agents_address(c, agent, buf, cap, why);
	if (r == GRPC_NOT_FOUND)
		grpc_status_set(why, GRPC_UNAVAILABLE, "PillarAgent \"%s\" not found", agent);
	return r == GRPC_OK ? buf : NULL;
}

int reconcile_volume(struct ctl *c, const char *name, struct err *e)
{
	struct model_pvst v;
	char addr[300];
	struct grpc_status why = {0}, gs = {0};
	int r = model_get(c->st, &model_pvst_kind, NULL, name, &v, e);
	if (r == STORE_NOT_FOUND)
		return 0;
	if (r < 0)
		return r;
	char agent[254];
	snprintf(agent, sizeof(agent), "%s", v.spec.agent_ref ?: "");
	bool ok = batch_item_eligible(&v) && agent[0];
	model_clear(&model_pvst_kind, &v);
	if (!ok)
		return 0;
	const char *a = agent_addr(c, agent, addr, sizeof(addr), &why);
	reconcile_exports(c, agent, a, name, false, &why, NULL, &gs);
	if (gs.code == GRPC_INTERNAL)
		return err_set(e, -ENOMEM, "%s", gs.msg);
	return 0;
}

int reconcile_agent_resync(struct ctl *c, const char *agent, struct err *e)
{
	char addr[300];
	struct grpc_status why = {0}, gs = {0};
	const char *a = agent_addr(c, agent, addr, sizeof(addr), &why);
	reconcile_exports(c, agent, a, NULL, false, &why, NULL, &gs);
	if (gs.code == GRPC_INTERNAL)
		return err_set(e, -ENOMEM, "%s", gs.msg);
	return 0;
}
