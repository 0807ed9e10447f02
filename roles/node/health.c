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
	*h = (struct node_health){0};
	pthread_mutex_init(&h->mu, NULL);
	pthread_mutex_init(&h->report_mu, NULL);
}

static void list_free(struct node_health_seen *s)
{
	while (s) {
		struct node_health_seen *next = s->next;
		free(s);
		s = next;
	}
}

void node_health_fini(struct node_health *h)
{
	list_free(h->seen);
	list_free(h->lost);
	pthread_mutex_destroy(&h->mu);
	pthread_mutex_destroy(&h->report_mu);
}

/* Under h->mu: removes id from a list; true when it was there. */
static bool forget(struct node_health_seen **list, size_t *n, const char *id)
{
	for (struct node_health_seen **p = list; *p; p = &(*p)->next)
		if (!strcmp((*p)->volume_id, id)) {
			struct node_health_seen *s = *p;
			*p = s->next;
			free(s);
			(*n)--;
			return true;
		}
	return false;
}

/* Under h->mu: the entry of id in a list, added now when there is none (at most
 * NODE_HEALTH_MAX: the oldest goes); *added.  NULL when out of memory. */
static struct node_health_seen *sighting(struct node_health_seen **list, size_t *n, const char *id,
                                         int64_t now_ms, time_t now_s, bool *added)
{
	struct node_health_seen *s = *list;
	*added = false;
	for (; s; s = s->next)
		if (!strcmp(s->volume_id, id))
			return s;
	if (!(s = calloc(1, sizeof(*s))))
		return NULL;
	snprintf(s->volume_id, sizeof(s->volume_id), "%s", id);
	s->since_ms = now_ms;
	s->since_s = now_s;
	s->next = *list;
	*list = s;
	*added = true;
	if (++*n > NODE_HEALTH_MAX) { /* drop the oldest (the list's last) */
		struct node_health_seen **p = list;
		while ((*p)->next)
			p = &(*p)->next;
		free(*p);
		*p = NULL;
		(*n)--;
	}
	return s;
}

/* Under h->mu: the lost set as {"<volume ID>":"<RFC 3339>",...} (volume IDs and times need no
 * escaping: the ID grammar has no quote or backslash), or NULL when out of memory. */
static char *lost_json(const struct node_health *h)
{
	size_t cap = 3 + h->n_lost * (NODE_REC_STR + 40), o = 0;
	char *buf = malloc(cap);
	if (!buf)
		return NULL;
	buf[o++] = '{';
	for (const struct node_health_seen *s = h->lost; s; s = s->next) {
		char at[32] = "";
		struct tm tm;
		if (gmtime_r(&s->since_s, &tm))
			strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%SZ", &tm);
		o += (size_t)snprintf(buf + o, cap - o, "%s\"%s\":\"%s\"", o > 1 ? "," : "",
		                      s->volume_id, at);
	}
	snprintf(buf + o, cap - o, "}");
	return buf;
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
	bool changed = false;
	char *report = NULL;
	int rc = nvme_ctrls_of_subsys(c, r->subsys_nqn, &cs, &n, e);
	if (rc < 0)
		return rc;
	while (live < n && strcmp(cs[live].state, "live") != 0)
		live++;
	pthread_mutex_lock(&h->report_mu);
	pthread_mutex_lock(&h->mu);
	*out = (struct node_volume_health){0};
	if (live < n) {
		forget(&h->seen, &h->n, r->volume_id);
		changed = forget(&h->lost, &h->n_lost, r->volume_id);
		out->live = true;
		snprintf(out->message, sizeof(out->message), "NVMe controller %s of %s is live",
		         cs[live].name, r->subsys_nqn);
	} else if (n == 0) {
		forget(&h->seen, &h->n, r->volume_id);
		sighting(&h->lost, &h->n_lost, r->volume_id, now_ms, now_s, &changed);
		out->abnormal = true;
		out->removed = true;
		snprintf(
		    out->message, sizeof(out->message),
		    "the kernel removed the NVMe controller of %s (its ctrl_loss_tmo ran out, or "
		    "it was deleted); the volume no longer works on this node: restart the "
		    "workload so that the volume is staged on a new connection",
		    r->subsys_nqn);
	} else {
		bool added;
		struct node_health_seen *s =
		    sighting(&h->seen, &h->n, r->volume_id, now_ms, now_s, &added);
		path_down(c, &cs[0], r->subsys_nqn, now_ms, s ? s->since_ms : now_ms,
		          s ? s->since_s : now_s, out);
	}
	if (changed && h->report)
		report = lost_json(h);
	pthread_mutex_unlock(&h->mu);
	if (report)
		h->report(h->report_ctx, h->node_id, report);
	pthread_mutex_unlock(&h->report_mu);
	free(report);
	free(cs);
	return 0;
}
