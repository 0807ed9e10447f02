/* reconcile_class — PillarProtocol (crds.md §4.2) and PillarStorageClass (§6.2, §6.3) status,
 * the generated StorageClass with its update rules and carry-over annotation, finalizers and
 * deletion (§14). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/log.h"
#include "controller/reconcile.h"
#include "controller/resolve.h"

#define SC_API_VERSION "storage.k8s.io/v1"

static const cJSON *spec_of(const cJSON *o)
{
	return cJSON_GetObjectItemCaseSensitive(o, "spec");
}

static void add_unique_sorted(cJSON *arr, const char *s)
{
	int i = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, arr)
	{
		int c = strcmp(it->valuestring, s);
		if (c == 0)
			return;
		if (c > 0)
			break;
		i++;
	}
	cJSON_InsertItemInArray(arr, i, cJSON_CreateString(s));
}

/* ---- PillarProtocol ------------------------------------------------------------------------------ */

int reconcile_protocol(struct ctl *c, const char *name, struct err *e)
{
	cJSON *pstr = NULL, *pscs = NULL, *before = NULL;
	int r = store_get(c->st, kind_of("PillarProtocol"), NULL, name, &pstr, e);
	if (r == STORE_NOT_FOUND)
		return 0;
	if (r < 0)
		return r;
	cJSON *all = NULL;
	if ((r = store_list(c->st, kind_of("PillarStorageClass"), NULL, NULL, &all, NULL, e)) < 0)
		goto out;
	pscs = cJSON_CreateArray();
	cJSON *agents = cJSON_CreateArray();
	const cJSON *it;
	cJSON_ArrayForEach(it, all)
	{
		const char *ref = json_get_str(spec_of(it), "protocolRef");
		if (!ref || strcmp(ref, name))
			continue;
		cJSON_AddItemToArray(pscs, cJSON_CreateString(store_meta_str(it, "name")));
		/* agents reachable through the class's store (both objects exist) */
		const char *sref = json_get_str(spec_of(it), "storeRef");
		cJSON *pst = NULL, *pa = NULL;
		if (sref && store_get(c->st, kind_of("PillarStore"), NULL, sref, &pst, NULL) == 0) {
			const char *aref = json_get_str(spec_of(pst), "agentRef");
			if (aref &&
			    store_get(c->st, kind_of("PillarAgent"), NULL, aref, &pa, NULL) == 0)
				add_unique_sorted(agents, aref);
		}
		cJSON_Delete(pa);
		cJSON_Delete(pst);
	}
	cJSON_Delete(all);
	bool deleting = store_meta_str(pstr, "deletionTimestamp") != NULL;
	struct deps d = {0};
	if (deleting) {
		deps_objects(&d, "PillarStorageClass", pscs);
		if (!d.msg[0]) {
			cJSON_Delete(agents);
			r = reconcile_finalizer(c, pstr, RULES_FINALIZER_PROTOCOL, false, e);
			r = r == STORE_NOT_FOUND ? 0 : r;
			goto out;
		}
	} else if ((r = reconcile_finalizer(c, pstr, RULES_FINALIZER_PROTOCOL, true, e)) < 0) {
		cJSON_Delete(agents);
		r = r == STORE_NOT_FOUND ? 0 : r;
		goto out;
	}
	int64_t og = reconcile_generation(pstr);
	cJSON *status = reconcile_status_of(pstr);
	before = cJSON_Duplicate(status, true);
	cJSON_DeleteItemFromObjectCaseSensitive(status, "storageClassCount");
	cJSON_AddNumberToObject(status, "storageClassCount", cJSON_GetArraySize(pscs));
	cJSON_DeleteItemFromObjectCaseSensitive(status, "activeAgents");
	cJSON_AddItemToObject(status, "activeAgents", agents);
	static const char *const none[] = {NULL};
	reconcile_ready(status, none, "ProtocolReady", deleting ? d.msg : NULL, og);
	r = reconcile_write_status(c, pstr, before, e);
	if (r == STORE_CONFLICT || r == STORE_NOT_FOUND)
		r = 0;
out:
	cJSON_Delete(before);
	cJSON_Delete(pscs);
	cJSON_Delete(pstr);
	return r;
}

/* ---- the generated StorageClass (§6.3) ------------------------------------------------------------ */

static const char *sc_name_of(const cJSON *psc)
{
	const char *n =
	    json_get_str(cJSON_GetObjectItemCaseSensitive(spec_of(psc), "storageClass"), "name");
	return n && *n ? n : store_meta_str(psc, "name");
}

static cJSON *desired_sc(const cJSON *psc)
{
	const char *psc_name = store_meta_str(psc, "name");
	const cJSON *scs = cJSON_GetObjectItemCaseSensitive(spec_of(psc), "storageClass");
	const cJSON *fs = cJSON_GetObjectItemCaseSensitive(spec_of(psc), "filesystem");
	cJSON *sc = cJSON_CreateObject();
	cJSON_AddStringToObject(sc, "apiVersion", SC_API_VERSION);
	cJSON_AddStringToObject(sc, "kind", "StorageClass");
	cJSON *meta = cJSON_AddObjectToObject(sc, "metadata");
	cJSON_AddStringToObject(meta, "name", sc_name_of(psc));
	cJSON *labels = cJSON_AddObjectToObject(meta, "labels");
	cJSON_AddStringToObject(labels, RULES_LABEL_MANAGED_BY, "pillar-csi");
	cJSON_AddStringToObject(labels, RULES_LABEL_PSC, psc_name);
	cJSON *owner = cJSON_CreateObject();
	cJSON_AddStringToObject(owner, "apiVersion", kind_of("PillarStorageClass")->api_version);
	cJSON_AddStringToObject(owner, "kind", "PillarStorageClass");
	cJSON_AddStringToObject(owner, "name", psc_name);
	cJSON_AddStringToObject(owner, "uid", store_meta_str(psc, "uid") ?: "");
	cJSON_AddBoolToObject(owner, "controller", true);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(meta, "ownerReferences"), owner);
	cJSON_AddStringToObject(sc, "provisioner", RULES_DRIVER_NAME);
	cJSON *params = cJSON_AddObjectToObject(sc, "parameters");
	cJSON_AddStringToObject(params, RULES_KEY_PREFIX "storage-class", psc_name);
	cJSON_AddStringToObject(params, "csi.storage.k8s.io/fstype",
	                        json_get_str(fs, "fsType") ?: "ext4");
	const cJSON *mo = cJSON_GetObjectItemCaseSensitive(fs, "mountOptions");
	if (cJSON_GetArraySize(mo) > 0)
		cJSON_AddItemToObject(sc, "mountOptions", cJSON_Duplicate(mo, true));
	cJSON_AddStringToObject(sc, "reclaimPolicy",
	                        json_get_str(scs, "reclaimPolicy") ?: "Delete");
	cJSON_AddStringToObject(sc, "volumeBindingMode",
	                        json_get_str(scs, "volumeBindingMode") ?: "Immediate");
	bool exp = true;
	json_get_bool(scs, "allowVolumeExpansion", &exp);
	cJSON_AddBoolToObject(sc, "allowVolumeExpansion", exp);
	return sc;
}

static bool same(const cJSON *a, const cJSON *b, const char *key)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(a, key),
	            *y = cJSON_GetObjectItemCaseSensitive(b, key);
	if (!x || !y)
		return !x && !y;
	return cJSON_Compare(x, y, true);
}

/* Kubernetes forbids changing these: a difference means delete and recreate. */
static bool needs_recreate(const cJSON *cur, const cJSON *want)
{
	return !same(cur, want, "provisioner") || !same(cur, want, "parameters") ||
	       !same(cur, want, "reclaimPolicy") || !same(cur, want, "volumeBindingMode");
}

/* Sets the PSC-owned fields that can change in place on cur; true when anything changed.
 * Labels and annotations users added are kept. */
static bool patch_in_place(cJSON *cur, const cJSON *want)
{
	bool changed = false;
	static const char *const keys[] = {"mountOptions", "allowVolumeExpansion"};
	for (size_t i = 0; i < 2; i++) {
		if (same(cur, want, keys[i]))
			continue;
		cJSON_DeleteItemFromObjectCaseSensitive(cur, keys[i]);
		const cJSON *w = cJSON_GetObjectItemCaseSensitive(want, keys[i]);
		if (w)
			cJSON_AddItemToObject(cur, keys[i], cJSON_Duplicate(w, true));
		changed = true;
	}
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(cur, "metadata");
	const cJSON *wmeta = cJSON_GetObjectItemCaseSensitive(want, "metadata");
	cJSON *labels = cJSON_GetObjectItemCaseSensitive(meta, "labels");
	if (!cJSON_IsObject(labels)) {
		cJSON_DeleteItemFromObjectCaseSensitive(meta, "labels");
		labels = cJSON_AddObjectToObject(meta, "labels");
	}
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(wmeta, "labels"))
	{
		const char *v = json_get_str(labels, it->string);
		if (v && !strcmp(v, it->valuestring))
			continue;
		reconcile_set_str(labels, it->string, it->valuestring);
		changed = true;
	}
	if (!same(meta, wmeta, "ownerReferences")) {
		cJSON_DeleteItemFromObjectCaseSensitive(meta, "ownerReferences");
		cJSON_AddItemToObject(
		    meta, "ownerReferences",
		    cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(wmeta, "ownerReferences"),
		                    true));
		changed = true;
	}
	return changed;
}

/* {"labels":{…},"annotations":{…},"allowedTopologies":[…]} of the StorageClass being replaced:
 * every label and annotation except the controller's own (the pillar-csi.bhyoo.com/ prefix and
 * the managed-by label), and its allowedTopologies. */
static cJSON *carry_of(const cJSON *sc)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(sc, "metadata"), *it;
	cJSON *co = cJSON_CreateObject();
	cJSON *l = cJSON_AddObjectToObject(co, "labels"),
	      *a = cJSON_AddObjectToObject(co, "annotations");
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(meta, "labels"))
	{
		if (cJSON_IsString(it) &&
		    strncmp(it->string, RULES_KEY_PREFIX, strlen(RULES_KEY_PREFIX)) &&
		    strcmp(it->string, RULES_LABEL_MANAGED_BY))
			cJSON_AddStringToObject(l, it->string, it->valuestring);
	}
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(meta, "annotations"))
	{
		if (cJSON_IsString(it) &&
		    strncmp(it->string, RULES_KEY_PREFIX, strlen(RULES_KEY_PREFIX)))
			cJSON_AddStringToObject(a, it->string, it->valuestring);
	}
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(sc, "allowedTopologies");
	cJSON_AddItemToObject(co, "allowedTopologies",
	                      t ? cJSON_Duplicate(t, true) : cJSON_CreateArray());
	return co;
}

/* Adds the carried labels, annotations and allowedTopologies to a new StorageClass; the
 * controller's labels win. */
static void apply_carry(cJSON *sc, const cJSON *co)
{
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(sc, "metadata");
	cJSON *labels = cJSON_GetObjectItemCaseSensitive(meta, "labels");
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(co, "labels"))
	{
		if (cJSON_IsString(it) && !cJSON_GetObjectItemCaseSensitive(labels, it->string))
			cJSON_AddStringToObject(labels, it->string, it->valuestring);
	}
	const cJSON *ann = cJSON_GetObjectItemCaseSensitive(co, "annotations");
	if (cJSON_GetArraySize(ann) > 0) {
		cJSON *a = cJSON_AddObjectToObject(meta, "annotations");
		cJSON_ArrayForEach(it, ann)
		{
			if (cJSON_IsString(it))
				cJSON_AddStringToObject(a, it->string, it->valuestring);
		}
	}
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(co, "allowedTopologies");
	if (cJSON_GetArraySize(t) > 0)
		cJSON_AddItemToObject(sc, "allowedTopologies", cJSON_Duplicate(t, true));
}

/* Sets (value) or removes (NULL) the carry-over annotation on the PSC with an update. */
static int set_carry_ann(struct ctl *c, cJSON *psc, const char *value, struct err *e)
{
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(psc, "metadata");
	cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
	if (!value && !cJSON_GetObjectItemCaseSensitive(ann, RULES_ANN_SC_CARRY_OVER))
		return 0;
	if (!cJSON_IsObject(ann)) {
		cJSON_DeleteItemFromObjectCaseSensitive(meta, "annotations");
		ann = cJSON_AddObjectToObject(meta, "annotations");
	}
	reconcile_set_str(ann, RULES_ANN_SC_CARRY_OVER, value);
	if (!cJSON_GetArraySize(ann))
		cJSON_DeleteItemFromObjectCaseSensitive(meta, "annotations");
	cJSON *out = NULL;
	int r = store_update(c->st, psc, &out, e);
	if (r == 0 && out) {
		cJSON_DeleteItemFromObjectCaseSensitive(psc, "metadata");
		cJSON_AddItemToObject(
		    psc, "metadata",
		    cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(out, "metadata"), true));
	}
	cJSON_Delete(out);
	return r;
}

static bool ours(const cJSON *sc, const char *psc_name)
{
	const char *v =
	    json_get_str(cJSON_GetObjectItemCaseSensitive(
	                     cJSON_GetObjectItemCaseSensitive(sc, "metadata"), "labels"),
	                 RULES_LABEL_PSC);
	return v && !strcmp(v, psc_name);
}

/* Brings the generated StorageClass in line; sets StorageClassCreated.  create_ok: the
 * prerequisites for creating it hold.  Returns 0 or a negative errno to retry. */
static int sync_sc(struct ctl *c, cJSON *psc, bool create_ok, cJSON *status, int64_t og,
                   struct err *e)
{
	const char *psc_name = store_meta_str(psc, "name");
	char scname[254], m[1400];
	snprintf(scname, sizeof(scname), "%s", sc_name_of(psc));
	const struct store_kind *k = kind_of("StorageClass");
	cJSON *cur = NULL, *want = desired_sc(psc), *carry = NULL;
	struct err se = {0};
	int r = store_get(c->st, k, NULL, scname, &cur, &se);
	const char *ann =
	    json_get_str(cJSON_GetObjectItemCaseSensitive(
	                     cJSON_GetObjectItemCaseSensitive(psc, "metadata"), "annotations"),
	                 RULES_ANN_SC_CARRY_OVER);
	if (ann && json_parse_strict(ann, strlen(ann), &carry, NULL) < 0) {
		log_warnf("PillarStorageClass %s: ignoring an unreadable %s annotation", psc_name,
		          RULES_ANN_SC_CARRY_OVER);
		carry = NULL;
	}
	if (r < 0 && r != STORE_NOT_FOUND) {
		snprintf(m, sizeof(m), "reading StorageClass \"%s\": %s", scname, se.msg);
		cond_set(status, "StorageClassCreated", "False", "StorageClassError", m, og);
		r = 0;
		goto out;
	}
	if (r == 0 && !ours(cur, psc_name)) {
		snprintf(m, sizeof(m),
		         "StorageClass \"%s\" exists and was not generated for PillarStorageClass "
		         "\"%s\"; it is never adopted or overwritten",
		         scname, psc_name);
		cond_set(status, "StorageClassCreated", "False", "StorageClassConflict", m, og);
		r = 0;
		goto out;
	}
	if (r == 0 && needs_recreate(cur, want)) {
		if (!carry) {
			carry = carry_of(cur);
			char *text = cJSON_PrintUnformatted(carry);
			r = text ? set_carry_ann(c, psc, text, e) : -ENOMEM;
			free(text);
			if (r < 0)
				goto out;
		}
		r = store_delete(c->st, k, NULL, scname, store_meta_str(cur, "uid"), NULL, &se);
		if (r < 0 && r != STORE_NOT_FOUND) {
			snprintf(m, sizeof(m), "deleting StorageClass \"%s\" to recreate it: %s",
			         scname, se.msg);
			cond_set(status, "StorageClassCreated", "False", "StorageClassError", m,
			         og);
			r = err_set(e, r, "%s", m);
			goto out;
		}
		cJSON_Delete(cur);
		cur = NULL;
		r = STORE_NOT_FOUND;
	}
	if (r == STORE_NOT_FOUND) {
		if (!create_ok && !carry) {
			cond_set(
			    status, "StorageClassCreated", "Unknown", "WaitingForStore",
			    "the StorageClass is created once the store and protocol exist and "
			    "Compatible is True",
			    og);
			r = 0;
			goto out;
		}
		if (carry)
			apply_carry(want, carry);
		r = store_create(c->st, want, NULL, &se);
		if (r < 0) {
			snprintf(m, sizeof(m), "creating StorageClass \"%s\": %s", scname, se.msg);
			cond_set(status, "StorageClassCreated", "False", "StorageClassError", m,
			         og);
			r = err_set(e, r, "%s", m);
			goto out;
		}
	} else if (patch_in_place(cur, want)) {
		r = store_update(c->st, cur, NULL, &se);
		if (r < 0) {
			snprintf(m, sizeof(m), "updating StorageClass \"%s\": %s", scname, se.msg);
			cond_set(status, "StorageClassCreated", "False", "StorageClassError", m,
			         og);
			r = err_set(e, r, "%s", m);
			goto out;
		}
	}
	if ((r = set_carry_ann(c, psc, NULL, e)) < 0)
		goto out;
	cond_set(status, "StorageClassCreated", "True", "StorageClassCreated", "", og);
	reconcile_set_str(status, "storageClassName", scname);
out:
	cJSON_Delete(carry);
	cJSON_Delete(cur);
	cJSON_Delete(want);
	return r;
}

/* ---- PillarStorageClass ---------------------------------------------------------------------------- */

/* Dependents of a PSC being deleted (crds.md §14): PVCs of its StorageClass, and volumes until
 * both their PV and their PillarVolumeState are gone. */
static void psc_dependents(struct ctl *c, const char *name, const char *scname, struct deps *d)
{
	cJSON *pvcs = cJSON_CreateArray(), *items = NULL, *pvs = NULL;
	const cJSON *it;
	if (store_list(c->st, kind_of("PersistentVolumeClaim"), NULL, NULL, &items, NULL, NULL) ==
	    0)
		cJSON_ArrayForEach(it, items)
		{
			const char *sc = json_get_str(spec_of(it), "storageClassName");
			char nn[520];
			if (!sc || strcmp(sc, scname))
				continue;
			snprintf(nn, sizeof(nn), "%s/%s", store_meta_str(it, "namespace") ?: "",
			         store_meta_str(it, "name"));
			cJSON_AddItemToArray(pvcs, cJSON_CreateString(nn));
		}
	cJSON_Delete(items);
	cJSON *vols = reconcile_names_labeled(c, "PillarVolumeState", RULES_LABEL_PSC, name);
	if (store_list(c->st, kind_of("PersistentVolume"), NULL, NULL, &pvs, NULL, NULL) == 0)
		cJSON_ArrayForEach(it, pvs)
		{
			const char *sc = json_get_str(spec_of(it), "storageClassName");
			if (sc && !strcmp(sc, scname))
				add_unique_sorted(vols, store_meta_str(it, "name"));
		}
	cJSON_Delete(pvs);
	deps_objects(d, "PersistentVolumeClaim", pvcs);
	deps_volumes(d, vols);
	cJSON_Delete(pvcs);
	cJSON_Delete(vols);
}

static int psc_release(struct ctl *c, cJSON *psc, const char *scname, struct err *e)
{
	cJSON *sc = NULL;
	int r = store_get(c->st, kind_of("StorageClass"), NULL, scname, &sc, e);
	if (r == 0 && ours(sc, store_meta_str(psc, "name")))
		r = store_delete(c->st, kind_of("StorageClass"), NULL, scname,
		                 store_meta_str(sc, "uid"), NULL, e);
	cJSON_Delete(sc);
	if (r < 0 && r != STORE_NOT_FOUND)
		return r;
	r = reconcile_finalizer(c, psc, RULES_FINALIZER_PSC, false, e);
	return r == STORE_NOT_FOUND ? 0 : r;
}

int reconcile_psc(struct ctl *c, const char *name, struct err *e)
{
	static const char *const types[] = {"StoreReady", "ProtocolValid", "Compatible",
	                                    "StorageClassCreated", NULL};
	cJSON *psc = NULL, *pst = NULL, *pstr = NULL, *before = NULL;
	char m[1400], scname[254];
	struct deps d = {0};
	int r = store_get(c->st, kind_of("PillarStorageClass"), NULL, name, &psc, e);
	if (r == STORE_NOT_FOUND)
		return 0;
	if (r < 0)
		return r;
	snprintf(scname, sizeof(scname), "%s", sc_name_of(psc));
	bool deleting = store_meta_str(psc, "deletionTimestamp") != NULL;
	if (deleting) {
		psc_dependents(c, name, scname, &d);
		if (!d.msg[0]) {
			r = psc_release(c, psc, scname, e);
			goto out;
		}
	} else if ((r = reconcile_finalizer(c, psc, RULES_FINALIZER_PSC, true, e)) < 0) {
		r = r == STORE_NOT_FOUND ? 0 : r;
		goto out;
	}
	int64_t og = reconcile_generation(psc);
	cJSON *status = reconcile_status_of(psc);
	before = cJSON_Duplicate(status, true);
	const char *sref = json_get_str(spec_of(psc), "storeRef") ?: "";
	const char *pref = json_get_str(spec_of(psc), "protocolRef") ?: "";
	store_get(c->st, kind_of("PillarStore"), NULL, sref, &pst, NULL);
	store_get(c->st, kind_of("PillarProtocol"), NULL, pref, &pstr, NULL);
	if (!pst) {
		snprintf(m, sizeof(m), "PillarStore \"%s\" not found", sref);
		cond_set(status, "StoreReady", "False", "PoolNotFound", m, og);
	} else if (strcmp(cond_status(pst, "Ready"), "True")) {
		const char *reason = cond_reason(pst, "Ready");
		snprintf(m, sizeof(m), "PillarStore \"%s\" is not Ready%s%s", sref,
		         reason[0] ? ": " : " yet", reason);
		cond_set(status, "StoreReady", "False", "PoolNotReady", m, og);
	} else {
		cond_set(status, "StoreReady", "True", "StoreReady", "", og);
	}
	if (!pstr) {
		snprintf(m, sizeof(m), "PillarProtocol \"%s\" not found", pref);
		cond_set(status, "ProtocolValid", "False", "ProtocolNotFound", m, og);
	} else {
		cond_set(status, "ProtocolValid", "True", "ProtocolValid", "", og);
	}
	bool compatible = false;
	if (!pst || !pstr) {
		cond_set(status, "Compatible", "Unknown", "WaitingForStore",
		         "the PillarStore or the PillarProtocol does not exist", og);
	} else {
		char reason[64], msg[1024];
		if (resolve_psc_compatible(psc, pst, pstr, reason, sizeof(reason), msg,
		                           sizeof(msg)) == 0) {
			compatible = true;
			cond_set(status, "Compatible", "True", "Compatible", "", og);
		} else {
			cond_set(status, "Compatible", "False", reason, msg, og);
		}
	}
	int sr = 0;
	if (!deleting)
		sr = sync_sc(c, psc, compatible, status, og, e);
	reconcile_ready(status, types, "StorageClassAvailable", deleting ? d.msg : NULL, og);
	r = reconcile_write_status(c, psc, before, e);
	if (r == STORE_CONFLICT || r == STORE_NOT_FOUND)
		r = 0;
	if (r == 0)
		r = sr;
out:
	cJSON_Delete(before);
	cJSON_Delete(pst);
	cJSON_Delete(pstr);
	cJSON_Delete(psc);
	return r;
}
