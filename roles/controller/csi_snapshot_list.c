/* csi_snapshot_list — ListSnapshots (docs/snapshots.md), answered from the controller's
 * PillarSnapshots: by snapshot ID, by source volume, or all, in name order, paginated by
 * max_entries with a decimal starting_token (the index of the next entry).  A snapshot is
 * listed once the agent took it (status.creationTime) and until DeleteSnapshot begins: the CSI
 * specification forbids listing one that is being cut. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/csi.h"
#include "controller/psnap.h"

static const char *str(const char *s)
{
	return s ? s : "";
}

struct gather {
	const char *source; /* filter, or NULL */
	struct model_psnap *v;
	size_t n, cap;
};

static int each(void *obj, void *arg)
{
	struct model_psnap *s = obj;
	struct gather *g = arg;
	if (!psnap_cut(s) || (g->source && strcmp(str(s->spec.source_volume_id), g->source)))
		return 0;
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 16;
		struct model_psnap *v = realloc(g->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		g->v = v;
		g->cap = cap;
	}
	g->v[g->n++] = *s; /* moved: the list clears a zeroed object */
	memset(s, 0, sizeof(*s));
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(str(((const struct model_psnap *)a)->meta.name),
	              str(((const struct model_psnap *)b)->meta.name));
}

static void gather_free(struct gather *g)
{
	for (size_t i = 0; i < g->n; i++)
		model_clear(&model_psnap_kind, &g->v[i]);
	free(g->v);
}

/* The index a starting_token names: 0 for none; -1 when it is not one we handed out. */
static long long token_index(const char *t, size_t n)
{
	if (!t || !*t)
		return 0;
	char *end = NULL;
	errno = 0;
	long long i = strtoll(t, &end, 10);
	if (errno || *end || i < 0 || (size_t)i > n || t[0] == '+' || t[0] == '-' || t[0] == ' ')
		return -1;
	return i;
}

static int page(const struct gather *g, const Csi__V1__ListSnapshotsRequest *req,
                Csi__V1__ListSnapshotsResponse *resp, struct grpc_status *gs)
{
	long long first = token_index(req->starting_token, g->n);
	if (first < 0)
		return grpc_status_set(gs, GRPC_ABORTED,
		                       "starting_token \"%s\" is not valid; list again without one",
		                       req->starting_token);
	size_t end = g->n;
	if (req->max_entries > 0 && (size_t)first + (size_t)req->max_entries < end)
		end = (size_t)first + (size_t)req->max_entries;
	if (end < g->n) {
		char next[24];
		snprintf(next, sizeof(next), "%zu", end);
		if (!(resp->next_token = strdup(next)))
			return grpc_status_oom(gs);
	}
	size_t n = end - (size_t)first;
	resp->entries = calloc(n ? n : 1, sizeof(*resp->entries));
	if (!resp->entries)
		return grpc_status_oom(gs);
	for (size_t i = (size_t)first; i < end; i++) {
		Csi__V1__ListSnapshotsResponse__Entry *e = malloc(sizeof(*e));
		if (!e)
			return grpc_status_oom(gs);
		csi__v1__list_snapshots_response__entry__init(e);
		resp->entries[resp->n_entries++] = e;
		if (!(e->snapshot = psnap_csi(&g->v[i])))
			return grpc_status_oom(gs);
	}
	return GRPC_OK;
}

int csi_list_snapshots(struct ctl *c, const Csi__V1__ListSnapshotsRequest *req,
                       Csi__V1__ListSnapshotsResponse *resp, struct grpc_status *gs)
{
	struct gather g = {.source = req->source_volume_id && *req->source_volume_id
	                                 ? req->source_volume_id
	                                 : NULL};
	gs->code = GRPC_OK;
	gs->msg[0] = 0;
	if (req->max_entries < 0)
		return grpc_status_set(gs, GRPC_INVALID_ARGUMENT,
		                       "max_entries must not be negative");
	int r = 0;
	if (req->snapshot_id && *req->snapshot_id) {
		struct model_psnap s;
		r = psnap_find(c, req->snapshot_id, &s, gs);
		if (r == GRPC_NOT_FOUND)
			r = 0;
		else if (r == 0)
			r = each(&s, &g) < 0 ? grpc_status_oom(gs) : 0;
		model_clear(&model_psnap_kind, &s);
	} else {
		struct err e = {0};
		r = model_list_each(c->st, &model_psnap_kind, NULL, NULL, each, &g, NULL, &e);
		if (r == -ENOMEM)
			r = grpc_status_oom(gs);
		else if (r < 0)
			r = grpc_status_set(gs, ctl_store_code(r), "listing PillarSnapshots: %s",
			                    e.msg);
		else if (g.n > 1)
			qsort(g.v, g.n, sizeof(*g.v), by_name);
	}
	if (r == 0)
		r = page(&g, req, resp, gs);
	gather_free(&g);
	return r;
}
