/* The allocation-failure sweep (allocfail.h) over the controller paths that once went on without
 * what they failed to allocate (grpc/status.h's out-of-memory policy):
 *  - the export resync and the full restore (reconcile_export.c): a volume's allowed initiators
 *    or its ZFS properties that could not be allocated were left out of the ReconcileState, so
 *    the agent was told to revoke every host of an ACL'd export, or to apply no properties.
 *    Now no request goes out and the call answers RESOURCE_EXHAUSTED.  A stand-in agent client
 *    checks every ReconcileState it is handed, without allocating;
 *  - the agent monitor (agentmon.c): an agent whose record could not be allocated was silently
 *    never probed (and a changed address kept the old one).  Now agentmon_set answers -ENOMEM and
 *    agentmon_lost tells the loop's next periodic pass to record it again. */
#include <errno.h>
#include <stdatomic.h>
#include <unistd.h>

#include "allocfail.h"
#include "controller/agentmon.h"
#include "controller/reconcile.h"
#include "ctl_fixture.h"

/* ---- the export resync and restore ------------------------------------------------------------ */

struct spy {
	agentclient base;
	atomic_int calls, bad;
	char why[200];
};

static bool spy_volume_ok(struct spy *s, const PillarCsi__Agent__V1__VolumeDesiredState *v)
{
	const PillarCsi__Agent__V1__BackendParams *bp = v->backend_params;
	const PillarCsi__Agent__V1__ExportDesiredState *x = v->n_exports ? v->exports[0] : NULL;
	if (!bp || !bp->zfs || bp->zfs->n_properties != 1)
		return snprintf(s->why, sizeof(s->why), "%s sent without its ZFS property",
		                v->volume_id),
		       false;
	if (!x || !x->acl_enabled || x->n_allowed_initiators != 1 ||
	    strcmp(x->allowed_initiators[0], "nqn.a"))
		return snprintf(s->why, sizeof(s->why), "%s sent without its allowed initiator",
		                v->volume_id),
		       false;
	return true;
}

/* Checks the request and answers UNAVAILABLE; allocates nothing. */
static int spy_invoke(agentclient *c, const char *address, const char *method,
                      const ProtobufCMessage *req, const ProtobufCMessageDescriptor *rd,
                      ProtobufCMessage **resp, int deadline_ms, struct grpc_status *st)
{
	struct spy *s = (struct spy *)c;
	(void)address, (void)rd, (void)deadline_ms;
	*resp = NULL;
	atomic_fetch_add(&s->calls, 1);
	if (!strcmp(method, "ReconcileState")) {
		const PillarCsi__Agent__V1__ReconcileStateRequest *q = (const void *)req;
		bool ok = q->n_volumes == 2;
		if (!ok)
			snprintf(s->why, sizeof(s->why), "%zu volumes sent, not 2", q->n_volumes);
		for (size_t i = 0; ok && i < q->n_volumes; i++)
			ok = spy_volume_ok(s, q->volumes[i]);
		if (!ok)
			atomic_fetch_add(&s->bad, 1);
	}
	st->code = GRPC_UNAVAILABLE;
	snprintf(st->msg, sizeof(st->msg), "spy: not answering");
	return GRPC_UNAVAILABLE;
}

static void spy_close(agentclient *c)
{
	(void)c;
}

static const struct agentclient_ops spy_ops = {.invoke = spy_invoke, .close = spy_close};

struct export_case {
	struct spy spy;
	bool complete;
};

static int op_reconcile_exports(void *arg, char *why, size_t cap)
{
	struct export_case *x = arg;
	struct grpc_status gs = {0};
	atomic_store(&x->spy.calls, 0);
	int r = reconcile_exports(&fx_c, "storage-1", "10.0.0.5:9500", NULL, x->complete, NULL,
	                          NULL, &gs);
	if (atomic_load(&x->spy.bad))
		return snprintf(why, cap, "%s", x->spy.why), 1;
	if (r == GRPC_UNAVAILABLE && atomic_load(&x->spy.calls) == 1 &&
	    !strcmp(gs.msg, "spy: not answering"))
		return 0; /* the reference: the request went out whole */
	if (atomic_load(&x->spy.calls) == 0 && r != GRPC_OK && gs.msg[0])
		return -1; /* nothing sent, a clean error */
	return snprintf(why, cap, "code %d (%s) after %d calls", r, gs.msg,
	                atomic_load(&x->spy.calls)),
	       1;
}

static void export_vol(const char *name)
{
	char meta[200], spec[600];
	snprintf(meta, sizeof(meta), "\"labels\":{\"pillar-csi.bhyoo.com/agent\":\"storage-1\"}");
	snprintf(spec, sizeof(spec),
	         "{\"volumeID\":\"storage-1/nvmeof-tcp/zfs-zvol/tank/%s\",\"agentVolumeID\":"
	         "\"tank/%s\",\"agentRef\":\"storage-1\",\"backendType\":\"zfs-zvol\","
	         "\"protocolType\":\"nvmeof-tcp\",\"capacityBytes\":1048576,\"resolved\":{"
	         "\"backend\":{\"zfs\":{\"pool\":\"tank\",\"properties\":{\"compression\":"
	         "\"lz4\"}}}}}",
	         name, name);
	fx_put("PillarVolumeState", NULL, name, meta, spec,
	       "{\"phase\":\"Ready\",\"publicationGeneration\":4,\"exportSpec\":{\"bindAddress\":"
	       "\"10.0.0.5\",\"port\":4420,\"aclEnabled\":true},\"publishedNodes\":[{\"nodeID\":"
	       "\"node-a\",\"initiatorID\":\"nqn.a\",\"accessMode\":\"SINGLE_NODE_WRITER\"}]}");
}

START_TEST(test_export_requests_whole_or_none)
{
	static struct export_case x;
	snprintf(fx_dir, sizeof(fx_dir), "%s", tu_mkdtemp());
	ck_assert_int_eq(store_dir_open(fx_dir, true, 50, &fx_st, NULL), 0);
	x.spy.base.ops = &spy_ops;
	ctl_init(&fx_c, fx_st, &x.spy.base);
	fx_put("PillarAgent", NULL, "storage-1", NULL,
	       "{\"external\":{\"address\":\"10.0.0.5\",\"port\":9500}}", NULL);
	export_vol("vol-a");
	export_vol("vol-b");
	x.complete = false;
	af_sweep("controller export resync", op_reconcile_exports, &x);
	x.complete = true;
	af_sweep("controller export restore", op_reconcile_exports, &x);
	ctl_fini(&fx_c);
	store_close(fx_st);
	tu_rmtree(fx_dir);
}
END_TEST

/* ---- the agent monitor ------------------------------------------------------------------------ */

static int op_agentmon_set(void *arg, char *why, size_t cap)
{
	struct agentmon *m = arg;
	int r = agentmon_set(m, "storage-1", "192.0.2.1:9500", AGENTMON_UNKNOWN);
	if (r == 0)
		r = agentmon_set(m, "storage-1", "192.0.2.2:9500",
		                 AGENTMON_UNKNOWN); /* a changed address */
	bool lost = agentmon_lost(m);
	agentmon_set(m, "storage-1", NULL, AGENTMON_UNKNOWN); /* forgetting never allocates */
	if (r == 0 && !lost)
		return 0;
	if (r == -ENOMEM && lost)
		return -1;
	return snprintf(why, cap, "agentmon_set %d, lost %d", r, lost), 1;
}

START_TEST(test_agentmon_set_reports_oom)
{
	struct ctl c;
	struct agentmon *m = NULL;
	ctl_init(&c, NULL, NULL); /* no agent client: the monitor probes nothing */
	ck_assert_int_eq(agentmon_start(&c, NULL, NULL, &m), 0);
	af_sweep("controller agent monitor", op_agentmon_set, m);
	agentmon_stop(m);
	ctl_fini(&c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("allocfail_ctl");
	TCase *tc = tcase_create("sweep");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_export_requests_whole_or_none);
	tcase_add_test(tc, test_agentmon_set_reports_oom);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
