/* libFuzzer target: the durable JSON records the roles read back after a restart, each read
 * from a real file holding the fuzzer's bytes.  The first byte picks the record:
 *   0  fencing mark      <state>/generations/<id>.mark        agent_fence_read, agent_fence_check
 *   1  identity pin      <state>/nvmet-identity/<id>.json     agent_identity_start
 *   2  stage record      <node state>/<id with / as _>.json   node_record_read
 *   3  store object      <store>/pillarvolumestates/v.json    store_dir_open, store_get, model_get
 *   4  store object      <store>/persistentvolumeclaims/default/c.json  (namespaced)
 * A reader must refuse what it cannot take (a corrupt record is an error), never crash or leak;
 * a fencing check over a corrupt mark must refuse, never grant. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/fence.h"
#include "agent/identity.h"
#include "harness.h"
#include "model/kube.h"
#include "model/pillar.h"
#include "node/record.h"
#include "rules/nqn.h"
#include "store/store.h"

#define VOL  "fpool/pvc-1"
#define NVOL "storage-node-1/nvmeof-tcp/zfs-zvol/tank/pvc-abc123"

static void fence(const uint8_t *d, size_t n)
{
	char st[300];
	struct fence_mark m = {0};
	struct err e = {0};
	int rr, rc;
	fuzz_write("state/generations/fpool_2Fpvc-1.mark", d, n);
	snprintf(st, sizeof(st), "%s/state", fuzz_dir());
	rr = agent_fence_read(st, VOL, &m, &e);
	agent_fence_mark_clear(&m);
	rc = agent_fence_check(st, VOL, "uid-1", 1, FENCE_GRANT, &e);
	/* a mark that does not read back must never authorise anything */
	if (rr == -EBADMSG && rc == 0)
		abort();
}

static void identity(const uint8_t *d, size_t n)
{
	char st[300];
	struct rules_ns_identity id;
	struct err e = {0};
	fuzz_write("state/nvmet-identity/fpool_2Fpvc-1.json", d, n);
	snprintf(st, sizeof(st), "%s/state", fuzz_dir());
	agent_identity_start(st, VOL, "uid-1", RULES_NQN_PREFIX "fpool.pvc-1", &id, &e);
}

static void stage(const uint8_t *d, size_t n)
{
	char st[300];
	struct node_record r;
	struct err e = {0};
	fuzz_write("node/storage-node-1_nvmeof-tcp_zfs-zvol_tank_pvc-abc123.json", d, n);
	snprintf(st, sizeof(st), "%s/node", fuzz_dir());
	node_record_read(st, NVOL, &r, &e);
}

static void object(const uint8_t *d, size_t n, const struct model_kind *mk, const char *rel,
                   const char *ns, const char *name)
{
	char dir[300];
	store *s = NULL;
	cJSON *o = NULL, *items = NULL;
	struct err e = {0};
	fuzz_write(rel, d, n);
	snprintf(dir, sizeof(dir), "%s/store", fuzz_dir());
	if (store_dir_open(dir, false, 0, &s, &e) < 0)
		return;
	const struct store_kind *k = model_store_kind(mk);
	if (store_get(s, k, ns, name, &o, &e) == 0)
		cJSON_Delete(o);
	if (store_list(s, k, ns, NULL, &items, NULL, &e) == 0)
		cJSON_Delete(items);
	if (mk == &model_pvst_kind) {
		struct model_pvst v = {0};
		if (model_get(s, mk, ns, name, &v, &e) == 0)
			model_clear(mk, &v);
	} else {
		struct model_pvc v = {0};
		if (model_get(s, mk, ns, name, &v, &e) == 0)
			model_clear(mk, &v);
	}
	store_close(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	fuzz_dir_reset();
	switch (data[0] % 5) {
	case 0: fence(data + 1, size - 1); break;
	case 1: identity(data + 1, size - 1); break;
	case 2: stage(data + 1, size - 1); break;
	case 3:
		object(data + 1, size - 1, &model_pvst_kind, "store/pillarvolumestates/v.json",
		       NULL, "v");
		break;
	default:
		object(data + 1, size - 1, &model_pvc_kind,
		       "store/persistentvolumeclaims/default/c.json", "default", "c");
	}
	return 0;
}
