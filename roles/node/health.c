/* node/health — volume conditions from the NVMe controllers' sysfs state (health.h). */
#include "node/health.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/bounds.h"

struct node_health_seen {
	struct node_health_seen *next;
	char volume_id[NODE_REC_STR];
	int64_t since_ms; /* CLOCK_MONOTONIC of the first sighting */
	time_t since_s;   /* the same, wall clock */
};

void node_health_init(struct node_health *h)
{
	pthread_mutex_init(&h->mu, NULL);
	h->seen = NULL;
	h->n = 0;
}

void node_health_fini(struct node_health *h)
{
	while (h->seen) {
		struct node_health_seen *s = h->seen;
		h->seen = s->next;
		free(s);
	}
	pthread_mutex_destroy(&h->mu);
}

/* Under h->mu: forgets the sighting of id. */
static void forget(struct node_health *h, const char *id)
{
	for (struct node_health_seen **p = &h->seen; *p; p = &(*p)->next)
		if (!strcmp((*p)->volume_id, id)) {
			struct node_health_seen *s = *p;
			*p = s->next;
			free(s);
			h->n--;
			return;
		}
}

/* Under h->mu: the first sighting of id down, recorded now when there is none; *since_ms and
 * *since_s (now's when out of memory). */
static void sighting(struct node_health *h, const char *id, int64_t now_ms, time_t now_s,
                     int64_t *since_ms, time_t *since_s)
{
	struct node_health_seen *s = h->seen;
	for (; s; s = s->next)
		if (!strcmp(s->volume_id, id))
			break;
	if (!s && (s = calloc(1, sizeof(*s)))) {
		snprintf(s->volume_id, sizeof(s->volume_id), "%s", id);
		s->since_ms = now_ms;
		s->since_s = now_s;
		s->next = h->seen;
		h->seen = s;
		if (++h->n > NODE_HEALTH_MAX) { /* drop the oldest (the list's last) */
			struct node_health_seen **p = &h->seen;
			while ((*p)->next)
				p = &(*p)->next;
			free(*p);
			*p = NULL;
			h->n--;
		}
	}
	*since_ms = s ? s->since_ms : now_ms;
	*since_s = s ? s->since_s : now_s;
}

/* The controller's ctrl_loss_tmo in seconds (-1: off), the kernel's default when unreadable;
 * *known false then. */
static long long ctrl_loss_tmo(const struct nvme_ctx *c, const char *name, bool *known)
{
	char rel[128], buf[64], *end;
	snprintf(rel, sizeof(rel), "class/nvme/%s/ctrl_loss_tmo", name);
	*known = false;
	if (nvme_sysfs_read(c->sysfs_root, rel, buf, sizeof(buf)) < 0)
		return RULES_KERNEL_CTRL_LOSS_TMO;
	if (!strcmp(buf, "off")) {
		*known = true;
		return -1;
	}
	errno = 0;
	long long v = strtoll(buf, &end, 10);
	if (errno || end == buf || *end || v < 0)
		return RULES_KERNEL_CTRL_LOSS_TMO;
	*known = true;
	return v;
}

static void path_down(const struct nvme_ctx *c, const struct nvme_ctrl_info *ci, const char *nqn,
                      int64_t now_ms, int64_t since_ms, time_t since_s,
                      struct node_volume_health *out)
{
	char at[32] = "", left[160];
	struct tm tm;
	bool known;
	long long tmo = ctrl_loss_tmo(c, ci->name, &known);
	long long gone = (now_ms - since_ms) / 1000;

	if (gmtime_r(&since_s, &tm))
		strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (tmo < 0)
		snprintf(left, sizeof(left), "the kernel retries for ever (ctrl_loss_tmo off)");
	else
		snprintf(
		    left, sizeof(left),
		    "the kernel removes it in at most %lld s (ctrl_loss_tmo %lld s%s) unless the "
		    "target returns",
		    tmo > gone ? tmo - gone : 0, tmo, known ? "" : ", the kernel default");
	out->abnormal = true;
	out->down_seconds = (double)(now_ms - since_ms) / 1000.0;
	out->ctrl_loss_tmo = tmo;
	snprintf(out->message, sizeof(out->message),
	         "NVMe controller %s of %s is %s since %s (first seen by the node plugin); I/O "
	         "stalls; %s",
	         ci->name, nqn, ci->state[0] ? ci->state : "in an unreadable state", at, left);
}

int node_health_check(struct node_health *h, const struct nvme_ctx *c, const struct node_record *r,
                      int64_t now_ms, time_t now_s, struct node_volume_health *out, struct err *e)
{
	struct nvme_ctrl_info *cs = NULL;
	size_t n = 0, live = 0;
	int rc = nvme_ctrls_of_subsys(c, r->subsys_nqn, &cs, &n, e);
	if (rc < 0)
		return rc;
	while (live < n && strcmp(cs[live].state, "live") != 0)
		live++;
	pthread_mutex_lock(&h->mu);
	*out = (struct node_volume_health){0};
	if (live < n) {
		forget(h, r->volume_id);
		out->live = true;
		snprintf(out->message, sizeof(out->message), "NVMe controller %s of %s is live",
		         cs[live].name, r->subsys_nqn);
	} else if (n == 0) {
		forget(h, r->volume_id);
		out->abnormal = true;
		out->removed = true;
		snprintf(
		    out->message, sizeof(out->message),
		    "the kernel removed the NVMe controller of %s (its ctrl_loss_tmo ran out, or "
		    "it was deleted); the volume no longer works on this node: restart the "
		    "workload so that the volume is staged on a new connection",
		    r->subsys_nqn);
	} else {
		int64_t since_ms;
		time_t since_s;
		sighting(h, r->volume_id, now_ms, now_s, &since_ms, &since_s);
		path_down(c, &cs[0], r->subsys_nqn, now_ms, since_ms, since_s, out);
	}
	pthread_mutex_unlock(&h->mu);
	free(cs);
	return 0;
}
