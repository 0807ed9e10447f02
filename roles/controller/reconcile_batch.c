/* reconcile_batch — the ReconcileState batch of one agent (reconcile_batch.h). */
#include "controller/reconcile_batch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "controller/agents.h"
#include "controller/pvst.h"
#include "rules/conditions.h"

/* The item of one volume, pointing into the volume (built, packed, then dropped). */
struct item_build {
	PillarCsi__Agent__V1__VolumeDesiredState volume;
	PillarCsi__Agent__V1__ExportDesiredState export, *exportp;
	PillarCsi__Agent__V1__ExportParams params;
	PillarCsi__Agent__V1__NvmeofTcpExportParams tcp;
	PillarCsi__Agent__V1__FencingToken token;
	struct pvst_backend_buf backend;
	char **initiators;
};

static bool allowed(const struct model_pvst_published *p);

/* The hosts a volume's export admits: publishedNodes that are not being revoked.  0 or
 * -ENOMEM. */
static int initiators(struct item_build *x, const struct model_pvst *v)
{
	x->initiators = calloc(v->status.n_published + 1, sizeof(char *));
	if (!x->initiators)
		return -ENOMEM;
	for (size_t i = 0; i < v->status.n_published; i++) {
		const struct model_pvst_published *p = &v->status.published[i];
		if (allowed(p))
			x->initiators[x->export.n_allowed_initiators++] = p->initiator_id;
	}
	x->export.allowed_initiators = x->initiators;
	return 0;
}

/* Fills x from v, which has an exportSpec (agent-api.md §12.2 step 3); 0 or -ENOMEM. */
static int build(struct item_build *x, const struct model_pvst *v)
{
	const struct model_pvst_export_spec *es = &v->status.export_spec;
	pillar_csi__agent__v1__volume_desired_state__init(&x->volume);
	pillar_csi__agent__v1__export_desired_state__init(&x->export);
	pillar_csi__agent__v1__export_params__init(&x->params);
	pillar_csi__agent__v1__nvmeof_tcp_export_params__init(&x->tcp);
	pillar_csi__agent__v1__fencing_token__init(&x->token);
	x->volume.volume_id = v->spec.agent_volume_id ?: "";
	x->volume.backend_type = agents_backend_enum(v->spec.backend_type ?: "");
	if (pvst_backend_params(&x->backend, v, &x->volume.backend_params) < 0)
		return -ENOMEM;
	x->volume.device_path = v->status.backend_device_path ?: "";
	x->token.volume_uid = v->meta.uid ?: "";
	x->token.generation = pvst_gen(v);
	x->volume.fence = &x->token;
	x->tcp.bind_address = es->bind_address ?: "";
	x->tcp.port = es->has_port ? (int32_t)es->port : 0;
	x->tcp.in_capsule_data_size =
	    es->has_in_capsule_data_size ? (int32_t)es->in_capsule_data_size : 0;
	x->params.params_case = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__PARAMS_NVMEOF_TCP;
	x->params.nvmeof_tcp = &x->tcp;
	x->export.protocol_type = PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP;
	x->export.export_params = &x->params;
	x->export.acl_enabled = es->has_acl_enabled && es->acl_enabled;
	if (initiators(x, v) < 0)
		return -ENOMEM;
	x->exportp = &x->export;
	x->volume.n_exports = 1;
	x->volume.exports = &x->exportp;
	return 0;
}

/* A volume the resync looks at: not deleting, past Provisioning (§12.3). */
bool batch_item_eligible(const struct model_pvst *v)
{
	const char *phase = v->status.phase ?: "";
	return !(v->status.has_deleting && v->status.deleting) && phase[0] &&
	       strcmp(phase, "Provisioning");
}

/* Copies s (NULL stays NULL) to *at, advancing it. */
static const char *put(char **at, const char *s)
{
	if (!s)
		return NULL;
	size_t n = strlen(s) + 1;
	char *d = memcpy(*at, s, n);
	*at += n;
	return d;
}

static size_t len0(const char *s)
{
	return s ? strlen(s) + 1 : 0;
}

/* The node of every allowed initiator, in initiators()'s order (put_nodes). */
static bool allowed(const struct model_pvst_published *p)
{
	return !(p->has_revoking && p->revoking) && p->initiator_id;
}

static size_t nodes_len(const struct model_pvst *v)
{
	size_t n = 0;
	for (size_t i = 0; i < v->status.n_published; i++)
		if (allowed(&v->status.published[i]))
			n += len0(v->status.published[i].node_id ?: "");
	return n;
}

static const char *put_nodes(char **at, const struct model_pvst *v)
{
	const char *first = *at;
	for (size_t i = 0; i < v->status.n_published; i++)
		if (allowed(&v->status.published[i]))
			put(at, v->status.published[i].node_id ?: "");
	return first;
}

int batch_item_of(struct batch_item *x, const struct model_pvst *v, const char *agent)
{
	const struct model_nvmeof_tcp *tcp = &v->spec.resolved.protocol.nvmeof_tcp;
	bool dhchap = tcp->has_dhchap;
	const char *ref = v->spec.agent_ref;
	const struct model_cond *c =
	    model_cond_get(&v->status.conditions, RULES_COND_EXPORT_RECONCILED);
	struct item_build b = {0};
	size_t plen = 0;
	memset(x, 0, sizeof(*x));
	x->state = !batch_item_eligible(v) || (agent && (!ref || strcmp(ref, agent)))
	               ? BATCH_ITEM_SKIPPED
	           : v->status.has_export_spec ? BATCH_ITEM_EXPORTED
	                                       : BATCH_ITEM_NO_SPEC;
	if (x->state == BATCH_ITEM_EXPORTED) {
		const struct model_pvst_export_spec *es = &v->status.export_spec;
		x->in_capsule = es->has_in_capsule_data_size && es->in_capsule_data_size > 0;
		vdigest_text(vdigest_of(v), x->digest);
		x->digest_recorded =
		    v->status.reconciled_digest && !strcmp(v->status.reconciled_digest, x->digest);
		x->digest_stale = v->status.reconciled_digest && !x->digest_recorded;
		if (build(&b, v) < 0)
			goto oom;
		plen = pillar_csi__agent__v1__volume_desired_state__get_packed_size(&b.volume);
	}
	size_t n = len0(v->meta.name ?: "") + len0(v->meta.uid ?: "") +
	           len0(v->spec.agent_volume_id ?: "") + plen;
	if (c)
		n += len0(c->status) + len0(c->reason) + len0(c->message);
	if (dhchap)
		n += len0(model_dhchap_hash(&tcp->dhchap)) +
		     len0(model_dhchap_dh_group(&tcp->dhchap)) + nodes_len(v);
	char *at = x->storage = malloc(n ? n : 1);
	if (!at)
		goto oom;
	if (plen) { /* first: the packed item is then aligned as malloc aligns */
		x->packed_len =
		    pillar_csi__agent__v1__volume_desired_state__pack(&b.volume, (uint8_t *)at);
		x->packed = (const uint8_t *)at;
		at += plen;
	}
	x->name = put(&at, v->meta.name ?: "");
	x->uid = put(&at, v->meta.uid ?: "");
	x->volume_id = put(&at, v->spec.agent_volume_id ?: "");
	if (c) {
		x->cond_status = put(&at, c->status);
		x->cond_reason = put(&at, c->reason);
		x->cond_message = put(&at, c->message);
		x->cond_has_observed_generation = c->has_observed_generation;
		x->cond_observed_generation = c->observed_generation;
	}
	if (dhchap) {
		x->dhchap_hash = put(&at, model_dhchap_hash(&tcp->dhchap));
		x->dhchap_group = put(&at, model_dhchap_dh_group(&tcp->dhchap));
		x->dhchap_bidirectional = model_dhchap_bidirectional(&tcp->dhchap);
		x->initiator_nodes = put_nodes(&at, v);
	}
	x->generation = v->meta.generation;
	x->resource_version = model_meta_rv(&v->meta);
	pvst_backend_params_free(&b.backend);
	free(b.initiators);
	return 0;
oom:
	pvst_backend_params_free(&b.backend);
	free(b.initiators);
	batch_item_clear(x);
	return -ENOMEM;
}

void batch_item_clear(struct batch_item *x)
{
	if (!x)
		return;
	free(x->storage);
	memset(x, 0, sizeof(*x));
}

PillarCsi__Agent__V1__VolumeDesiredState *batch_item_unpack(const struct batch_item *x)
{
	return pillar_csi__agent__v1__volume_desired_state__unpack(NULL, x->packed_len, x->packed);
}

static bool same(const char *a, const char *b)
{
	return a && !strcmp(a, b);
}

bool batch_item_cond_same(const struct batch_item *x, const char *reason, const char *msg)
{
	const char *st = !strcmp(reason, RULES_REASON_RECONCILED) ? "True" : "False";
	return same(x->cond_status, st) && same(x->cond_reason, reason) &&
	       same(x->cond_message, msg ? msg : "") && x->cond_has_observed_generation &&
	       x->cond_observed_generation == x->generation;
}

/* The items an agent's last whole-agent pass kept, one entry per agent (ctl's memos). */
struct batch_memo {
	struct batch_memo *next;
	struct batch_item *items;
	size_t n;
	char agent[];
};

static void items_free(struct batch_item *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		batch_item_clear(&v[i]);
	free(v);
}

/* Detaches the agent's kept items (*v NULL, *n 0 when none; the caller owns them). */
static void memo_take(struct ctl *c, const char *agent, struct batch_item **v, size_t *n)
{
	*v = NULL;
	*n = 0;
	pthread_mutex_lock(&c->memo_mu);
	for (struct batch_memo *m = c->memos; m; m = m->next)
		if (!strcmp(m->agent, agent)) {
			*v = m->items;
			*n = m->n;
			m->items = NULL;
			m->n = 0;
			break;
		}
	pthread_mutex_unlock(&c->memo_mu);
}

/* Keeps v (n items sorted by name; ownership passes, freed on out of memory). */
static void memo_put(struct ctl *c, const char *agent, struct batch_item *v, size_t n)
{
	pthread_mutex_lock(&c->memo_mu);
	struct batch_memo *m = c->memos;
	while (m && strcmp(m->agent, agent))
		m = m->next;
	if (!m && (m = calloc(1, sizeof(*m) + strlen(agent) + 1)) != NULL) {
		strcpy(m->agent, agent);
		m->next = c->memos;
		c->memos = m;
	}
	if (m) {
		items_free(m->items, m->n);
		m->items = v;
		m->n = n;
	}
	pthread_mutex_unlock(&c->memo_mu);
	if (!m)
		items_free(v, n); /* out of memory: the next pass decodes them again */
}

void reconcile_batch_memos_free(struct batch_memo *m)
{
	while (m) {
		struct batch_memo *next = m->next;
		items_free(m->items, m->n);
		free(m);
		m = next;
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void reconcile_batch_clear(struct reconcile_batch *b)
{
	items_free(b->items, b->n);
	b->items = NULL;
	b->n = b->cap = 0;
}

static void last_free(struct reconcile_batch *b)
{
	items_free(b->last, b->n_last);
	b->last = NULL;
	b->n_last = 0;
}

/* Room for one more item; 0 or -ENOMEM. */
static int batch_grow(struct reconcile_batch *b)
{
	if (b->n < b->cap)
		return 0;
	size_t cap = b->cap ? b->cap * 2 : 16;
	struct batch_item *nv = realloc(b->items, cap * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	b->items = nv;
	b->cap = cap;
	return 0;
}

/* false when name is not taken by this pass (created since the names were listed: not
 * locked, the next pass's). */
static bool taken(const struct reconcile_batch *b, const char *name)
{
	return !b->locked || bsearch(&name, b->locked, b->n_locked, sizeof(char *), cmp_str);
}

static int cmp_item_name(const void *key, const void *it)
{
	return strcmp(key, ((const struct batch_item *)it)->name);
}

/* store_skip_fn: the last pass's item of this version, moved into b (not decoded again). */
static bool reuse(const char *ns, const char *name, uint64_t rv, void *arg)
{
	(void)ns;
	struct reconcile_batch *b = arg;
	struct batch_item *m =
	    b->n_last ? bsearch(name, b->last, b->n_last, sizeof(*m), cmp_item_name) : NULL;
	if (!m || !m->storage || !rv || m->resource_version != rv)
		return false;
	if (!taken(b, name))
		return true;
	if (batch_grow(b) < 0) {
		b->err = -ENOMEM;
		return false;
	}
	b->items[b->n++] = *m;
	m->storage = NULL; /* moved (its name stays readable for the search until b is done) */
	return true;
}

static int batch_add(void *obj, void *arg)
{
	struct reconcile_batch *b = arg;
	const struct model_pvst *v = obj;
	const char *key = v->meta.name;
	if (!key)
		return 0;
	if (!taken(b, key))
		return 0;
	if (batch_grow(b) < 0 || batch_item_of(&b->items[b->n], v, b->agent) < 0)
		return -ENOMEM;
	b->n++;
	return 0;
}

static int cmp_items(const void *a, const void *b)
{
	return strcmp(((const struct batch_item *)a)->name, ((const struct batch_item *)b)->name);
}

/* The unreadable records of one list, as reconcile_batch_unreadable gives them. */
struct unreadable {
	char *text;
	size_t len;
};

#define UNREADABLE_MAX 2048

static void note_unreadable(void *arg, const struct store_kind *k, const char *ns, const char *name,
                            const char *error)
{
	struct unreadable *u = arg;
	char one[UNREADABLE_MAX];
	(void)ns;
	int n =
	    snprintf(one, sizeof(one), "%s%s \"%s\": %s", u->len ? "; " : "", k->kind, name, error);
	if (n < 0 || u->len + (size_t)n >= UNREADABLE_MAX)
		return; /* the first ones fill the message; the others show in a list */
	char *t = realloc(u->text, u->len + (size_t)n + 1);
	if (!t)
		return;
	memcpy(t + u->len, one, (size_t)n + 1);
	u->text = t;
	u->len += (size_t)n;
}

void reconcile_batch_unreadable(struct ctl *c, char *buf, size_t cap)
{
	pthread_mutex_lock(&c->memo_mu);
	snprintf(buf, cap, "%s", c->unreadable ? c->unreadable : "");
	pthread_mutex_unlock(&c->memo_mu);
}

/* A whole-agent list: the agent's volumes into b, the records it could not read noted in c. */
static int list_agent(struct ctl *c, const char *agent, struct reconcile_batch *b, struct err *e)
{
	char sel[400];
	struct unreadable u = {0};
	struct store_unreadable catch = {note_unreadable, &u}, prev;
	snprintf(sel, sizeof(sel), RULES_LABEL_AGENT "=%s", agent);
	store_unreadable_catch(&catch, &prev);
	int r =
	    model_list_each_skip(c->st, &model_pvst_kind, NULL, sel, reuse, batch_add, b, NULL, e);
	store_unreadable_catch(&prev, NULL);
	if (r == 0) {
		if (u.text)
			log_warnf("agent %s: left out of its export pass (unreadable): %s", agent,
			          u.text);
		pthread_mutex_lock(&c->memo_mu);
		free(c->unreadable);
		c->unreadable = u.text;
		pthread_mutex_unlock(&c->memo_mu);
	} else {
		free(u.text);
	}
	return r;
}

/* Reads the pass's volumes into b: PillarVolumeState `only`, or every volume of the agent
 * (reusing b->last's items, which are freed here).  GRPC_OK, or an error in gs. */
static int read_items(struct ctl *c, const char *agent, const char *only, struct reconcile_batch *b,
                      struct grpc_status *gs)
{
	struct err e = {0};
	if (only) {
		last_free(b); /* read again: one get, nothing to reuse */
		struct model_pvst one;
		int g = model_get(c->st, &model_pvst_kind, NULL, only, &one, &e);
		int r = g == 0 ? batch_add(&one, b) : 0;
		model_clear(&model_pvst_kind, &one);
		if (g < 0 && g != STORE_NOT_FOUND)
			return grpc_status_set(gs, GRPC_UNAVAILABLE,
			                       "reading PillarVolumeState \"%s\": %s", only, e.msg);
		return r < 0 ? grpc_status_oom(gs) : GRPC_OK;
	}
	b->err = 0;
	int r = list_agent(c, agent, b, &e);
	last_free(b);
	if (r == 0 && b->err)
		r = b->err;
	if (r == -ENOMEM)
		return grpc_status_oom(gs);
	if (r < 0)
		return grpc_status_set(gs, GRPC_UNAVAILABLE, "listing volumes of agent \"%s\": %s",
		                       agent, e.msg);
	qsort(b->items, b->n, sizeof(*b->items), cmp_items); /* reused ones came first */
	return GRPC_OK;
}

int reconcile_batch_read(struct ctl *c, const char *agent, const char *only,
                         struct reconcile_batch *b, struct grpc_status *gs)
{
	if (!only)
		memo_take(c, agent, &b->last, &b->n_last);
	return read_items(c, agent, only, b, gs);
}

int reconcile_batch_reread(struct ctl *c, const char *agent, const char *only,
                           struct reconcile_batch *b, const char *const *names, size_t n_names,
                           struct grpc_status *gs)
{
	b->last = b->items; /* what was read is the memo of the read again */
	b->n_last = b->n;
	b->items = NULL;
	b->n = b->cap = 0;
	b->locked = names;
	b->n_locked = n_names;
	return read_items(c, agent, only, b, gs);
}

void reconcile_batch_keep(struct ctl *c, const char *agent, struct reconcile_batch *b)
{
	memo_put(c, agent, b->items, b->n);
	b->items = NULL;
	b->n = b->cap = 0;
}

static int cmp_sent(const void *a, const void *b)
{
	const struct batch_item *x = *(const struct batch_item *const *)a;
	const struct batch_item *y = *(const struct batch_item *const *)b;
	if (x->in_capsule != y->in_capsule)
		return x->in_capsule ? -1 : 1;
	return strcmp(x->name, y->name);
}

void reconcile_batch_request_free(PillarCsi__Agent__V1__VolumeDesiredState **vols, size_t n)
{
	for (size_t i = 0; vols && i < n; i++)
		pillar_csi__agent__v1__volume_desired_state__free_unpacked(vols[i], NULL);
	free(vols);
}

int reconcile_batch_request(const struct reconcile_batch *b, struct batch_item ***order,
                            PillarCsi__Agent__V1__VolumeDesiredState ***vols, size_t *n)
{
	*n = 0;
	*vols = NULL;
	*order = calloc(b->n ? b->n : 1, sizeof(**order));
	if (!*order)
		return -ENOMEM;
	for (size_t i = 0; i < b->n; i++)
		if (b->items[i].state == BATCH_ITEM_EXPORTED)
			(*order)[(*n)++] = &b->items[i];
	qsort(*order, *n, sizeof(**order), cmp_sent);
	*vols = calloc(*n ? *n : 1, sizeof(**vols));
	for (size_t i = 0; *vols && i < *n; i++)
		if (!((*vols)[i] = batch_item_unpack((*order)[i]))) {
			reconcile_batch_request_free(*vols, i);
			*vols = NULL;
		}
	return *vols ? 0 : -ENOMEM;
}
