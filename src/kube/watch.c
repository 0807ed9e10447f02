#include "kube/watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/client_int.h"
#include "kube/codec.h"

#define READ_CHUNK (16u << 10)

/* ---- parser ------------------------------------------------------------------------------ */

void kube_watch_parser_init(struct kube_watch_parser *p, size_t max_line)
{
	memset(p, 0, sizeof(*p));
	p->max_line = max_line ? max_line : KUBE_WATCH_LINE_MAX;
}

void kube_watch_parser_free(struct kube_watch_parser *p)
{
	free(p->buf);
	memset(p, 0, sizeof(*p));
}

int kube_watch_parser_push(struct kube_watch_parser *p, const void *data, size_t len)
{
	if (p->len + len > p->max_line && !memchr(data, '\n', len) &&
	    !(p->len && memchr(p->buf, '\n', p->len))) {
		p->len = 0;
		return -EMSGSIZE;
	}
	if (p->len + len + 1 > p->cap) {
		size_t cap = p->cap ? p->cap : 4096;
		char *b;
		while (cap < p->len + len + 1)
			cap *= 2;
		b = realloc(p->buf, cap);
		if (!b)
			return -ENOMEM;
		p->buf = b;
		p->cap = cap;
	}
	memcpy(p->buf + p->len, data, len);
	p->len += len;
	return 0;
}

int kube_watch_parser_next(struct kube_watch_parser *p, enum kube_event_type *type, cJSON **obj,
                           struct err *e)
{
	for (;;) {
		char *nl = p->len ? memchr(p->buf, '\n', p->len) : NULL;
		size_t n;
		int rc = 0;

		if (!nl)
			return 0;
		n = (size_t)(nl - p->buf);
		/* blank lines (keep-alives) are skipped */
		for (size_t i = 0; i < n && rc == 0; i++)
			if (p->buf[i] != ' ' && p->buf[i] != '\r' && p->buf[i] != '\t')
				rc = 1;
		if (rc)
			rc = kube_codec_event_decode(p->buf, n, type, obj, e);
		memmove(p->buf, nl + 1, p->len - n - 1);
		p->len -= n + 1;
		if (rc)
			return rc;
	}
}

/* ---- one watch stream ------------------------------------------------------------------------ */

struct kube_watch {
	struct h2_stream *s;
	struct kube_watch_parser p;
	char *path; /* for messages */
	bool ready, ended;
};

int kube_watch_start(struct kube_client *kc, const struct kube_resource *r, const char *ns,
                     const struct kube_list_opts *o, int timeout_s, struct kube_watch **out,
                     struct kube_status *st)
{
	struct kube_list_opts lo = {0};
	struct kube_watch *w;
	char path[4096], secs[16];
	int rc;

	*out = NULL;
	kube_status_clear(st);
	if (o) {
		lo = *o;
		lo.limit = 0;
		lo.continue_token = NULL;
	}
	rc = kube_list_path(path, sizeof(path), r, ns, &lo);
	if (rc == 0)
		rc = kube_query_add(path, sizeof(path), "watch", "1");
	if (rc == 0)
		rc = kube_query_add(path, sizeof(path), "allowWatchBookmarks", "true");
	snprintf(secs, sizeof(secs), "%d", timeout_s);
	if (rc == 0 && timeout_s > 0)
		rc = kube_query_add(path, sizeof(path), "timeoutSeconds", secs);
	if (rc < 0) {
		kube_status_local(st, KUBE_BAD_REQUEST, "cannot address a watch of %s", r->plural);
		return rc;
	}
	w = calloc(1, sizeof(*w));
	if (!w || !(w->path = strdup(path))) {
		free(w);
		kube_status_local(st, KUBE_UNKNOWN, "out of memory");
		return -ENOMEM;
	}
	kube_watch_parser_init(&w->p, 0);
	rc = kube_stream_start(kc, "GET", path, NULL, NULL, 0, &w->s, st);
	if (rc < 0) {
		kube_watch_free(w);
		return rc;
	}
	*out = w;
	return 0;
}

int kube_watch_ready(struct kube_watch *w, int64_t timeout_ms, struct kube_status *st)
{
	kube_status_clear(st);
	if (w->ready)
		return 1;
	int code = kube_stream_head(w->s, timeout_ms, "GET", w->path, st);
	if (code == -ETIMEDOUT)
		return 0;
	if (code < 0)
		return code;
	if (code < 200 || code >= 300) {
		char *b = NULL;
		size_t n = 0;
		h2_stream_read_all(w->s, &b, &n, 10000, NULL);
		int rc = kube_status_decode(st, code, b, n);
		free(b);
		return rc ? rc : -EIO;
	}
	w->ready = true;
	return 1;
}

int kube_watch_open(struct kube_client *kc, const struct kube_resource *r, const char *ns,
                    const struct kube_list_opts *o, int timeout_s, struct kube_watch **out,
                    struct kube_status *st)
{
	struct kube_watch *w = NULL;
	int rc = kube_watch_start(kc, r, ns, o, timeout_s, &w, st);
	if (rc == 0 && (rc = kube_watch_ready(w, kube_client_timeout_ms(kc), st)) == 0) {
		kube_status_local(st, KUBE_TIMEOUT, "GET %s: no response within %lld ms", w->path,
		                  (long long)kube_client_timeout_ms(kc));
		rc = -ETIMEDOUT;
	}
	if (rc < 0) {
		kube_watch_free(w);
		return rc;
	}
	*out = w;
	return 0;
}

int kube_watch_next(struct kube_watch *w, enum kube_event_type *type, cJSON **obj,
                    int64_t timeout_ms, struct kube_status *st)
{
	char buf[READ_CHUNK];
	struct err e = {0};
	ssize_t n;
	int rc;

	kube_status_clear(st);
	for (;;) {
		rc = kube_watch_parser_next(&w->p, type, obj, &e);
		if (rc == 1 && *type == KUBE_ERROR) {
			rc = kube_status_from_json(st, 0, *obj);
			cJSON_Delete(*obj);
			*obj = NULL;
			return rc ? rc : -EIO;
		}
		if (rc == 1)
			return 1;
		if (rc < 0) {
			kube_status_local(st, KUBE_INTERNAL_ERROR, "watch stream: %s", e.msg);
			return rc;
		}
		if (w->ended)
			return 0;
		n = h2_stream_read(w->s, buf, sizeof(buf), timeout_ms, &e);
		if (n == 0) {
			w->ended = true;
			continue;
		}
		if (n < 0) {
			kube_status_local(st,
			                  n == -ETIMEDOUT ? KUBE_TIMEOUT : KUBE_SERVICE_UNAVAILABLE,
			                  "watch stream: %s", e.msg);
			return (int)n;
		}
		rc = kube_watch_parser_push(&w->p, buf, (size_t)n);
		if (rc < 0) {
			kube_status_local(st, KUBE_INTERNAL_ERROR,
			                  "watch stream: an event over %zu bytes", w->p.max_line);
			return rc;
		}
	}
}

void kube_watch_cancel(struct kube_watch *w)
{
	h2_stream_cancel(w->s);
}

void kube_watch_free(struct kube_watch *w)
{
	if (!w)
		return;
	h2_stream_free(w->s);
	kube_watch_parser_free(&w->p);
	free(w->path);
	free(w);
}

/* ---- reflector --------------------------------------------------------------------------- */

struct kube_reflector {
	struct kube_client *kc;
	struct kube_resource r;
	char group[254], version[64], plural[254], ns[254];
	char *label_selector, *field_selector;
	int64_t page;
	int watch_secs;
	int64_t idle_ms;
	const struct kube_reflector_ops *ops;
	void *arg;
	char rv[64];
	unsigned lists;
	pthread_mutex_t mu; /* stopped and w */
	bool stopped;
	struct kube_watch *w;
};

static char *dup_or_null(const char *s, bool *oom)
{
	char *d = s ? strdup(s) : NULL;
	if (s && !d)
		*oom = true;
	return d;
}

int kube_reflector_new(struct kube_reflector **out, struct kube_client *kc,
                       const struct kube_resource *r, const char *ns,
                       const struct kube_reflector_opts *o, const struct kube_reflector_ops *ops,
                       void *arg, struct err *e)
{
	struct kube_reflector *rf = calloc(1, sizeof(*rf));
	bool oom = false;

	if (!rf)
		return err_set(e, -ENOMEM, "out of memory");
	rf->kc = kc;
	snprintf(rf->group, sizeof(rf->group), "%s", r->group ? r->group : "");
	snprintf(rf->version, sizeof(rf->version), "%s", r->version);
	snprintf(rf->plural, sizeof(rf->plural), "%s", r->plural);
	snprintf(rf->ns, sizeof(rf->ns), "%s", ns ? ns : "");
	rf->r = (struct kube_resource){rf->group, rf->version, rf->plural, r->namespaced};
	rf->label_selector = dup_or_null(o ? o->label_selector : NULL, &oom);
	rf->field_selector = dup_or_null(o ? o->field_selector : NULL, &oom);
	rf->page = o && o->page > 0 ? o->page : 500;
	rf->watch_secs = o && o->watch_secs > 0 ? o->watch_secs : 300;
	rf->idle_ms = o && o->idle_ms > 0 ? o->idle_ms : (int64_t)rf->watch_secs * 1000 + 30000;
	rf->ops = ops;
	rf->arg = arg;
	pthread_mutex_init(&rf->mu, NULL);
	if (oom) {
		kube_reflector_free(rf);
		return err_set(e, -ENOMEM, "out of memory");
	}
	*out = rf;
	return 0;
}

void kube_reflector_free(struct kube_reflector *rf)
{
	if (!rf)
		return;
	pthread_mutex_destroy(&rf->mu);
	free(rf->label_selector);
	free(rf->field_selector);
	free(rf);
}

void kube_reflector_stop(struct kube_reflector *rf)
{
	pthread_mutex_lock(&rf->mu);
	rf->stopped = true;
	if (rf->w)
		kube_watch_cancel(rf->w);
	pthread_mutex_unlock(&rf->mu);
}

const char *kube_reflector_resource_version(const struct kube_reflector *rf)
{
	return rf->rv;
}

unsigned kube_reflector_lists(const struct kube_reflector *rf)
{
	return rf->lists;
}

/* Lists every page into one items array and hands it to replace. */
static int relist(struct kube_reflector *rf, struct kube_status *st)
{
	struct kube_list_opts lo = {.label_selector = rf->label_selector,
	                            .field_selector = rf->field_selector,
	                            .limit = rf->page};
	cJSON *all = NULL, *page = NULL;
	char cont[2048] = "", rv[64] = "";
	int rc;

	do {
		const char *c, *prv;
		lo.continue_token = cont;
		rc = kube_list(rf->kc, &rf->r, rf->ns, &lo, &page, st);
		if (rc == 0 && (rc = kube_codec_list_move_items(page, &all)) < 0)
			kube_status_local(st, KUBE_UNKNOWN, "out of memory");
		if (rc < 0)
			break;
		prv = kube_codec_meta_str(page, "resourceVersion");
		snprintf(rv, sizeof(rv), "%s", prv ? prv : "");
		c = kube_codec_meta_str(page, "continue");
		if (c && strlen(c) >= sizeof(cont)) {
			kube_status_local(st, KUBE_INTERNAL_ERROR, "continue token too long");
			rc = -EOVERFLOW;
		}
		snprintf(cont, sizeof(cont), "%s", c && rc == 0 ? c : "");
		cJSON_Delete(page);
		page = NULL;
	} while (rc == 0 && cont[0]);
	if (rc == 0 && !rv[0]) {
		kube_status_local(st, KUBE_INTERNAL_ERROR, "list of %s without a resourceVersion",
		                  rf->plural);
		rc = -EBADMSG;
	}
	if (rc == 0) {
		rf->lists++;
		rc = rf->ops->replace(rf->arg, all, rv);
		if (rc == 0)
			snprintf(rf->rv, sizeof(rf->rv), "%s", rv);
	}
	cJSON_Delete(all);
	return rc;
}

/* Reads the open watch until it ends; 0, -ERANGE (expired) or another failure. */
static int follow(struct kube_reflector *rf, struct kube_watch *w, struct kube_status *st)
{
	enum kube_event_type t;
	cJSON *obj;
	int rc;

	while ((rc = kube_watch_next(w, &t, &obj, rf->idle_ms, st)) == 1) {
		const char *rv = kube_codec_meta_str(obj, "resourceVersion");
		if (t != KUBE_BOOKMARK)
			rc = rf->ops->event(rf->arg, t, obj);
		if (rc >= 0 && rv && strlen(rv) < sizeof(rf->rv))
			snprintf(rf->rv, sizeof(rf->rv), "%s", rv);
		cJSON_Delete(obj);
		if (rc < 0)
			return rc;
	}
	return rc;
}

int kube_reflector_run_once(struct kube_reflector *rf, struct kube_status *st)
{
	struct kube_list_opts lo = {.label_selector = rf->label_selector,
	                            .field_selector = rf->field_selector};
	struct kube_watch *w = NULL;
	bool stopped;
	int rc = 0;

	kube_status_clear(st);
	if (!rf->rv[0])
		rc = relist(rf, st);
	lo.resource_version = rf->rv;
	if (rc == 0)
		rc = kube_watch_open(rf->kc, &rf->r, rf->ns, &lo, rf->watch_secs, &w, st);
	pthread_mutex_lock(&rf->mu);
	stopped = rf->stopped;
	rf->w = stopped ? NULL : w;
	pthread_mutex_unlock(&rf->mu);
	if (rc == 0 && !stopped)
		rc = follow(rf, w, st);
	pthread_mutex_lock(&rf->mu);
	rf->w = NULL;
	stopped = rf->stopped;
	pthread_mutex_unlock(&rf->mu);
	kube_watch_free(w);
	if (stopped) {
		kube_status_local(st, KUBE_UNKNOWN, "stopped");
		return -ECANCELED;
	}
	if (rc == -ERANGE)
		rf->rv[0] = '\0'; /* 410 Gone/Expired: relist next time */
	return rc;
}
