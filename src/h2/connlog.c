#include "h2/connlog.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"

void h2_connlog_init(struct h2_connlog *g, struct h2_loop *l, uint64_t interval_ms)
{
	memset(g, 0, sizeof(*g));
	g->loop = l;
	g->interval_ms = interval_ms ? interval_ms : 1;
}

/* first: the entry's opening line (one event, no period). */
static void emit(const struct h2_connlog *g, const struct h2_connlog_entry *x, bool first)
{
	char count[32], period[32];

	snprintf(count, sizeof(count), "%lu", first ? 1ul : x->count);
	if (first) {
		log_warn(x->msg, "peer", x->peer, "reason", x->reason, "count", count);
		return;
	}
	if (g->interval_ms % 1000 == 0)
		snprintf(period, sizeof(period), "%llus",
		         (unsigned long long)(g->interval_ms / 1000));
	else
		snprintf(period, sizeof(period), "%llums", (unsigned long long)g->interval_ms);
	log_warn(x->msg, "peer", x->peer, "reason", x->reason, "count", count, "period", period);
}

static void timer_fn(void *arg);

static void arm(struct h2_connlog *g, uint64_t at)
{
	if (!g->timer.armed || g->timer.at > at)
		h2_timer_arm(g->loop, &g->timer, at, timer_fn, g);
}

/* At the end of an entry's interval: its count goes out in one line and the entry stays for
 * another interval; an entry with nothing counted is dropped. */
static void timer_fn(void *arg)
{
	struct h2_connlog *g = arg;
	uint64_t now = h2_now_ms(), next = UINT64_MAX;

	for (size_t i = 0; i <= H2_CONNLOG_SLOTS; i++) {
		struct h2_connlog_entry *x = &g->ent[i];
		if (!x->used)
			continue;
		if (now >= x->logged_at + g->interval_ms) {
			if (!x->count) {
				x->used = false;
				continue;
			}
			emit(g, x, false);
			x->count = 0;
			x->logged_at = now;
		}
		if (x->logged_at + g->interval_ms < next)
			next = x->logged_at + g->interval_ms;
	}
	if (next != UINT64_MAX)
		arm(g, next);
}

static struct h2_connlog_entry *find(struct h2_connlog *g, const char *msg, const char *peer,
                                     const char *reason)
{
	struct h2_connlog_entry *free_slot = NULL;

	for (size_t i = 0; i < H2_CONNLOG_SLOTS; i++) {
		struct h2_connlog_entry *x = &g->ent[i];
		if (!x->used) {
			if (!free_slot)
				free_slot = x;
			continue;
		}
		if (x->msg == msg && strcmp(x->peer, peer) == 0 && strcmp(x->reason, reason) == 0)
			return x;
	}
	if (free_slot) {
		memset(free_slot, 0, sizeof(*free_slot));
		free_slot->msg = msg;
		snprintf(free_slot->peer, sizeof(free_slot->peer), "%s", peer);
		snprintf(free_slot->reason, sizeof(free_slot->reason), "%s", reason);
		return free_slot;
	}
	return &g->ent[H2_CONNLOG_SLOTS]; /* "other peers" */
}

void h2_connlog_event(struct h2_connlog *g, const char *msg, const char *peer, const char *reason)
{
	struct h2_connlog_entry *x = find(g, msg, peer, reason);
	uint64_t now = h2_now_ms();

	if (x == &g->ent[H2_CONNLOG_SLOTS]) { /* reports the latest event and reason */
		snprintf(x->peer, sizeof(x->peer), "other peers");
		snprintf(x->reason, sizeof(x->reason), "%s", reason);
		x->msg = msg;
	}
	if (!x->used) {
		x->used = true;
		emit(g, x, true);
		x->count = 0;
		x->logged_at = now;
		arm(g, now + g->interval_ms);
		return;
	}
	x->count++;
}

void h2_connlog_stop(struct h2_connlog *g)
{
	if (!g->loop)
		return;
	h2_timer_cancel(g->loop, &g->timer);
	for (size_t i = 0; i <= H2_CONNLOG_SLOTS; i++) {
		struct h2_connlog_entry *x = &g->ent[i];
		if (x->used && x->count)
			emit(g, x, false);
		x->used = false;
	}
}
