/* cli: apply, get and delete on the object store. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "applets.h"
#include "base/file.h"
#include "base/json.h"
#include "store/store.h"

struct column {
	const char *header;
	const char *path;
};

struct kind_columns {
	const char *kind;
	struct column cols[5];
};

#define READY_COL                                                          \
	{                                                                  \
		"READY", ".status.conditions[?(@.type==\"Ready\")].status" \
	}
static const struct kind_columns printer[] = {
    {"PillarAgent",
     {{"ADDRESS", ".status.resolvedAddress"}, {"AGENT", ".status.agentVersion"}, READY_COL}},
    {"PillarStore",
     {{"TARGET", ".spec.agentRef"}, {"AVAILABLE", ".status.capacity.available"}, READY_COL}},
    {"PillarProtocol", {{"BINDINGS", ".status.storageClassCount"}, READY_COL}},
    {"PillarStorageClass",
     {{"POOL", ".spec.storeRef"},
      {"PROTOCOL", ".spec.protocolRef"},
      {"STORAGECLASS", ".status.storageClassName"},
      READY_COL}},
    {"PillarVolumeState",
     {{"PHASE", ".status.phase"},
      {"TARGET", ".spec.agentRef"},
      {"BACKEND", ".spec.backendType"},
      {"PROTOCOL", ".spec.protocolType"}}},
};

static const char *default_store(void)
{
	const char *env = getenv("PILLAR_CSI_STORE");
	if (env && *env)
		return env;
	return getenv("KUBERNETES_SERVICE_HOST") ? "kube" : NULL;
}

static const char *group_suffix(const struct store_kind *k)
{
	const char *slash = strchr(k->api_version, '/');
	static char buf[128];
	if (!slash)
		return "";
	snprintf(buf, sizeof(buf), ".%.*s", (int)(slash - k->api_version), k->api_version);
	return buf;
}

static int open_store(const char *url, store **s)
{
	struct err e = {0};
	if (!url) {
		fprintf(stderr,
		        "error: no store: pass --store=dir:PATH (or set PILLAR_CSI_STORE)\n");
		return 1;
	}
	if (store_open_url(url, false, s, &e) < 0) {
		fprintf(stderr, "error: %s\n", e.msg);
		return 1;
	}
	return 0;
}

static int server_error(int code, const struct err *e)
{
	fprintf(stderr, "Error from server (%s): %s\n", store_reason(code), e->msg);
	return 1;
}

/* ---- apply ----------------------------------------------------------------------------------- */

static int apply_one(store *s, const cJSON *o)
{
	struct err e = {0};
	const struct store_kind *k = store_kind_of(o, &e);
	cJSON *cur = NULL, *want, *out = NULL;
	const char *name;
	int r;

	if (!k) {
		fprintf(stderr, "error: %s\n", e.msg);
		return 1;
	}
	name = store_meta_str(o, "name");
	r = store_get(s, k, store_meta_str(o, "namespace"), name, &cur, &e);
	if (r == STORE_NOT_FOUND) {
		r = store_create(s, o, NULL, &e);
		if (r < 0)
			return server_error(r, &e);
		printf("%s%s/%s created\n", k->singular, group_suffix(k), name);
		return 0;
	}
	if (r < 0)
		return server_error(r, &e);
	/* the file's content over the live object: its uid and resourceVersion make the update
	 * conditional, so a concurrent writer is never overwritten silently */
	want = cJSON_Duplicate(o, true);
	cJSON *m = cJSON_GetObjectItemCaseSensitive(want, "metadata");
	cJSON_DeleteItemFromObjectCaseSensitive(m, "resourceVersion");
	cJSON_AddStringToObject(m, "resourceVersion", store_meta_str(cur, "resourceVersion"));
	if (!cJSON_GetObjectItemCaseSensitive(m, "finalizers")) {
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(cur, "metadata"), "finalizers");
		if (f)
			cJSON_AddItemToObject(m, "finalizers", cJSON_Duplicate(f, true));
	}
	r = store_update(s, want, &out, &e);
	cJSON_Delete(want);
	if (r < 0) {
		cJSON_Delete(cur);
		return server_error(r, &e);
	}
	bool same = store_meta_rv(out) &&
	            cJSON_Compare(cJSON_GetObjectItemCaseSensitive(out, "spec"),
	                          cJSON_GetObjectItemCaseSensitive(cur, "spec"), true);
	printf("%s%s/%s %s\n", k->singular, group_suffix(k), name,
	       same ? "unchanged" : "configured");
	cJSON_Delete(cur);
	cJSON_Delete(out);
	return 0;
}

/* --subresource=status: replaces only the status of an existing object (the standalone form of
 * `kubectl ... --subresource=status`, used for the repair of operations.md §9).  A uid or
 * resourceVersion in the file's metadata is a precondition: the update fails with Conflict when
 * the live object differs, so a status read with `get -o json`, edited and applied never
 * overwrites a newer one. */
static int apply_status(store *s, const cJSON *o)
{
	struct err e = {0};
	const struct store_kind *k = store_kind_of(o, &e);
	cJSON *cur = NULL, *out = NULL;
	int r;

	if (!k) {
		fprintf(stderr, "error: %s\n", e.msg);
		return 1;
	}
	const char *name = store_meta_str(o, "name");
	if (!k->status_subresource) {
		fprintf(stderr, "error: %s%s has no status subresource\n", k->plural,
		        group_suffix(k));
		return 1;
	}
	if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "status"))) {
		fprintf(stderr, "error: %s%s/%s: the object has no status to apply\n", k->singular,
		        group_suffix(k), name ? name : "");
		return 1;
	}
	r = store_get(s, k, store_meta_str(o, "namespace"), name, &cur, &e);
	if (r == 0)
		r = store_update_status(s, o, &out, &e);
	if (r < 0) {
		cJSON_Delete(cur);
		return server_error(r, &e);
	}
	bool same = cJSON_Compare(cJSON_GetObjectItemCaseSensitive(out, "status"),
	                          cJSON_GetObjectItemCaseSensitive(cur, "status"), true);
	printf("%s%s/%s status %s\n", k->singular, group_suffix(k), name ? name : "",
	       same ? "unchanged" : "configured");
	cJSON_Delete(cur);
	cJSON_Delete(out);
	return 0;
}

int cli_apply_main(int argc, char **argv)
{
	const char *file = NULL, *url = default_store(), *sub = "";
	const struct flag_def defs[] = {
	    {"f", FLAG_STRING, &file, "file with a JSON object, array or List (- for stdin)", true},
	    {"store", FLAG_STRING, &url, "object store: dir:PATH (default $PILLAR_CSI_STORE)",
	     false},
	    {"subresource", FLAG_STRING, &sub,
	     "status: replace only the status of existing objects (uid and resourceVersion in "
	     "the file are preconditions)",
	     false},
	};
	int r = role_parse_flags("pillar-csi apply",
	                         "Create or update the objects in a JSON file in the store.", defs,
	                         3, argc, argv);
	char *text = NULL;
	size_t len = 0;
	cJSON *doc = NULL;
	struct err e = {0};
	store *s = NULL;

	if (r >= 0)
		return r;
	if (*sub && strcmp(sub, "status") != 0) {
		fprintf(stderr,
		        "error: --subresource \"%s\" is not supported; the only subresource "
		        "is \"status\"\n",
		        sub);
		return 1;
	}
	int (*one)(store *, const cJSON *) = *sub ? apply_status : apply_one;
	if (strcmp(file, "-") == 0) {
		FILE *mem = open_memstream(&text, &len);
		char buf[4096];
		size_t n;
		while ((n = fread(buf, 1, sizeof(buf), stdin)) > 0)
			fwrite(buf, 1, n, mem);
		fclose(mem);
		r = 0;
	} else {
		r = file_read_all(file, JSON_FILE_MAX, &text, &len, &e);
	}
	if (r == 0)
		r = json_parse_strict(text, len, &doc, &e);
	free(text);
	if (r < 0) {
		fprintf(stderr, "error: %s: %s\n", file, e.msg);
		return 1;
	}
	const cJSON *items = doc;
	if (cJSON_IsObject(doc)) {
		const char *kind = json_get_str(doc, "kind");
		items = kind && strcmp(kind, "List") == 0
		            ? cJSON_GetObjectItemCaseSensitive(doc, "items")
		            : NULL;
	}
	if ((r = open_store(url, &s)) != 0) {
		cJSON_Delete(doc);
		return r;
	}
	int failed = 0;
	if (items && cJSON_IsArray(items)) {
		const cJSON *it;
		cJSON_ArrayForEach(it, items) failed |= one(s, it);
	} else {
		failed = one(s, doc);
	}
	store_close(s);
	cJSON_Delete(doc);
	return failed ? 1 : 0;
}

/* ---- get ------------------------------------------------------------------------------------ */

static void print_table(const struct store_kind *k, const cJSON *items, bool wide)
{
	const struct kind_columns *kc = NULL;
	size_t ncol = 0, nrow = (size_t)cJSON_GetArraySize(items);
	char *cells[64][9];
	size_t width[9] = {0};
	const char *hdr[9];
	time_t now = time(NULL);

	for (size_t i = 0; i < sizeof(printer) / sizeof(printer[0]); i++)
		if (strcmp(printer[i].kind, k->kind) == 0)
			kc = &printer[i];
	hdr[ncol++] = "NAME";
	if (k->namespaced)
		hdr[ncol++] = "NAMESPACE";
	for (size_t c = 0; kc && c < 5 && kc->cols[c].header; c++)
		hdr[ncol++] = kc->cols[c].header;
	if (wide)
		hdr[ncol++] = "UID";
	hdr[ncol++] = "AGE";
	for (size_t c = 0; c < ncol; c++)
		width[c] = strlen(hdr[c]);
	if (nrow == 0) {
		fprintf(stderr, "No resources found\n");
		return;
	}
	for (size_t start = 0; start < nrow; start += 64) {
		size_t n = nrow - start < 64 ? nrow - start : 64;
		for (size_t r = 0; r < n; r++) {
			const cJSON *o = cJSON_GetArrayItem(items, (int)(start + r));
			size_t c = 0;
			char buf[256];
			cells[r][c++] = strdup(store_meta_str(o, "name") ?: "");
			if (k->namespaced)
				cells[r][c++] = strdup(store_meta_str(o, "namespace") ?: "");
			for (size_t j = 0; kc && j < 5 && kc->cols[j].header; j++) {
				cli_jsonpath(o, kc->cols[j].path, buf, sizeof(buf));
				cells[r][c++] = strdup(buf);
			}
			if (wide)
				cells[r][c++] = strdup(store_meta_str(o, "uid") ?: "");
			cli_age(store_meta_str(o, "creationTimestamp"), (long long)now, buf,
			        sizeof(buf));
			cells[r][c++] = strdup(buf);
			for (size_t j = 0; j < c; j++)
				if (cells[r][j] && strlen(cells[r][j]) > width[j])
					width[j] = strlen(cells[r][j]);
		}
		if (start == 0) {
			for (size_t c = 0; c < ncol; c++)
				if (c + 1 < ncol)
					printf("%-*s   ", (int)width[c], hdr[c]);
				else
					printf("%s\n", hdr[c]);
		}
		for (size_t r = 0; r < n; r++) {
			for (size_t c = 0; c < ncol; c++) {
				const char *v = cells[r][c] ? cells[r][c] : "";
				if (c + 1 < ncol)
					printf("%-*s   ", (int)width[c], v);
				else
					printf("%s\n", v);
				free(cells[r][c]);
			}
		}
	}
}

int cli_get_main(int argc, char **argv)
{
	const char *out = "", *url = default_store(), *selector = NULL;
	const struct flag_def defs[] = {
	    {"o", FLAG_STRING, &out, "output format: json or wide (default: a table)", false},
	    {"output", FLAG_STRING, &out, "same as -o", false},
	    {"l", FLAG_STRING, &selector, "label selector (k=v, k!=v, k, !k; comma = and)", false},
	    {"store", FLAG_STRING, &url, "object store: dir:PATH (default $PILLAR_CSI_STORE)",
	     false},
	};
	char **pos = calloc((size_t)argc + 1, sizeof(char *));
	int npos = 0, r;
	struct err e = {0};

	if (!pos)
		return 1;
	r = flags_parse_mixed("pillar-csi get", defs, 4, argc, argv, pos, &npos, &e);
	if (r == FLAGS_HELP) {
		flags_usage(stdout, "pillar-csi get",
		            "Print objects: pillar-csi get KIND [NAME] [-o wide|json].  KIND is a "
		            "plural, singular or short name (pa, pst, pstr, psc, pvst).",
		            defs, 4);
		free(pos);
		return 0;
	}
	if (r == FLAGS_VERSION || r < 0 || npos < 1 || npos > 2 ||
	    (*out && strcmp(out, "json") && strcmp(out, "wide"))) {
		if (r < 0)
			fprintf(stderr, "%s\n", e.msg);
		else if (r == FLAGS_VERSION)
			r = applet_dispatch(2, (char *[]){"pillar-csi", "--version", NULL});
		else
			fprintf(stderr, "pillar-csi get: usage: pillar-csi get KIND [NAME] "
			                "[-o wide|json] [--store=dir:PATH]\n");
		free(pos);
		return r == 0 ? 0 : 2;
	}
	const struct store_kind *k = store_kind_lookup(pos[0]);
	if (!k) {
		fprintf(stderr, "error: the server doesn't have a resource type \"%s\"\n", pos[0]);
		free(pos);
		return 1;
	}
	store *s;
	if ((r = open_store(url, &s)) != 0) {
		free(pos);
		return r;
	}
	cJSON *items = NULL, *one = NULL;
	if (npos == 2) {
		r = store_get(s, k, k->namespaced ? "default" : NULL, pos[1], &one, &e);
		if (r == 0) {
			items = cJSON_CreateArray();
			cJSON_AddItemToArray(items, cJSON_Duplicate(one, true));
		}
	} else {
		r = store_list(s, k, NULL, selector, &items, NULL, &e);
	}
	store_close(s);
	if (r < 0) {
		if (r == STORE_NOT_FOUND)
			fprintf(stderr, "Error from server (NotFound): %s%s \"%s\" not found\n",
			        k->plural, group_suffix(k), npos == 2 ? pos[1] : "");
		else
			fprintf(stderr, "Error from server (%s): %s\n", store_reason(r), e.msg);
		cJSON_Delete(one);
		free(pos);
		return 1;
	}
	free(pos);
	if (strcmp(out, "json") == 0) {
		cJSON *doc = one;
		if (!doc) {
			doc = cJSON_CreateObject();
			cJSON_AddStringToObject(doc, "apiVersion", "v1");
			cJSON_AddStringToObject(doc, "kind", "List");
			cJSON_AddItemToObject(doc, "items", items);
			items = NULL;
		}
		char *text = cJSON_Print(doc);
		printf("%s\n", text ? text : "");
		cJSON_free(text);
		if (doc != one)
			cJSON_Delete(doc);
	} else {
		print_table(k, items, strcmp(out, "wide") == 0);
	}
	cJSON_Delete(one);
	cJSON_Delete(items);
	return 0;
}

/* ---- delete --------------------------------------------------------------------------------- */

int cli_delete_main(int argc, char **argv)
{
	const char *url = default_store();
	const struct flag_def defs[] = {
	    {"store", FLAG_STRING, &url, "object store: dir:PATH (default $PILLAR_CSI_STORE)",
	     false},
	};
	char **pos = calloc((size_t)argc + 1, sizeof(char *));
	int npos = 0, r;
	struct err e = {0};
	store *s;

	if (!pos)
		return 1;
	r = flags_parse_mixed("pillar-csi delete", defs, 1, argc, argv, pos, &npos, &e);
	if (r == FLAGS_HELP) {
		flags_usage(
		    stdout, "pillar-csi delete",
		    "Delete an object: pillar-csi delete KIND NAME (finalizers are respected).",
		    defs, 1);
		free(pos);
		return 0;
	}
	if (r != FLAGS_OK || npos != 2) {
		fprintf(stderr, "%s\n",
		        r < 0 ? e.msg
		              : "pillar-csi delete: usage: pillar-csi delete KIND NAME "
		                "[--store=dir:PATH]");
		free(pos);
		return 2;
	}
	const struct store_kind *k = store_kind_lookup(pos[0]);
	if (!k) {
		fprintf(stderr, "error: the server doesn't have a resource type \"%s\"\n", pos[0]);
		free(pos);
		return 1;
	}
	if ((r = open_store(url, &s)) != 0) {
		free(pos);
		return r;
	}
	r = store_delete(s, k, k->namespaced ? "default" : NULL, pos[1], NULL, NULL, &e);
	store_close(s);
	if (r < 0) {
		free(pos);
		return server_error(r, &e);
	}
	printf("%s%s \"%s\" deleted\n", k->singular, group_suffix(k), pos[1]);
	free(pos);
	return 0;
}
