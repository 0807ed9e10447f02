/* node/csinode — the host identity on the CSINode in a cluster (csinode.h). */
#include "node/csinode.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/stop.h"
#include "model/kube.h"
#include "node/publish.h"
#include "rules/keys.h"

static const struct kube_resource csinodes = {"storage.k8s.io", "v1", "csinodes", false};

struct node_csinode {
	struct node_csinode_opts o;
	char node_id[254];
	struct nvme_host_identity id;
	struct stop stop; /* node_csinode_free */
	bool started;
	pthread_t th;
};

int node_csinode_new(struct node_csinode **out, const struct node_csinode_opts *o, struct err *e)
{
	struct node_csinode *c = calloc(1, sizeof(*c));

	if (!c)
		return err_set(e, -ENOMEM, "out of memory");
	c->o = *o;
	c->o.attempts = o->attempts > 0 ? o->attempts : NODE_CSINODE_ATTEMPTS;
	c->o.interval_ms = o->interval_ms > 0 ? o->interval_ms : NODE_CSINODE_INTERVAL_MS;
	c->o.slow_ms = o->slow_ms > 0 ? o->slow_ms : NODE_CSINODE_SLOW_MS;
	stop_init(&c->stop);
	*out = c;
	return 0;
}

/* The merge patch of csi.md §6.1 step 4 (transcript 10f): the two annotations. */
static int patch(struct node_csinode *c, struct err *e)
{
	struct model_csinode cn = {0};
	struct kube_status st;
	char path[512], *body = NULL;
	int rc = kube_path(path, sizeof(path), &csinodes, NULL, c->node_id, NULL);

	if (rc < 0)
		return err_set(e, rc, "CSINode \"%s\": invalid name", c->node_id);
	if (model_map_set(&cn.meta.annotations, RULES_ANN_HOST_NQN, c->id.hostnqn) == 0 &&
	    model_map_set(&cn.meta.annotations, RULES_ANN_HOST_ID, c->id.hostid) == 0)
		body = model_encode_text(&model_csinode_kind, &cn);
	model_clear(&model_csinode_kind, &cn);
	if (!body)
		return err_set(e, -ENOMEM, "out of memory");
	rc = kube_request(c->o.kc, "PATCH", path, "application/merge-patch+json", body,
	                  strlen(body), NULL, NULL, &st);
	free(body);
	if (rc < 0)
		return err_set(e, rc, "publish host NQN on CSINode \"%s\": %s", c->node_id,
		               st.message[0] ? st.message : kube_reason_name(st.kind));
	return 0;
}

/* csi.md §10.3: a Warning on this worker's Node (its uid when it can be read, else the node
 * name as kubelet's own events carry it). */
static void duplicate_event(struct node_csinode *c, const char *msg)
{
	struct model_node nd = {0};
	struct err e = {0};
	bool got = model_get(c->o.st, &model_node_kind, NULL, c->node_id, &nd, &e) == 0;
	struct kube_event_ref r = {"v1", "Node", NULL, c->node_id,
	                           got && nd.meta.uid ? nd.meta.uid : c->node_id};
	kube_events_record(c->o.rec, &r, KUBE_EVENT_WARNING, "DuplicateHostNQN", "%s", msg);
	model_clear(&model_node_kind, &nd);
}

static void *publish_main(void *arg)
{
	struct node_csinode *c = arg;
	struct err e = {0};

	for (int attempt = 1;; attempt++) {
		if (patch(c, &e) == 0)
			break;
		int wait = attempt < c->o.attempts ? c->o.interval_ms : c->o.slow_ms;
		if (attempt == c->o.attempts)
			log_error("host identity not published yet; retrying in the background",
			          "node", c->node_id, "error", e.msg);
		else if (attempt < c->o.attempts)
			log_warn("host identity not published yet", "node", c->node_id, "error",
			         e.msg);
		if (stop_wait_ms(&c->stop, wait))
			return NULL;
	}
	log_info("host identity published", "node", c->node_id, "hostnqn", c->id.hostnqn);
	e = (struct err){0};
	if (node_identity_check_duplicates(c->o.st, c->node_id, &c->id, &e) == -ENOTUNIQ)
		duplicate_event(c, e.msg);
	else if (e.msg[0])
		log_warn("duplicate host identity check failed", "node", c->node_id, "error",
		         e.msg);
	return NULL;
}

void node_csinode_report_lost(void *ctx, const char *node_id, const char *lost_json)
{
	struct node_csinode *c = ctx;
	struct model_csinode cn = {0};
	struct kube_status st = {0};
	char path[512], *body = NULL;
	int rc = kube_path(path, sizeof(path), &csinodes, NULL, node_id, NULL);

	if (rc == 0 && model_map_set(&cn.meta.annotations, RULES_ANN_LOST_VOLUMES, lost_json) == 0)
		body = model_encode_text(&model_csinode_kind, &cn);
	model_clear(&model_csinode_kind, &cn);
	if (body)
		rc = kube_request(c->o.kc, "PATCH", path, "application/merge-patch+json", body,
		                  strlen(body), NULL, NULL, &st);
	free(body);
	if (rc < 0 || !body)
		log_error("lost volumes not reported on the CSINode", "node", node_id, "error",
		          rc < 0 && st.message[0] ? st.message : "out of memory or invalid name");
	else
		log_info("lost volumes reported on the CSINode", "node", node_id, "volumes",
		         lost_json);
}

int node_csinode_publish(void *ctx, const char *node_id, const struct nvme_host_identity *id,
                         struct err *e)
{
	struct node_csinode *c = ctx;
	int rc;

	if (c->started)
		return 0;
	snprintf(c->node_id, sizeof(c->node_id), "%s", node_id);
	c->id = *id;
	if ((rc = pthread_create(&c->th, NULL, publish_main, c)) != 0)
		return err_set(e, -rc, "CSINode publisher: %s", strerror(rc));
	c->started = true;
	return 0;
}

void node_csinode_free(struct node_csinode *c)
{
	if (!c)
		return;
	stop_set(&c->stop);
	if (c->started)
		pthread_join(c->th, NULL);
	stop_fini(&c->stop);
	free(c);
}
