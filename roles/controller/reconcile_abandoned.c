/* Abandoned provisioning attempts (crds.md §7.6): a PillarVolumeState still Provisioning or
 * CreatePartial after 10 minutes, provisioned for a claim (spec.claimRef) that no longer exists
 * and never recorded as a success, is deleted through the normal DeleteVolume sequence, so the
 * backend volume and its export do not leak.  Volumes without claimRef are never touched.
 *
 * Unfinished creates after a power cut (csi_volume.c): a CreateVolume's Ready write is lazy,
 * so a cut may take it after the CO was answered, leaving the object at its intent.  Such an
 * object cannot be told from an attempt cut short before its answer; while the store notes
 * that lazy writes may have been lost (store_dir_lazy_lost), every unfinished object is taken
 * as answered: it is marked success-recorded (one durable write each, no agent needed), which
 * the reaper respects, and only then is the note removed.  Each unfinished object so marked is
 * provisioned again (csi_provision, as a CreateVolume retry would) until it is Ready.  The
 * marks come before any reaping, so the reaper never deletes a volume the CO may hold; the
 * price is that an attempt the CO gave up on during the cut is completed and kept (the
 * operator deletes it), never that a volume is lost. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "controller/csi.h"
#include "controller/pvst.h"
#include "controller/reconcile.h"
#include "model/kube.h"

static long long ts_of(const char *ts)
{
	struct tm tm = {0};
	if (!ts || !strptime(ts, "%Y-%m-%dT%H:%M:%SZ", &tm))
		return -1;
	return (long long)timegm(&tm);
}

static void unreadable_claim(void *arg, const struct store_kind *k, const char *ns,
                             const char *name, const char *error)
{
	(void)k;
	(void)ns;
	(void)name;
	(void)error;
	*(bool *)arg = true;
}

/* true when a PVC with this uid exists (any namespace), or the list cannot be read, or it
 * left out a claim it could not read (that one may be it) */
static bool claim_exists(struct ctl *c, const char *uid)
{
	struct model_pvc *items = NULL;
	size_t n = 0;
	bool found = false, unreadable = false;
	struct store_unreadable catch = {unreadable_claim, &unreadable}, prev;
	store_unreadable_catch(&catch, &prev);
	int r = model_list(c->st, &model_pvc_kind, NULL, NULL, (void **)&items, &n, NULL, NULL);
	store_unreadable_catch(&prev, NULL);
	if (r < 0 || unreadable) {
		model_list_free(&model_pvc_kind, items, n);
		return true; /* unknown: never delete on a guess */
	}
	for (size_t i = 0; i < n; i++)
		found |= items[i].meta.uid && strcmp(items[i].meta.uid, uid) == 0;
	model_list_free(&model_pvc_kind, items, n);
	return found;
}

/* crds.md §7.6: old, unfinished, provisioned for a claim, never recorded as a success, and
 * neither its PersistentVolume nor its claim exists. */
static bool abandoned(struct ctl *c, const struct model_pvst *v, long long now)
{
	const char *phase = v->status.phase, *name = v->meta.name;
	const char *uid = v->spec.has_claim_ref ? v->spec.claim_ref.uid : NULL;
	long long born = ts_of(v->meta.creation_timestamp);
	struct model_pv pv;
	if (!uid || !*uid || !v->spec.volume_id || !name || born < 0 ||
	    now - born < ABANDONED_AGE_S)
		return false;
	if (!phase || (strcmp(phase, "Provisioning") != 0 && strcmp(phase, "CreatePartial") != 0))
		return false;
	if (model_map_get(&v->meta.annotations, RULES_ANN_SUCCESS))
		return false;
	if (model_get(c->st, &model_pv_kind, NULL, name, &pv, NULL) != STORE_NOT_FOUND) {
		model_clear(&model_pv_kind, &pv);
		return false; /* a PV exists (or the store could not tell): not abandoned */
	}
	return !claim_exists(c, uid);
}

static bool unfinished(const struct model_pvst *v)
{
	const char *phase = v->status.phase ? v->status.phase : "";
	return !pvst_deleting(v) &&
	       (!*phase || !strcmp(phase, "Provisioning") || !strcmp(phase, "CreatePartial"));
}

/* Marks every unfinished object success-recorded; 0 when all are (the note then removed). */
static int mark_answered(struct ctl *c, struct model_pvst *items, size_t n, struct err *e)
{
	int failed = 0;
	for (size_t i = 0; i < n; i++) {
		struct model_pvst *v = &items[i];
		if (!unfinished(v) || model_map_get(&v->meta.annotations, RULES_ANN_SUCCESS))
			continue;
		struct err we = {0};
		int r = model_map_set(&v->meta.annotations, RULES_ANN_SUCCESS, "true");
		if (r == 0) /* conditional on the listed version */
			r = model_update(c->st, &model_pvst_kind, v, NULL, &we);
		if (r < 0 && !failed++)
			err_set(e, r, "marking PillarVolumeState \"%s\": %s", v->meta.name, we.msg);
	}
	if (failed)
		return e->code ? e->code : -EAGAIN;
	log_info("unfinished creates after lost lazy writes marked success-recorded");
	store_dir_lazy_recovered(c->st);
	return 0;
}

/* Provisions a marked unfinished object again, under its lock, read through. */
static void complete(struct ctl *c, const char *name, const char *uid)
{
	struct keylock_hold hold;
	struct model_pvst v;
	struct err e = {0};
	struct grpc_status gs = {0};
	Csi__V1__CreateVolumeResponse resp = CSI__V1__CREATE_VOLUME_RESPONSE__INIT;
	keylock_wait(&c->locks, &hold, name);
	int read = pvst_read(c, name, false, &v, &e), r = read;
	if (r == 0 && unfinished(&v) && !strcmp(v.meta.uid ? v.meta.uid : "", uid))
		r = csi_provision(c, &v, name, 0, &resp, &gs);
	keylock_release(&c->locks, &hold);
	if (read == 0)
		model_clear(&model_pvst_kind, &v);
	if (resp.volume)
		protobuf_c_message_free_unpacked(&resp.volume->base, NULL);
	if (r == GRPC_OK)
		log_info("unfinished create completed", "volume", name);
	else
		log_warn("unfinished create not completed yet", "volume", name, "error",
		         gs.msg[0] ? gs.msg : e.msg);
}

int reconcile_unfinished(struct ctl *c, struct err *e)
{
	struct model_pvst *items = NULL;
	size_t n = 0;
	int r = model_list(c->st, &model_pvst_kind, NULL, NULL, (void **)&items, &n, NULL, e);
	if (r == 0 && store_dir_lazy_lost(c->st))
		r = mark_answered(c, items, n, e);
	for (size_t i = 0; r == 0 && i < n; i++)
		if (unfinished(&items[i]) && items[i].meta.name && items[i].meta.uid &&
		    model_map_get(&items[i].meta.annotations, RULES_ANN_SUCCESS))
			complete(c, items[i].meta.name, items[i].meta.uid);
	model_list_free(&model_pvst_kind, items, n);
	return r;
}

int reconcile_abandoned(struct ctl *c, long long now, int *deleted, struct err *e)
{
	struct model_pvst *items = NULL;
	size_t n = 0;
	if (deleted)
		*deleted = 0;
	int r = reconcile_unfinished(c, e); /* its marks before any reaping */
	if (r < 0)
		return r;
	r = model_list(c->st, &model_pvst_kind, NULL, NULL, (void **)&items, &n, NULL, e);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		const struct model_pvst *v = &items[i];
		if (!abandoned(c, v, now))
			continue;
		const char *volid = v->spec.volume_id;
		Csi__V1__DeleteVolumeRequest req = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
		Csi__V1__DeleteVolumeResponse resp = CSI__V1__DELETE_VOLUME_RESPONSE__INIT;
		struct grpc_status gs = {0};
		req.volume_id = (char *)volid;
		int code = csi_delete_volume(c, &req, &resp, &gs);
		if (code == GRPC_OK) {
			log_info("abandoned provisioning attempt deleted", "volume", volid, "phase",
			         v->status.phase, "claimUID", v->spec.claim_ref.uid);
			if (deleted)
				(*deleted)++;
		} else {
			log_warn("abandoned provisioning attempt not deleted yet", "volume", volid,
			         "error", gs.msg);
		}
	}
	model_list_free(&model_pvst_kind, items, n);
	return 0;
}
