/* A line-driven client of src/kube for the interop suite: each line on stdin is one command,
 * answered by one line on stdout, so a script can drive one client (one connection) through a
 * scenario against the test API server (test/kube/).  Commands, on PillarAgents:
 *   get NAME | create JSON | update JSON | status JSON | merge NAME JSON | jsonpatch NAME JSON
 *   delete NAME UID|- RV|- | list LIMIT | reflect | conns
 * Answers: "OK key=value ..." or "ERR <errno> <Reason> <code> <message>".
 * `reflect` runs one round of a reflector (page size 1, 3 s watches) and prints what it did. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "kube/client.h"
#include "kube/watch.h"

static const struct kube_resource PA = {"pillar-csi.bhyoo.com", "v1alpha1", "pillaragents", false};

struct counts {
	int replaces, items, ev[5];
};

static int on_replace(void *arg, const cJSON *items, const char *rv)
{
	struct counts *c = arg;
	(void)rv;
	c->replaces++;
	c->items = cJSON_GetArraySize(items);
	return 0;
}

static int on_event(void *arg, enum kube_event_type t, const cJSON *obj)
{
	struct counts *c = arg;
	(void)obj;
	c->ev[t]++;
	return 0;
}

static const char *or_dash(const char *s)
{
	return s ? s : "-";
}

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

static const struct kube_reflector_ops ops = {on_replace, on_event};

static void answer(int rc, const cJSON *o, const struct kube_status *st)
{
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(o, "metadata");

	if (rc < 0)
		printf("ERR %d %s %d %s\n", rc, kube_reason_name(st->kind), st->code, st->message);
	else
		printf("OK rv=%s uid=%s status=%s\n", or_dash(json_get_str(md, "resourceVersion")),
		       or_dash(json_get_str(md, "uid")), or_dash(json_get_str(o, "status")));
}

static int with_obj(struct kube_client *kc, const char *verb, const char *json, cJSON **out,
                    struct kube_status *st)
{
	cJSON *obj = NULL;
	int rc = json_parse_strict(json, strlen(json), &obj, NULL);

	if (rc < 0) {
		kube_status_local(st, KUBE_BAD_REQUEST, "not JSON");
		return rc;
	}
	if (strcmp(verb, "create") == 0)
		rc = kube_create(kc, &PA, NULL, obj, out, st);
	else if (strcmp(verb, "update") == 0)
		rc = kube_update(kc, &PA, NULL, obj, out, st);
	else
		rc = kube_update_status(kc, &PA, NULL, obj, out, st);
	cJSON_Delete(obj);
	return rc;
}

static void list(struct kube_client *kc, const char *limit)
{
	struct kube_list_opts lo = {.limit = atoll(limit)};
	struct kube_status st;
	char cont[2048] = "", rv[64] = "";
	int pages = 0, items = 0, rc;

	do {
		cJSON *l = NULL, *md;
		lo.continue_token = cont;
		rc = kube_list(kc, &PA, NULL, &lo, &l, &st);
		if (rc < 0)
			break;
		md = cJSON_GetObjectItemCaseSensitive(l, "metadata");
		pages++;
		items += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(l, "items"));
		if (rv[0] && strcmp(rv, or_empty(json_get_str(md, "resourceVersion"))) != 0)
			printf("NOTE page %d has another resourceVersion\n", pages);
		snprintf(rv, sizeof(rv), "%s", or_empty(json_get_str(md, "resourceVersion")));
		snprintf(cont, sizeof(cont), "%s", or_empty(json_get_str(md, "continue")));
		cJSON_Delete(l);
	} while (cont[0]);
	if (rc < 0)
		answer(rc, NULL, &st);
	else
		printf("OK pages=%d items=%d rv=%s\n", pages, items, rv);
}

static void reflect(struct kube_client *kc, struct kube_reflector **rf, struct counts *c)
{
	struct kube_reflector_opts ro = {.page = 1, .watch_secs = 3};
	struct kube_status st;
	int rc;

	if (!*rf && kube_reflector_new(rf, kc, &PA, NULL, &ro, &ops, c, NULL) < 0) {
		printf("ERR -12 out of memory\n");
		return;
	}
	memset(c->ev, 0, sizeof(c->ev));
	rc = kube_reflector_run_once(*rf, &st);
	printf("RUN rc=%d reason=%s lists=%u items=%d rv=%s added=%d modified=%d deleted=%d\n", rc,
	       rc < 0 ? kube_reason_name(st.kind) : "-", kube_reflector_lists(*rf), c->items,
	       kube_reflector_resource_version(*rf)[0] ? kube_reflector_resource_version(*rf) : "-",
	       c->ev[KUBE_ADDED], c->ev[KUBE_MODIFIED], c->ev[KUBE_DELETED]);
}

static void command(struct kube_client *kc, char *line, struct kube_reflector **rf,
                    struct counts *c)
{
	char *verb = strtok(line, " "), *a = strtok(NULL, " "), *b = strtok(NULL, ""), *x;
	struct kube_status st;
	cJSON *o = NULL;
	int rc;

	if (!verb) {
		printf("ERR -22 empty\n");
	} else if (strcmp(verb, "get") == 0 && a) {
		rc = kube_get(kc, &PA, NULL, a, &o, &st);
		answer(rc, o, &st);
	} else if ((strcmp(verb, "create") == 0 || strcmp(verb, "update") == 0 ||
	            strcmp(verb, "status") == 0) &&
	           a) {
		if (b)
			a[strlen(a)] = ' '; /* the JSON text had spaces */
		rc = with_obj(kc, verb, a, &o, &st);
		answer(rc, o, &st);
	} else if ((strcmp(verb, "merge") == 0 || strcmp(verb, "jsonpatch") == 0) && a && b) {
		rc = kube_patch(kc, &PA, NULL, a,
		                verb[0] == 'm' ? KUBE_PATCH_MERGE : KUBE_PATCH_JSON, false, b, &o,
		                &st);
		answer(rc, o, &st);
	} else if (strcmp(verb, "delete") == 0 && a && b) {
		x = strchr(b, ' ');
		if (x)
			*x++ = '\0';
		rc = kube_delete(kc, &PA, NULL, a, strcmp(b, "-") ? b : NULL,
		                 x && strcmp(x, "-") ? x : NULL, &o, &st);
		answer(rc, o, &st);
	} else if (strcmp(verb, "list") == 0 && a) {
		list(kc, a);
	} else if (strcmp(verb, "reflect") == 0) {
		reflect(kc, rf, c);
	} else if (strcmp(verb, "conns") == 0) {
		printf("OK conns=%u\n", kube_client_connections(kc));
	} else {
		printf("ERR -22 unknown command %s\n", verb);
	}
	cJSON_Delete(o);
}

int main(int argc, char **argv)
{
	struct kube_config *cfg = NULL;
	struct kube_client *kc = NULL;
	struct kube_client_opts o;
	struct kube_reflector *rf = NULL;
	struct counts c = {0};
	struct err e = {0};
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (argc != 2) {
		fprintf(stderr, "usage: %s KUBECONFIG\n", argv[0]);
		return 2;
	}
	kube_client_opts_init(&o);
	o.component = "pillar-csi-interop";
	if (kube_config_from_file(&cfg, argv[1], NULL, &e) < 0 ||
	    kube_client_new(&kc, cfg, &o, &e) < 0) {
		fprintf(stderr, "%s\n", e.msg);
		kube_config_free(cfg);
		return 1;
	}
	kube_config_free(cfg);
	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((n = getline(&line, &cap, stdin)) > 0) {
		if (line[n - 1] == '\n')
			line[n - 1] = '\0';
		command(kc, line, &rf, &c);
	}
	free(line);
	kube_reflector_free(rf);
	kube_client_free(kc);
	return 0;
}
