/* xitem — a volume's ReconcileState item, compact (xitem.h). */
#include "controller/xitem.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller/agents.h"
#include "controller/pvst.h"
#include "rules/conditions.h"

/* The item of one volume, pointing into the volume (built, packed, then dropped). */
struct xbuild {
	PillarCsi__Agent__V1__VolumeDesiredState vds;
	PillarCsi__Agent__V1__ExportDesiredState eds, *edsp;
	PillarCsi__Agent__V1__ExportParams ep;
	PillarCsi__Agent__V1__NvmeofTcpExportParams np;
	PillarCsi__Agent__V1__FencingToken tok;
	struct pvst_backend_buf bb;
	char **inits;
};

/* The hosts a volume's export admits: publishedNodes that are not being revoked.  0 or
 * -ENOMEM. */
static int initiators(struct xbuild *x, const struct model_pvst *v)
{
	x->inits = calloc(v->status.n_published + 1, sizeof(char *));
	if (!x->inits)
		return -ENOMEM;
	for (size_t i = 0; i < v->status.n_published; i++) {
		const struct model_pvst_published *p = &v->status.published[i];
		if (!(p->has_revoking && p->revoking) && p->initiator_id)
			x->inits[x->eds.n_allowed_initiators++] = p->initiator_id;
	}
	x->eds.allowed_initiators = x->inits;
	return 0;
}

/* Fills x from v, which has an exportSpec (agent-api.md §12.2 step 3); 0 or -ENOMEM. */
static int build(struct xbuild *x, const struct model_pvst *v)
{
	const struct model_pvst_export_spec *es = &v->status.export_spec;
	pillar_csi__agent__v1__volume_desired_state__init(&x->vds);
	pillar_csi__agent__v1__export_desired_state__init(&x->eds);
	pillar_csi__agent__v1__export_params__init(&x->ep);
	pillar_csi__agent__v1__nvmeof_tcp_export_params__init(&x->np);
	pillar_csi__agent__v1__fencing_token__init(&x->tok);
	x->vds.volume_id = v->spec.agent_volume_id ?: "";
	x->vds.backend_type = agents_backend_enum(v->spec.backend_type ?: "");
	if (pvst_backend_params(&x->bb, v, &x->vds.backend_params) < 0)
		return -ENOMEM;
	x->vds.device_path = v->status.backend_device_path ?: "";
	x->tok.volume_uid = v->meta.uid ?: "";
	x->tok.generation = pvst_gen(v);
	x->vds.fence = &x->tok;
	x->np.bind_address = es->bind_address ?: "";
	x->np.port = es->has_port ? (int32_t)es->port : 0;
	x->np.in_capsule_data_size =
	    es->has_in_capsule_data_size ? (int32_t)es->in_capsule_data_size : 0;
	x->ep.params_case = PILLAR_CSI__AGENT__V1__EXPORT_PARAMS__PARAMS_NVMEOF_TCP;
	x->ep.nvmeof_tcp = &x->np;
	x->eds.protocol_type = PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP;
	x->eds.export_params = &x->ep;
	x->eds.acl_enabled = es->has_acl_enabled && es->acl_enabled;
	if (initiators(x, v) < 0)
		return -ENOMEM;
	x->edsp = &x->eds;
	x->vds.n_exports = 1;
	x->vds.exports = &x->edsp;
	return 0;
}

/* A volume the resync looks at: not deleting, past Provisioning (§12.3). */
bool xitem_eligible(const struct model_pvst *v)
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

int xitem_of(struct xitem *x, const struct model_pvst *v, const char *agent)
{
	const char *ref = v->spec.agent_ref;
	const struct model_cond *c =
	    model_cond_get(&v->status.conditions, RULES_COND_EXPORT_RECONCILED);
	struct xbuild b = {0};
	size_t plen = 0;
	memset(x, 0, sizeof(*x));
	x->what = !xitem_eligible(v) || (agent && (!ref || strcmp(ref, agent))) ? XITEM_SKIP
	          : v->status.has_export_spec                                   ? XITEM_EXPORTED
	                                                                        : XITEM_NOSPEC;
	if (x->what == XITEM_EXPORTED) {
		const struct model_pvst_export_spec *es = &v->status.export_spec;
		x->ics = es->has_in_capsule_data_size && es->in_capsule_data_size > 0;
		if (build(&b, v) < 0)
			goto oom;
		plen = pillar_csi__agent__v1__volume_desired_state__get_packed_size(&b.vds);
	}
	size_t n = len0(v->meta.name ?: "") + len0(v->meta.uid ?: "") +
	           len0(v->spec.agent_volume_id ?: "") + plen;
	if (c)
		n += len0(c->status) + len0(c->reason) + len0(c->message);
	char *at = x->mem = malloc(n ? n : 1);
	if (!at)
		goto oom;
	if (plen) { /* first: the packed item is then aligned as malloc aligns */
		x->len = pillar_csi__agent__v1__volume_desired_state__pack(&b.vds, (uint8_t *)at);
		x->packed = (const uint8_t *)at;
		at += plen;
	}
	x->name = put(&at, v->meta.name ?: "");
	x->uid = put(&at, v->meta.uid ?: "");
	x->vid = put(&at, v->spec.agent_volume_id ?: "");
	if (c) {
		x->cst = put(&at, c->status);
		x->creas = put(&at, c->reason);
		x->cmsg = put(&at, c->message);
		x->c_has_og = c->has_observed_generation;
		x->c_og = c->observed_generation;
	}
	x->gen = v->meta.generation;
	x->rv = model_meta_rv(&v->meta);
	pvst_backend_params_free(&b.bb);
	free(b.inits);
	return 0;
oom:
	pvst_backend_params_free(&b.bb);
	free(b.inits);
	xitem_clear(x);
	return -ENOMEM;
}

void xitem_clear(struct xitem *x)
{
	if (!x)
		return;
	free(x->mem);
	memset(x, 0, sizeof(*x));
}

PillarCsi__Agent__V1__VolumeDesiredState *xitem_item(const struct xitem *x)
{
	return pillar_csi__agent__v1__volume_desired_state__unpack(NULL, x->len, x->packed);
}

static bool same(const char *a, const char *b)
{
	return a && !strcmp(a, b);
}

bool xitem_cond_same(const struct xitem *x, const char *reason, const char *msg)
{
	const char *st = !strcmp(reason, RULES_REASON_RECONCILED) ? "True" : "False";
	return same(x->cst, st) && same(x->creas, reason) && same(x->cmsg, msg ? msg : "") &&
	       x->c_has_og && x->c_og == x->gen;
}

struct xmemo {
	struct xmemo *next;
	struct xitem *v;
	size_t n;
	char agent[];
};

static void items_free(struct xitem *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		xitem_clear(&v[i]);
	free(v);
}

void xmemo_take(struct ctl *c, const char *agent, struct xitem **v, size_t *n)
{
	*v = NULL;
	*n = 0;
	pthread_mutex_lock(&c->memo_mu);
	for (struct xmemo *m = c->memos; m; m = m->next)
		if (!strcmp(m->agent, agent)) {
			*v = m->v;
			*n = m->n;
			m->v = NULL;
			m->n = 0;
			break;
		}
	pthread_mutex_unlock(&c->memo_mu);
}

void xmemo_put(struct ctl *c, const char *agent, struct xitem *v, size_t n)
{
	pthread_mutex_lock(&c->memo_mu);
	struct xmemo *m = c->memos;
	while (m && strcmp(m->agent, agent))
		m = m->next;
	if (!m && (m = calloc(1, sizeof(*m) + strlen(agent) + 1)) != NULL) {
		strcpy(m->agent, agent);
		m->next = c->memos;
		c->memos = m;
	}
	if (m) {
		items_free(m->v, m->n);
		m->v = v;
		m->n = n;
	}
	pthread_mutex_unlock(&c->memo_mu);
	if (!m)
		items_free(v, n); /* out of memory: the next pass decodes them again */
}

void xmemo_free(struct xmemo *m)
{
	while (m) {
		struct xmemo *next = m->next;
		items_free(m->v, m->n);
		free(m);
		m = next;
	}
}
