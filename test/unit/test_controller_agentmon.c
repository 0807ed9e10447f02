/* The controller loop against real agent connections (issue 14): the gRPC agent client
 * (agentclient_grpc) instead of the scripted fake, and a minimal AgentService on loopback built
 * on our gRPC server (HealthCheck with the restore gate, GetCapabilities, ReconcileState that
 * opens the gate).  With the periodic pass set to an hour, only the agent monitor can notice:
 *  - an agent that comes back with its gate closed (a storage reboot) gets its one complete
 *    ReconcileState and ExportsReady=True/ExportsServing although the channel to it would wait
 *    an hour before reconnecting (the probe forgets the reconnect backoff);
 *  - while an agent is unreachable the controller does not spin: after the state change, its
 *    PillarAgent and the volume's PillarVolumeState are not rewritten at all over a 3 s window
 *    with periodic passes every 300 ms (before issue 14: hundreds of writes a second, each
 *    message carrying the channel's "retrying in N ms" countdown);
 *  - an agent whose file pool's free space changes at every call has its status written at
 *    most once per pass, not again for the event of its own write;
 *  - an unreachable agent is probed at the monitor's fast cadence (AGENTMON_FAST_MS), a gated
 *    or serving one less often (agentmon_due). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/time.h"
#include "controller/agentclient_grpc.h"
#include "controller/agentmon.h"
#include "controller/loop.h"
#include "ctl_fixture.h"
#include "grpc/server.h"
#include "model/outage.h"

typedef PillarCsi__Agent__V1__HealthCheckResponse HcResp;

static struct mini {
	struct grpc_server *srv;
	atomic_bool pending;
	atomic_int complete;   /* complete ReconcileStates received */
	atomic_int caps_calls; /* GetCapabilities answered */
	atomic_bool steady;    /* the pool's free space does not change */
} mini;

static int h_health(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                    void *ctx)
{
	struct mini *m = ctx;
	(void)req;
	HcResp *r = grpc_call_alloc(call, sizeof(*r));
	if (!r)
		return GRPC_RESOURCE_EXHAUSTED;
	pillar_csi__agent__v1__health_check_response__init(r);
	r->healthy = true;
	r->export_restore_pending = atomic_load(&m->pending);
	*resp = &r->base;
	return GRPC_OK;
}

static int h_caps(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                  void *ctx)
{
	(void)req;
	(void)ctx;
	PillarCsi__Agent__V1__GetCapabilitiesResponse *r = grpc_call_alloc(call, sizeof(*r));
	if (!r)
		return GRPC_RESOURCE_EXHAUSTED;
	pillar_csi__agent__v1__get_capabilities_response__init(r);
	r->agent_version = "mini";
	/* a file pool: its free space is the host's, a little different at every call */
	PillarCsi__Agent__V1__PoolInfo *p = grpc_call_alloc(call, sizeof(*p));
	PillarCsi__Agent__V1__PoolInfo **pp = grpc_call_alloc(call, sizeof(*pp));
	if (!p || !pp)
		return GRPC_RESOURCE_EXHAUSTED;
	pillar_csi__agent__v1__pool_info__init(p);
	p->name = "files";
	p->backend_type = PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_FILE;
	p->total_bytes = 100LL << 30;
	p->available_bytes = (50LL << 30) - 4096 * atomic_fetch_add(&mini.caps_calls, 1);
	if (atomic_load(&mini.steady))
		p->available_bytes = 50LL << 30;
	pp[0] = p;
	r->n_discovered_pools = 1;
	r->discovered_pools = pp;
	*resp = &r->base;
	return GRPC_OK;
}

static int h_reconcile(struct grpc_call *call, const ProtobufCMessage *req, ProtobufCMessage **resp,
                       void *ctx)
{
	struct mini *m = ctx;
	const PillarCsi__Agent__V1__ReconcileStateRequest *q = (const void *)req;
	PillarCsi__Agent__V1__ReconcileStateResponse *r = grpc_call_alloc(call, sizeof(*r));
	if (!r)
		return GRPC_RESOURCE_EXHAUSTED;
	pillar_csi__agent__v1__reconcile_state_response__init(r);
	r->results = grpc_call_alloc(call, (q->n_volumes + 1) * sizeof(*r->results));
	if (!r->results)
		return GRPC_RESOURCE_EXHAUSTED;
	for (size_t i = 0; i < q->n_volumes; i++) {
		PillarCsi__Agent__V1__VolumeReconcileResult *x = grpc_call_alloc(call, sizeof(*x));
		if (!x)
			return GRPC_RESOURCE_EXHAUSTED;
		pillar_csi__agent__v1__volume_reconcile_result__init(x);
		x->volume_id = grpc_call_strdup(call, q->volumes[i]->volume_id);
		x->success = true;
		r->results[r->n_results++] = x;
	}
	if (q->complete) {
		atomic_fetch_add(&m->complete, 1);
		atomic_store(&m->pending, false);
	}
	*resp = &r->base;
	return GRPC_OK;
}

#define D(x) &pillar_csi__agent__v1__##x##__descriptor
static const struct grpc_method mini_methods[] = {
    {"HealthCheck", h_health, NULL, D(health_check_request), D(health_check_response), NULL},
    {"GetCapabilities", h_caps, NULL, D(get_capabilities_request), D(get_capabilities_response),
     NULL},
    {"ReconcileState", h_reconcile, NULL, D(reconcile_state_request), D(reconcile_state_response),
     NULL},
};

static struct grpc_service mini_svc = {.name = "pillar_csi.agent.v1.AgentService",
                                       .methods = mini_methods,
                                       .n_methods = 3,
                                       .ctx = &mini};

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

/* Starts the mini agent on port (retrying while the old listener's port is released). */
static void mini_start(int port, bool pending)
{
	char listen[64];
	const char *l[] = {listen, NULL};
	struct grpc_server_opts o;
	struct err e = {0};
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	grpc_server_opts_init(&o);
	o.listen = l;
	o.workers = 2;
	atomic_store(&mini.pending, pending);
	for (int i = 0; i < 50; i++) {
		ck_assert_int_eq(grpc_server_new(&mini.srv, &o, &e), 0);
		ck_assert_int_eq(grpc_server_add_service(mini.srv, &mini_svc, &e), 0);
		if (grpc_server_start(mini.srv, &e) == 0)
			return;
		grpc_server_free(mini.srv);
		mini.srv = NULL;
		time_sleep_us(100000);
	}
	ck_abort_msg("mini agent: %s", e.msg);
}

static void mini_stop(void)
{
	grpc_server_free(mini.srv);
	mini.srv = NULL;
}

static agentclient *grpc_ac;

static void setup(void)
{
	struct err e = {0};
	fx_setup();
	ck_assert_int_eq(agentclient_grpc_new(NULL, &grpc_ac, &e), 0);
	fx_c.ac = grpc_ac;
	atomic_store(&mini.complete, 0);
	atomic_store(&mini.steady, false);
}

static void teardown(void)
{
	mini_stop();
	fx_c.ac = fake_agent_client(fx_fa);
	agentclient_close(grpc_ac);
	fx_teardown();
}

static const char *reason_of(const char *kind, const char *name, const char *type, char *buf,
                             size_t cap)
{
	cJSON *o = fx_get(kind, name);
	snprintf(buf, cap, "%s", o ? cond_reason(o, type) : "");
	cJSON_Delete(o);
	return buf;
}

/* Milliseconds until kind/name shows reason for type, or -1 after ms. */
static int64_t wait_reason(const char *kind, const char *name, const char *type, const char *reason,
                           int ms)
{
	char buf[64];
	int64_t t0 = time_mono_ms();
	while (time_mono_ms() - t0 < ms) {
		if (!strcmp(reason_of(kind, name, type, buf, sizeof(buf)), reason))
			return time_mono_ms() - t0;
		time_sleep_us(10000);
	}
	return -1;
}

static void agent_at(int port)
{
	char spec[128];
	snprintf(spec, sizeof(spec), "{\"external\":{\"address\":\"127.0.0.1\",\"port\":%d}}",
	         port);
	fx_put("PillarAgent", NULL, "storage-1", NULL, spec, NULL);
	fx_put("PillarVolumeState", NULL, "vol-a",
	       "\"labels\":{\"pillar-csi.bhyoo.com/agent\":\"storage-1\"}",
	       "{\"volumeID\":\"storage-1/nvmeof-tcp/file/files/vol-a\",\"agentVolumeID\":"
	       "\"files/vol-a\",\"agentRef\":\"storage-1\",\"backendType\":\"file\","
	       "\"protocolType\":\"nvmeof-tcp\",\"capacityBytes\":1048576,\"resolved\":{"
	       "\"backend\":{\"file\":{\"pool\":\"files\"}}}}",
	       "{\"phase\":\"Ready\",\"publicationGeneration\":1,\"exportSpec\":{\"bindAddress\":"
	       "\"127.0.0.1\",\"port\":4420,\"aclEnabled\":false}}");
}

static struct controller_loop *start(int interval_ms)
{
	struct controller_loop *l = NULL;
	struct controller_loop_opts o = {.interval_ms = interval_ms, .workers = 2};
	struct err e = {0};
	ck_assert_msg(controller_loop_start(&fx_c, &o, &l, &e) == 0, "%s", e.msg);
	return l;
}

/* A storage node reboots while the controller's channel to it waits an hour after each failed
 * connection attempt: the only way to reach the agent again before then is the monitor's probe,
 * which forgets that backoff.  The agent comes back with its gate closed and gets its one
 * complete ReconcileState, then ExportsServing; the deadlines are generous (a loaded machine),
 * and without the forgetting nothing reaches the agent within them. */
START_TEST(test_reboot_noticed_despite_backoff)
{
	struct agentclient_grpc_opts ao = {.initial_backoff_ms = 3600000};
	agentclient *slow = NULL;
	struct err e = {0};
	ck_assert_int_eq(agentclient_grpc_new(&ao, &slow, &e), 0);
	fx_c.ac = slow;
	int port = free_port();
	mini_start(port, true);
	agent_at(port);
	struct controller_loop *l = start(3600000);
	ck_assert_int_ge(
	    wait_reason("PillarAgent", "storage-1", "ExportsReady", "ExportsServing", 30000), 0);
	ck_assert_int_eq(atomic_load(&mini.complete), 1);
	mini_stop();
	/* the monitor's probe found the port refused: the channel's hour of backoff begins */
	ck_assert_int_ge(
	    wait_reason("PillarAgent", "storage-1", "AgentConnected", "HealthCheckFailed", 30000),
	    0);
	/* it comes back with an empty kernel target: the gate is closed until the restore */
	mini_start(port, true);
	int64_t t0 = time_mono_ms();
	while (atomic_load(&mini.pending) && time_mono_ms() - t0 < 30000)
		time_sleep_us(5000);
	ck_assert_msg(!atomic_load(&mini.pending), "no restore %lld ms after the port accepted",
	              (long long)(time_mono_ms() - t0));
	ck_assert_int_ge(
	    wait_reason("PillarAgent", "storage-1", "ExportsReady", "ExportsServing", 30000), 0);
	ck_assert_int_eq(atomic_load(&mini.complete), 2);
	char buf[64];
	ck_assert_str_eq(
	    reason_of("PillarVolumeState", "vol-a", "ExportReconciled", buf, sizeof(buf)),
	    "Reconciled");
	controller_loop_stop(l);
	fx_c.ac = grpc_ac;
	agentclient_close(slow);
}
END_TEST

/* The store's events of kind after rv (its watch replays them). */
static int writes_since(const char *kind, uint64_t rv)
{
	store_watch *w = NULL;
	ck_assert_int_eq(store_watch_open(fx_st, store_kind_lookup(kind), rv, &w, NULL), 0);
	int n = 0, r;
	do {
		enum store_event_type type;
		cJSON *o = NULL;
		r = store_watch_next(w, 200, &type, &o, NULL);
		ck_assert_int_ge(r, 0);
		n += r > 0;
		cJSON_Delete(o);
	} while (r > 0);
	store_watch_close(w);
	return n;
}

static uint64_t store_rv_now(void)
{
	cJSON *items = NULL;
	uint64_t rv = 0;
	ck_assert_int_ge(
	    store_list(fx_st, store_kind_lookup("PillarAgent"), NULL, NULL, &items, &rv, NULL), 0);
	cJSON_Delete(items);
	return rv;
}

/* The derived ExportReconciled of volume name with its agent's status as stored now. */
static const char *derived_reason(const char *name)
{
	struct model_pa pa;
	struct model_pvst v;
	const char *status, *reason;
	ck_assert_int_eq(model_get(fx_st, &model_pa_kind, NULL, "storage-1", &pa, NULL), 0);
	ck_assert_int_eq(model_get(fx_st, &model_pvst_kind, NULL, name, &v, NULL), 0);
	static char buf[64];
	model_pvst_export_reconciled(&v, model_pa_exports_unavailable(&pa), &status, &reason);
	snprintf(buf, sizeof(buf), "%s", reason);
	model_clear(&model_pa_kind, &pa);
	model_clear(&model_pvst_kind, &v);
	return buf;
}

START_TEST(test_no_spin_while_agent_unreachable)
{
	agent_at(free_port()); /* nothing listens there */
	struct controller_loop *l = start(300);
	ck_assert_int_ge(
	    wait_reason("PillarAgent", "storage-1", "AgentConnected", "HealthCheckFailed", 5000),
	    0);
	ck_assert_str_eq(derived_reason("vol-a"), "AgentUnavailable");
	time_sleep_us(1000000);
	uint64_t rv = store_rv_now();
	unsigned long p0 = controller_loop_passes(l);
	int64_t t0 = time_mono_ms();
	/* at least 3 s and at least 5 periodic passes (a loaded machine runs them late) */
	time_sleep_us(3000000);
	while (controller_loop_passes(l) - p0 < 5 && time_mono_ms() - t0 < 60000)
		time_sleep_us(100000);
	unsigned long passes = controller_loop_passes(l) - p0;
	int64_t ms = time_mono_ms() - t0;
	int pa = writes_since("PillarAgent", rv);
	int pvst = writes_since("PillarVolumeState", rv);
	controller_loop_stop(l);
	ck_assert_msg(passes >= 5, "only %lu reconciles in %lld ms: the periodic pass did not run",
	              passes, (long long)ms);
	/* a pass every 300 ms makes 10 in 3 s; a loop that spins makes thousands */
	ck_assert_msg(passes < 200 * (unsigned long)(ms / 3000),
	              "%lu reconciles in %lld ms: the loop spins", passes, (long long)ms);
	ck_assert_msg(pa == 0, "%d PillarAgent writes in %lld ms with the agent down", pa,
	              (long long)ms);
	ck_assert_msg(pvst == 0, "%d PillarVolumeState writes in %lld ms with the agent down", pvst,
	              (long long)ms);
}
END_TEST

/* A file pool's discoveredPools.available follows the host's free space, so every pass finds
 * a new value and writes the status.  The watch event of that write must not queue the agent's
 * pass again (it did: each write caused the next, the controller rewrote the PillarAgent as
 * fast as it could): over 3 s with a pass a second, at most one write per pass. */
START_TEST(test_file_pool_status_not_rewritten_by_its_own_event)
{
	int port = free_port();
	mini_start(port, false);
	agent_at(port);
	struct controller_loop *l = start(1000);
	ck_assert_int_ge(
	    wait_reason("PillarAgent", "storage-1", "ExportsReady", "ExportsServing", 10000), 0);
	time_sleep_us(500000);
	uint64_t rv = store_rv_now();
	int c0 = atomic_load(&mini.caps_calls);
	int64_t t0 = time_mono_ms();
	/* at least 3 s, at least 2 agent passes and a write (a loaded machine runs them late) */
	time_sleep_us(3000000);
	while ((atomic_load(&mini.caps_calls) - c0 < 2 || !writes_since("PillarAgent", rv)) &&
	       time_mono_ms() - t0 < 60000)
		time_sleep_us(100000);
	int caps = atomic_load(&mini.caps_calls) - c0;
	int pa = writes_since("PillarAgent", rv);
	controller_loop_stop(l);
	ck_assert_msg(caps >= 2, "%d agent passes in %lld ms: the periodic pass did not run", caps,
	              (long long)(time_mono_ms() - t0));
	ck_assert_msg(pa >= 1, "the new free space was never written");
	/* the periodic passes make about three writes; a pass in flight when counting began may
	 * add one, and a loaded machine may run late passes back to back, while a write that
	 * queues the next pass makes them by the hundred */
	ck_assert_msg(pa <= caps + 1 && pa <= 20,
	              "%d PillarAgent writes (%d passes): each write queued the next", pa, caps);
}
END_TEST

/* A controller that starts again finds storage-1 serving, as its PillarAgent's status records:
 * its listed PillarAgent is reconciled once, and the monitor's first probe, which agrees with
 * that status, queues no second pass (it did: each agent's pass, with its count of every volume,
 * ran twice in a restart's first pass).  A pass is a GetCapabilities call; the periodic pass is
 * an hour away. */
START_TEST(test_restart_reconciles_each_agent_once)
{
	int port = free_port();
	atomic_store(&mini.steady, true);
	mini_start(port, false);
	agent_at(port);
	struct controller_loop *l = start(3600000);
	ck_assert_int_ge(
	    wait_reason("PillarAgent", "storage-1", "ExportsReady", "ExportsServing", 30000), 0);
	time_sleep_us(1500000); /* the monitor's probes */
	controller_loop_stop(l);
	int c0 = atomic_load(&mini.caps_calls);
	l = start(3600000);
	int64_t t0 = time_mono_ms();
	while (controller_loop_first_pass_ms(l) < 0 && time_mono_ms() - t0 < 30000)
		time_sleep_us(10000);
	ck_assert_msg(controller_loop_first_pass_ms(l) >= 0, "no first pass in 30 s");
	/* the monitor probes every 500 ms: a kick would have queued its pass by then */
	t0 = time_mono_ms();
	while (time_mono_ms() - t0 < 3000 && atomic_load(&mini.caps_calls) - c0 < 2)
		time_sleep_us(10000);
	int passes = atomic_load(&mini.caps_calls) - c0;
	char buf[64];
	ck_assert_str_eq(reason_of("PillarAgent", "storage-1", "ExportsReady", buf, sizeof(buf)),
	                 "ExportsServing");
	controller_loop_stop(l);
	ck_assert_msg(passes == 1, "%d passes of storage-1 after the restart", passes);
}
END_TEST

/* More volumes of storage-1, each exported and reconciled. */
static void more_volumes(int n)
{
	for (int i = 1; i < n; i++) {
		char name[32], spec[512];
		snprintf(name, sizeof(name), "vol-%04d", i);
		snprintf(spec, sizeof(spec),
		         "{\"volumeID\":\"storage-1/nvmeof-tcp/file/files/%s\",\"agentVolumeID\":"
		         "\"files/%s\",\"agentRef\":\"storage-1\",\"backendType\":\"file\","
		         "\"protocolType\":\"nvmeof-tcp\",\"capacityBytes\":1048576,\"resolved\":{"
		         "\"backend\":{\"file\":{\"pool\":\"files\"}}}}",
		         name, name);
		fx_put("PillarVolumeState", NULL, name,
		       "\"labels\":{\"pillar-csi.bhyoo.com/agent\":\"storage-1\"}", spec,
		       "{\"phase\":\"Ready\",\"publicationGeneration\":1,\"exportSpec\":{"
		       "\"bindAddress\":\"127.0.0.1\",\"port\":4420,\"aclEnabled\":false},"
		       "\"conditions\":[{\"type\":\"ExportReconciled\",\"status\":\"True\","
		       "\"reason\":\"Reconciled\",\"message\":\"\",\"observedGeneration\":1,"
		       "\"lastTransitionTime\":\"2026-12-01T00:00:00Z\"}]}");
	}
}

/* Waits until the store has not moved for quiet_ms (at most 30 s); its resourceVersion. */
static uint64_t store_quiet(int quiet_ms)
{
	uint64_t rv = store_rv_now();
	int64_t since = time_mono_ms(), t0 = since;
	while (time_mono_ms() - since < quiet_ms && time_mono_ms() - t0 < 30000) {
		time_sleep_us(100000);
		uint64_t now = store_rv_now();
		if (now != rv)
			rv = now, since = time_mono_ms();
	}
	return rv;
}

/* A storage node with N volumes becomes unreachable, stays so through several periodic
 * passes, and comes back rebooted (gate closed): the outage is its PillarAgent's conditions
 * (a handful of writes whatever N), no volume is written on the way down, none while it stays
 * down, none by the restore; every volume reads AgentUnavailable meanwhile (derived from the
 * PillarAgent) and Reconciled after. */
static const int outage_n[] = {100, 1000};

START_TEST(test_outage_writes_do_not_grow_with_volumes)
{
	int n = outage_n[_i];
	int port = free_port();
	atomic_store(&mini.steady, true);
	mini_start(port, false);
	agent_at(port);
	more_volumes(n);
	struct controller_loop *l = start(300);
	ck_assert_int_ge(
	    wait_reason("PillarAgent", "storage-1", "ExportsReady", "ExportsServing", 60000), 0);
	/* vol-a starts without ExportReconciled: the first periodic pass writes it.  That pass
	 * (N items) may still be in flight when the store has been quiet for a second, and its
	 * write would then fall in the restore's count */
	ck_assert_int_ge(
	    wait_reason("PillarVolumeState", "vol-a", "ExportReconciled", "Reconciled", 60000), 0);
	uint64_t rv = store_quiet(1000);
	mini_stop();
	ck_assert_int_ge(
	    wait_reason("PillarAgent", "storage-1", "AgentConnected", "HealthCheckFailed", 30000),
	    0);
	time_sleep_us(2000000); /* several periodic passes with the agent down */
	int pa = writes_since("PillarAgent", rv), pvst = writes_since("PillarVolumeState", rv);
	ck_assert_str_eq(derived_reason("vol-a"), "AgentUnavailable");
	ck_assert_str_eq(derived_reason("vol-0007"), "AgentUnavailable");
	ck_assert_msg(pvst == 0, "N=%d: %d PillarVolumeState writes for an outage", n, pvst);
	ck_assert_msg(pa >= 1 && pa <= 5, "N=%d: %d PillarAgent writes for an outage", n, pa);
	rv = store_rv_now();
	mini_start(port, true);
	ck_assert_int_ge(
	    wait_reason("PillarAgent", "storage-1", "ExportsReady", "ExportsServing", 60000), 0);
	store_quiet(1000);
	pa = writes_since("PillarAgent", rv);
	pvst = writes_since("PillarVolumeState", rv);
	controller_loop_stop(l);
	ck_assert_int_eq(atomic_load(&mini.complete), 1);
	ck_assert_str_eq(derived_reason("vol-0007"), "Reconciled");
	ck_assert_msg(pvst == 0, "N=%d: %d PillarVolumeState writes for the restore", n, pvst);
	ck_assert_msg(pa >= 1 && pa <= 5, "N=%d: %d PillarAgent writes for the restore", n, pa);
}
END_TEST

/* The monitor's cadence by state: an unreachable agent, one not probed yet and a serving one
 * whose connection dropped are looked at again after AGENTMON_FAST_MS; a gated one (its restore
 * may be running) after AGENTMON_TICK_MS; a serving one on its probe's connection only after
 * AGENTMON_REPROBE_MS. */
START_TEST(test_due_by_state)
{
	ck_assert(!agentmon_due(AGENTMON_DOWN, false, AGENTMON_FAST_MS - 1));
	ck_assert(agentmon_due(AGENTMON_DOWN, false, AGENTMON_FAST_MS));
	ck_assert(agentmon_due(AGENTMON_UNKNOWN, false, AGENTMON_FAST_MS));
	ck_assert(agentmon_due(AGENTMON_SERVING, false, AGENTMON_FAST_MS));
	ck_assert(!agentmon_due(AGENTMON_GATED, false, AGENTMON_FAST_MS));
	ck_assert(!agentmon_due(AGENTMON_GATED, false, AGENTMON_TICK_MS - 1));
	ck_assert(agentmon_due(AGENTMON_GATED, false, AGENTMON_TICK_MS));
	ck_assert(!agentmon_due(AGENTMON_SERVING, true, AGENTMON_TICK_MS));
	ck_assert(!agentmon_due(AGENTMON_SERVING, true, AGENTMON_REPROBE_MS - 1));
	ck_assert(agentmon_due(AGENTMON_SERVING, true, AGENTMON_REPROBE_MS));
	ck_assert_int_lt(AGENTMON_FAST_MS, AGENTMON_TICK_MS);
}
END_TEST

/* While an agent is unreachable (here: its port accepts and closes at once, so every probe
 * fails and is seen by the listener), the monitor probes it at the fast cadence, so that an
 * agent back from a reboot is noticed within AGENTMON_FAST_MS of its port accepting: over 2 s
 * that is about 20 probes; a monitor probing only at each AGENTMON_TICK_MS makes at most 5 (it
 * did: the reboot's restore waited up to half a second for the next tick). */
START_TEST(test_unreachable_agent_probed_fast)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 64), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	agent_at(ntohs(a.sin_port));
	struct controller_loop *l = start(3600000);
	ck_assert_int_ge(
	    wait_reason("PillarAgent", "storage-1", "AgentConnected", "HealthCheckFailed", 30000),
	    0);
	int accepted = 0;
	int64_t t0 = time_mono_ms();
	while (time_mono_ms() - t0 < 2000) {
		int c = accept(fd, NULL, NULL);
		if (c >= 0) {
			accepted++;
			close(c);
		} else {
			time_sleep_us(2000);
		}
	}
	controller_loop_stop(l);
	close(fd);
	ck_assert_msg(accepted > 2000 / AGENTMON_TICK_MS + 2,
	              "%d probes of an unreachable agent in 2 s: not at the fast cadence",
	              accepted);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("controller_agentmon");
	TCase *t = tcase_create("agentmon");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_reboot_noticed_despite_backoff);
	tcase_add_test(t, test_no_spin_while_agent_unreachable);
	tcase_add_test(t, test_file_pool_status_not_rewritten_by_its_own_event);
	tcase_add_test(t, test_restart_reconciles_each_agent_once);
	tcase_add_loop_test(t, test_outage_writes_do_not_grow_with_volumes, 0, 2);
	tcase_add_test(t, test_due_by_state);
	tcase_add_test(t, test_unreachable_agent_probed_fast);
	suite_add_tcase(s, t);
	return tu_run(s);
}
