/* agentmon — agent liveness and restore-gate probes (agentmon.h). */
#include "controller/agentmon.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/stop.h"
#include "base/time.h"
#include "rules/conditions.h"

struct monitored_agent {
	struct monitored_agent *next;
	char *name, *addr;
	enum agentmon_state state;
	uint64_t conn;     /* the connection the last serving probe used */
	int64_t probed_ms; /* when */
};

struct agentmon {
	struct ctl *c;
	void (*kick)(void *arg, const char *agent);
	void *arg;
	pthread_mutex_t mu; /* guards agents */
	struct stop stop;
	struct monitored_agent *agents;
	bool lost; /* an agentmon_set failed since the last agentmon_lost */
	pthread_t th;
};

static void monitored_agent_free(struct monitored_agent *a)
{
	free(a->name);
	free(a->addr);
	free(a);
}

enum agentmon_state agentmon_recorded(const struct model_pa *pa)
{
	const struct model_conds *cs = &pa->status.conditions;
	const char *connected = model_cond_status(cs, RULES_COND_AGENT_CONNECTED);
	const char *exports = model_cond_reason(cs, RULES_COND_EXPORTS_READY);
	if (!strcmp(connected, "False"))
		return AGENTMON_DOWN;
	if (strcmp(connected, "True"))
		return AGENTMON_UNKNOWN;
	if (!strcmp(exports, RULES_REASON_EXPORTS_SERVING))
		return AGENTMON_SERVING;
	if (!strcmp(exports, RULES_REASON_EXPORT_RESTORE_PENDING) ||
	    !strcmp(exports, RULES_REASON_EXPORT_RESTORE_FAILED))
		return AGENTMON_GATED;
	return AGENTMON_UNKNOWN;
}

int agentmon_set(struct agentmon *m, const char *agent, const char *addr,
                 enum agentmon_state recorded)
{
	int r = 0;
	if (!m || !agent)
		return 0;
	pthread_mutex_lock(&m->mu);
	struct monitored_agent **p = &m->agents;
	while (*p && strcmp((*p)->name, agent))
		p = &(*p)->next;
	if (!addr || !*addr) {
		if (*p) {
			struct monitored_agent *a = *p;
			*p = a->next;
			monitored_agent_free(a);
		}
	} else if (!*p || strcmp((*p)->addr, addr)) {
		struct monitored_agent *a = calloc(1, sizeof(*a));
		if (a && (a->name = strdup(agent)) && (a->addr = strdup(addr))) {
			a->state = recorded;
			if (*p) { /* replace: the new address starts as recorded */
				a->next = (*p)->next;
				monitored_agent_free(*p);
			}
			*p = a;
		} else {
			if (a)
				monitored_agent_free(a);
			if (*p) { /* never probe the old address in its place */
				a = *p;
				*p = a->next;
				monitored_agent_free(a);
			}
			m->lost = true;
			r = -ENOMEM;
		}
	} else if (recorded != AGENTMON_UNKNOWN && recorded != (*p)->state) {
		(*p)->state = recorded; /* the next probe is compared with the status */
	}
	pthread_mutex_unlock(&m->mu);
	return r;
}

bool agentmon_lost(struct agentmon *m)
{
	if (!m)
		return false;
	pthread_mutex_lock(&m->mu);
	bool lost = m->lost;
	m->lost = false;
	pthread_mutex_unlock(&m->mu);
	return lost;
}

/* Probes one agent (outside the lock); returns its state. */
static enum agentmon_state probe(struct agentmon *m, const char *addr)
{
	struct grpc_status st = {0};
	bool pending = false;
	int r = agentclient_probe(m->c->ac, addr, AGENTMON_PROBE_MS, &pending, &st);
	if (r == -ENOTSUP)
		return AGENTMON_UNKNOWN;
	return r != GRPC_OK ? AGENTMON_DOWN : pending ? AGENTMON_GATED : AGENTMON_SERVING;
}

bool agentmon_due(enum agentmon_state state, bool same_conn, int64_t since_ms)
{
	if (state == AGENTMON_SERVING && same_conn)
		return since_ms >= AGENTMON_REPROBE_MS;
	if (state == AGENTMON_GATED)
		return since_ms >= AGENTMON_TICK_MS;
	return since_ms >= AGENTMON_FAST_MS;
}

/* Whether agent a is probed in this round (agentmon_due).  A serving agent's connection is
 * looked at only when its own cadence has come: while it is still the one its last probe used,
 * nothing can have changed (a restart drops the connection) and nothing is sent. */
static bool due(struct agentmon *m, const struct monitored_agent *a, int64_t now)
{
	int64_t since = now - a->probed_ms;
	if (!agentmon_due(a->state, false, since))
		return false;
	if (a->state != AGENTMON_SERVING || !a->conn)
		return true;
	return agentmon_due(a->state, agentclient_conn_id(m->c->ac, a->addr) == a->conn, since);
}

static const char *state_name(enum agentmon_state s)
{
	return s == AGENTMON_DOWN      ? "unreachable"
	       : s == AGENTMON_GATED   ? "restore pending"
	       : s == AGENTMON_SERVING ? "serving"
	                               : "unknown";
}

/* Probes agent name at addr and records the result; true when its state changed (logged: the
 * moment the controller noticed). */
static bool probe_one(struct agentmon *m, const char *name, const char *addr)
{
	enum agentmon_state s = probe(m, addr), was = AGENTMON_UNKNOWN;
	uint64_t conn = s == AGENTMON_SERVING ? agentclient_conn_id(m->c->ac, addr) : 0;
	bool changed = false;
	pthread_mutex_lock(&m->mu);
	for (struct monitored_agent *a = m->agents; a; a = a->next)
		if (!strcmp(a->name, name) && !strcmp(a->addr, addr)) {
			changed = s != AGENTMON_UNKNOWN && s != a->state;
			was = a->state;
			a->state = s;
			a->conn = conn;
			a->probed_ms = time_mono_ms();
		}
	pthread_mutex_unlock(&m->mu);
	if (changed)
		log_info("agent probe state changed", "agent", name, "from", state_name(was), "to",
		         state_name(s));
	return changed;
}

/* One round over the agents known at its start; -ENOMEM (nothing probed: the next tick tries
 * again) or 0. */
static int round_once(struct agentmon *m)
{
	pthread_mutex_lock(&m->mu);
	size_t n = 0;
	for (struct monitored_agent *a = m->agents; a; a = a->next)
		n++;
	char **names = calloc(n ? n : 1, sizeof(char *)),
	     **addrs = calloc(n ? n : 1, sizeof(char *));
	size_t k = 0;
	bool oom = !names || !addrs;
	int64_t now = time_mono_ms();
	for (struct monitored_agent *a = m->agents; a && !oom; a = a->next) {
		if (!due(m, a, now))
			continue;
		names[k] = strdup(a->name);
		addrs[k] = strdup(a->addr);
		oom = !names[k++] || !addrs[k - 1];
	}
	pthread_mutex_unlock(&m->mu);
	for (size_t i = 0; i < k && !oom; i++)
		if (probe_one(m, names[i], addrs[i]))
			m->kick(m->arg, names[i]);
	for (size_t i = 0; i < k; i++) {
		free(names[i]);
		free(addrs[i]);
	}
	free(names);
	free(addrs);
	return oom ? -ENOMEM : 0;
}

static void *mon_main(void *arg)
{
	struct agentmon *m = arg;
	for (;;) {
		int64_t t0 = time_mono_ms();
		if (round_once(m) < 0)
			log_warn("agent monitor: out of memory; probing again at the next tick");
		int64_t rest = AGENTMON_FAST_MS - (time_mono_ms() - t0);
		if (stop_wait_ms(&m->stop, rest > 0 ? rest : 0))
			return NULL;
	}
}

int agentmon_start(struct ctl *c, void (*kick)(void *arg, const char *agent), void *arg,
                   struct agentmon **out)
{
	struct agentmon *m = calloc(1, sizeof(*m));
	*out = NULL;
	if (!m)
		return -ENOMEM;
	m->c = c;
	m->kick = kick;
	m->arg = arg;
	pthread_mutex_init(&m->mu, NULL);
	stop_init(&m->stop);
	if (pthread_create(&m->th, NULL, mon_main, m) != 0) {
		stop_fini(&m->stop);
		pthread_mutex_destroy(&m->mu);
		free(m);
		return -EAGAIN;
	}
	*out = m;
	return 0;
}

void agentmon_stop(struct agentmon *m)
{
	if (!m)
		return;
	stop_set(&m->stop);
	pthread_join(m->th, NULL);
	while (m->agents) {
		struct monitored_agent *a = m->agents;
		m->agents = a->next;
		monitored_agent_free(a);
	}
	stop_fini(&m->stop);
	pthread_mutex_destroy(&m->mu);
	free(m);
}
