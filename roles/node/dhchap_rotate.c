#include "node/dhchap_rotate.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/str.h"
#include "model/dhchap_keys.h"
#include "model/kube.h"
#include "model/model.h"
#include "node/internal.h"
#include "nvme/initiator.h"
#include "store/store.h"

/* Whether <class/nvme/name/attr> holds secret (read in place; the buffer is wiped). */
static bool attr_is(const char *sysfs_root, const char *name, const char *attr, const char *secret)
{
	char rel[128], buf[NVME_DHCHAP_SECRET_MAX + 8];
	snprintf(rel, sizeof(rel), "class/nvme/%s/%s", name, attr);
	bool same = nvme_sysfs_read(sysfs_root, rel, buf, sizeof(buf)) == 0 && !strcmp(buf, secret);
	nvme_dhchap_wipe(buf, sizeof(buf));
	return same;
}

int node_dhchap_live_rotate(const char *sysfs_root, const struct model_dhchap_generation *from,
                            const struct model_dhchap_generation *to, struct err *e)
{
	char dir[4096];
	struct dirent *de;
	int n = 0, first = 0;
	bool ctrl = strcmp(from->ctrl_key, to->ctrl_key) != 0;
	if (ctrl == (strcmp(from->key, to->key) != 0))
		return ctrl ? err_set(e, -EINVAL,
		                      "generations %" PRIu64 " and %" PRIu64 " differ in both "
		                      "secrets; a live controller gets one at a time",
		                      from->generation, to->generation)
		            : 0;
	snprintf(dir, sizeof(dir), "%s/class/nvme", sysfs_root);
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0
		                       : err_set(e, -errno, "open %s: %s", dir, strerror(errno));
	while ((de = readdir(d)) != NULL) {
		struct err we = {0};
		if (strncmp(de->d_name, "nvme", 4) != 0)
			continue;
		if (ctrl ? !attr_is(sysfs_root, de->d_name, "dhchap_ctrl_secret", from->ctrl_key) ||
		               !attr_is(sysfs_root, de->d_name, "dhchap_secret", to->key)
		         : !attr_is(sysfs_root, de->d_name, "dhchap_secret", from->key))
			continue;
		int r = nvme_ctrl_dhchap_set(sysfs_root, de->d_name, ctrl,
		                             ctrl ? to->ctrl_key : to->key, &we);
		if (r < 0) {
			log_error("writing a new DH-HMAC-CHAP secret to a live controller failed",
			          "controller", de->d_name, "error", we.msg);
			if (!first)
				first = err_set(e, r, "%s", we.msg);
			continue;
		}
		log_info("new DH-HMAC-CHAP secret written to a live controller; the kernel "
		         "re-authenticates it",
		         "controller", de->d_name, "secret", ctrl ? "controller" : "host");
		n++;
	}
	closedir(d);
	return first ? first : n;
}

/* Makes `next` keys at now, one half of a rotation, and writes the file: a new host secret (the
 * first half; req is the request that asked for it, or NULL for the interval), or, when k owes
 * it, the new controller secret (the second half). */
static int make_next(struct node *n, struct model_dhchap_file *k, uint64_t now, const char *req,
                     struct err *e)
{
	char gen[24];
	bool ctrl = k->ctrl_key_due;
	uint64_t g = node_dhchap_next_generation(k, now);
	int r = node_dhchap_gen_rotate(k->hostnqn, g, &k->current, ctrl, &k->next, e);
	if (r < 0)
		return r;
	k->has_next = true;
	k->ctrl_key_due = !ctrl;
	if (req)
		snprintf(k->rotate_request, sizeof(k->rotate_request), "%s", req);
	if ((r = model_dhchap_file_write(n->state_dir, k, e)) < 0)
		return r;
	snprintf(gen, sizeof(gen), "%" PRIu64, g);
	log_info("made new DH-HMAC-CHAP keys (rotation)", "generation", gen, "secret",
	         ctrl ? "controller" : "host", "reason",
	         ctrl  ? "second half"
	         : req ? "requested"
	               : "interval");
	return 0;
}

/* `next` keys that change both secrets at once (a key file of an earlier version) become the
 * first half of a rotation: a higher generation with the new host secret only. */
static int split_next(struct node *n, struct model_dhchap_file *k, uint64_t now, struct err *e)
{
	if (!k->has_current || !k->has_next || !strcmp(k->current.key, k->next.key) ||
	    !strcmp(k->current.ctrl_key, k->next.ctrl_key))
		return 0;
	k->next.generation = node_dhchap_next_generation(k, now);
	memcpy(k->next.ctrl_key, k->current.ctrl_key, sizeof(k->next.ctrl_key));
	k->ctrl_key_due = true;
	log_info("DH-HMAC-CHAP keys that change both secrets at once: rotating the host secret "
	         "first");
	return model_dhchap_file_write(n->state_dir, k, e);
}

/* `next` published and, once confirmed, made current (live controllers first). */
static int advance(struct node *n, const struct node_dhchap_hooks *h, struct model_dhchap_file *k,
                   struct err *e)
{
	uint64_t confirmed = 0;
	char gen[24];
	int r;
	snprintf(gen, sizeof(gen), "%" PRIu64, k->next.generation);
	if (n->dhchap_published != k->next.generation) {
		r = h->publish(h->ctx, n->node_id, k, e);
		if (r < 0 && r != -EEXIST)
			return r;
		n->dhchap_published = k->next.generation;
		log_info("published DH-HMAC-CHAP keys", "generation", gen);
	}
	if ((r = h->confirmed(h->ctx, n->node_id, &confirmed, e)) < 0)
		return r;
	if (confirmed != k->next.generation)
		return 0;
	if (k->has_current &&
	    (r = node_dhchap_live_rotate(n->sysfs_root, &k->current, &k->next, e)) < 0)
		return r;
	k->current = k->next;
	k->has_current = true;
	k->has_next = false;
	nvme_dhchap_wipe(&k->next, sizeof(k->next));
	if ((r = model_dhchap_file_write(n->state_dir, k, e)) < 0)
		return r;
	log_info("DH-HMAC-CHAP keys confirmed by the controller; now current", "generation", gen);
	return 0;
}

/* New `next` keys when a rotation is due: its second half, a new request, or the interval. */
static int maybe_rotate(struct node *n, const struct node_dhchap_hooks *h,
                        struct model_dhchap_file *k, uint64_t now, uint64_t interval_s,
                        struct err *e)
{
	char req[MODEL_DHCHAP_FILE_REQ_MAX] = "";
	int r;
	if (k->has_next || !k->has_current)
		return 0;
	if (k->ctrl_key_due)
		return make_next(n, k, now, NULL, e);
	if ((r = h->requested(h->ctx, n->node_id, req, sizeof(req), e)) < 0)
		return r;
	if (req[0] && strcmp(req, k->rotate_request) != 0)
		return make_next(n, k, now, req, e);
	if (interval_s && now >= k->current.generation + interval_s)
		return make_next(n, k, now, NULL, e);
	return 0;
}

int node_dhchap_tick(struct node *n, const struct node_dhchap_hooks *h, uint64_t now,
                     uint64_t interval_s, struct err *e)
{
	struct model_dhchap_file k;
	int r;
	pthread_mutex_lock(&n->dhchap_mu);
	r = node_dhchap_keys_ensure(n->state_dir, n->node_id, n->id.hostnqn, now, &k, NULL, e);
	if (r == 0)
		r = split_next(n, &k, now, e);
	if (r == 0)
		r = maybe_rotate(n, h, &k, now, interval_s, e);
	if (r == 0 && k.has_next)
		r = advance(n, h, &k, e);
	/* the second half of a rotation follows its first at once */
	if (r == 0 && !k.has_next && k.ctrl_key_due && (r = maybe_rotate(n, h, &k, now, 0, e)) == 0)
		r = advance(n, h, &k, e);
	pthread_mutex_unlock(&n->dhchap_mu);
	model_dhchap_file_wipe(&k);
	return r;
}

/* ---- the thread ---------------------------------------------------------------------------- */

struct node_dhchap_loop {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	struct node *n;
	const struct node_dhchap_hooks *h;
	uint64_t interval_s;
	int period_ms;
};

static void *loop_main(void *arg)
{
	struct node_dhchap_loop *l = arg;
	char last[ERR_MSG_MAX] = "";
	pthread_mutex_lock(&l->mu);
	while (!l->stop) {
		pthread_mutex_unlock(&l->mu);
		struct err e = {0};
		if (node_dhchap_tick(l->n, l->h, (uint64_t)time(NULL), l->interval_s, &e) < 0 &&
		    strcmp(last, e.msg) != 0) /* a failure is logged when it changes */
			log_error("DH-HMAC-CHAP keys: step failed; retrying", "error", e.msg);
		snprintf(last, sizeof(last), "%s", e.msg);
		pthread_mutex_lock(&l->mu);
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += l->period_ms / 1000;
		ts.tv_nsec += (long)(l->period_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		while (!l->stop && pthread_cond_timedwait(&l->cv, &l->mu, &ts) == 0)
			;
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

int node_dhchap_loop_start(struct node_dhchap_loop **out, struct node *n,
                           const struct node_dhchap_hooks *h, uint64_t interval_s, int period_ms,
                           struct err *e)
{
	struct node_dhchap_loop *l = calloc(1, sizeof(*l));
	*out = NULL;
	if (!l)
		return err_set(e, -ENOMEM, "out of memory");
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	l->n = n;
	l->h = h;
	l->interval_s = interval_s;
	l->period_ms = period_ms > 0 ? period_ms : 5000;
	int r = pthread_create(&l->th, NULL, loop_main, l);
	if (r != 0) {
		pthread_cond_destroy(&l->cv);
		pthread_mutex_destroy(&l->mu);
		free(l);
		return err_set(e, -r, "start the DH-HMAC-CHAP thread: %s", strerror(r));
	}
	*out = l;
	return 0;
}

void node_dhchap_loop_stop(struct node_dhchap_loop *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->th, NULL);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	free(l);
}

/* ---- hooks over the store ------------------------------------------------------------------- */

static int st_confirmed(void *ctx, const char *node, uint64_t *gen, struct err *e)
{
	char v[32], *end;
	int r = node_dhchap_annotation(ctx, "csinode", node, RULES_ANN_DHCHAP_GENERATION, v,
	                               sizeof(v), e);
	*gen = 0;
	if (r < 0 || !v[0])
		return r;
	errno = 0;
	unsigned long long g = strtoull(v, &end, 10);
	if (*end || errno || v[0] < '0' || v[0] > '9')
		return err_set(e, -EINVAL,
		               "CSINode \"%s\": annotation %s is not a generation: \"%s\"", node,
		               RULES_ANN_DHCHAP_GENERATION, v);
	*gen = (uint64_t)g;
	return 0;
}

static int st_requested(void *ctx, const char *node, char *buf, size_t cap, struct err *e)
{
	return node_dhchap_annotation(ctx, "node", node, RULES_ANN_DHCHAP_ROTATE, buf, cap, e);
}

/* The Secret goes to the API server in the pod's namespace (POD_NAMESPACE), or into the embedded
 * store (the directory the controller reads, --store=dir:PATH) in POD_NAMESPACE or "default",
 * the controller's own default there (--dhchap-namespace). */
static int st_publish(void *ctx, const char *node, const struct model_dhchap_file *k, struct err *e)
{
	const char *ns = getenv("POD_NAMESPACE");
	struct model_dhchap_keys keys = {0};
	struct model_secret secret;
	if ((!ns || !*ns) && !store_kube_client(ctx))
		ns = "default";
	if (!ns || !*ns)
		return err_set(e, -EINVAL, "publishing DH-HMAC-CHAP keys needs POD_NAMESPACE");
	str_copy(keys.node, sizeof(keys.node), node);
	str_copy(keys.host_nqn, sizeof(keys.host_nqn), k->hostnqn);
	keys.generation = k->next.generation;
	str_copy(keys.key, sizeof(keys.key), k->next.key);
	str_copy(keys.ctrl_key, sizeof(keys.ctrl_key), k->next.ctrl_key);
	int r = model_dhchap_secret_encode(&keys, ns, &secret, e);
	model_dhchap_keys_wipe(&keys);
	if (r < 0)
		return r;
	r = model_create(ctx, &model_secret_kind, &secret, NULL, e);
	model_clear(&model_secret_kind, &secret);
	return r == STORE_ALREADY_EXISTS ? -EEXIST : r;
}

void node_dhchap_store_hooks(struct node_dhchap_hooks *h, void *st)
{
	*h = (struct node_dhchap_hooks){st_confirmed, st_requested, st_publish, st};
}
