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
#include "model/kpath.h"
#include "model/model.h"
#include "store/store.h"
#include "storeflags.h"

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
     {{"ADDRESS", ".status.resolvedAddress"},
      {"AGENT", ".status.agentVersion"},
      READY_COL,
      {"BUDGET", ".status.outageBudgetSeconds"}}},
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
    {"PillarSnapshot",
     {{"SOURCE", ".spec.sourceVolumeState"},
      {"SIZE", ".status.sizeBytes"},
      {"READY", ".status.readyToUse"}}},
    /* kube-apiserver's Table columns for VolumeAttachment */
    {"VolumeAttachment",
     {{"ATTACHER", ".spec.attacher"},
      {"PV", ".spec.source.persistentVolumeName"},
      {"NODE", ".spec.nodeName"},
      {"ATTACHED", ".status.attached"}}},
};

const char *cli_default_store(void)
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

/* The kube store's flags of the verb being run (storeflags.h). */
struct store_flags cli_sf = STORE_FLAGS_INIT;

int cli_open_store(const char *url, store **s)
{
	struct store_open_opts o;
	struct err e = {0};
	if (!url) {
		fprintf(stderr, "error: no store: pass --store=dir:PATH or --store=kube (or set "
		                "PILLAR_CSI_STORE)\n");
		return 1;
	}
	if (store_flags_opts(&cli_sf, "pillar-csi", &o, &e) < 0) {
		fprintf(stderr, "error: %s\n", e.msg);
		return 2;
	}
	if (store_open(url, false, &o, s, &e) < 0) {
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

/* --validate, as kubectl names its levels: strict (or true) refuses an object with unknown or
 * duplicate fields; warn and false apply it without them, with a warning each; ignore applies it
 * without them silently. */
enum validate { VALIDATE_STRICT, VALIDATE_WARN, VALIDATE_IGNORE };

static enum validate apply_validate = VALIDATE_STRICT;
static const char *apply_file = "";

static int validate_mode(const char *v)
{
	if (!strcmp(v, "strict") || !strcmp(v, "true"))
		apply_validate = VALIDATE_STRICT;
	else if (!strcmp(v, "warn") || !strcmp(v, "false"))
		apply_validate = VALIDATE_WARN;
	else if (!strcmp(v, "ignore"))
		apply_validate = VALIDATE_IGNORE;
	else
		return -EINVAL;
	return 0;
}

/* What strict field validation found in the object (model_any.fields): under strict it is
 * refused with the API server's message for the request kubectl would send (verb "creating"
 * or "patching"); under warn each finding is a warning, as kubectl prints the server's.
 * 1 when refused. */
static int check_fields(const struct model_any *a, const char *verb)
{
	const char *line = a->fields, *nl;
	if (!*line || apply_validate == VALIDATE_IGNORE)
		return 0;
	if (apply_validate == VALIDATE_WARN) {
		for (; *line; line = *nl ? nl + 1 : nl) {
			nl = strchrnul(line, '\n');
			fprintf(stderr, "Warning: %.*s\n", (int)(nl - line), line);
		}
		return 0;
	}
	char list[2 * ERR_MSG_MAX];
	size_t n = 0;
	for (; *line && n + 3 < sizeof(list); line++)
		if (*line == '\n')
			list[n++] = ',', list[n++] = ' ';
		else
			list[n++] = *line;
	list[n] = '\0';
	const char *kind = a->k->kind, *slash = strrchr(a->k->api_version, '/');
	fprintf(stderr,
	        "Error from server (BadRequest): error when %s \"%s\": %s in version \"%s\" cannot "
	        "be handled as a %s: strict decoding error: %s\n",
	        verb, apply_file, kind, slash ? slash + 1 : a->k->api_version, kind, list);
	return 1;
}

/* A refused object of the file, or one whose kind the store does not hold. */
static const struct store_kind *kind_of_item(const struct model_any *a)
{
	const struct store_kind *k = a->k ? model_store_kind(a->k) : NULL;
	if (!k)
		fprintf(stderr, "error: %s\n", a->err[0] ? a->err : "unknown kind");
	return k;
}

/* The file's content over the live object cur: its uid and resourceVersion make the update
 * conditional, so a concurrent writer is never overwritten silently; finalizers the file does
 * not mention stay. */
static int over_live(struct model_meta *want, const struct model_meta *cur)
{
	if (model_str_set(&want->resource_version, cur->resource_version) < 0)
		return -ENOMEM;
	if (!want->has_finalizers && want->finalizers.n == 0)
		return model_strs_copy(&want->finalizers, &cur->finalizers);
	return 0;
}

static int apply_one(store *s, const struct model_any *a)
{
	const struct store_kind *k = kind_of_item(a);
	struct err e = {0};
	if (!k)
		return 1;
	const struct model_kind *mk = a->k;
	struct model_meta *m = MODEL_META(a->obj);
	void *cur = calloc(2, mk->type->size), *out = cur ? (char *)cur + mk->type->size : NULL;
	int r =
	    cur ? model_get(s, mk, m->ns, m->name, cur, &e) : err_set(&e, -ENOMEM, "out of memory");
	const char *verb = "created";
	if ((r == STORE_NOT_FOUND || r == 0) &&
	    check_fields(a, r == STORE_NOT_FOUND ? "creating" : "patching")) {
		if (r == 0)
			model_clear(mk, cur);
		free(cur);
		return 1;
	}
	if (r == STORE_NOT_FOUND) {
		r = model_create(s, mk, a->obj, NULL, &e);
	} else if (r == 0) {
		char *before = model_encode_text(mk, cur);
		if ((r = over_live(m, MODEL_META(cur))) == 0)
			r = model_update(s, mk, a->obj, out, &e);
		else
			err_set(&e, r, "out of memory");
		bool same =
		    r == 0 && model_meta_rv(MODEL_META(out)) && model_same(mk, out, before, "spec");
		verb = same ? "unchanged" : "configured";
		free(before);
		if (r == 0)
			model_clear(mk, out);
		model_clear(mk, cur);
	}
	free(cur);
	if (r < 0)
		return server_error(r, &e);
	printf("%s%s/%s %s\n", k->singular, group_suffix(k), m->name ? m->name : "", verb);
	return 0;
}

/* --subresource=status: replaces only the status of an existing object (the standalone form of
 * `kubectl ... --subresource=status`, used for the repair of operations.md §9).  A uid or
 * resourceVersion in the file's metadata is a precondition: the update fails with Conflict when
 * the live object differs, so a status read with `get -o json`, edited and applied never
 * overwrites a newer one. */
static int apply_status(store *s, const struct model_any *a)
{
	const struct store_kind *k = kind_of_item(a);
	struct err e = {0};
	if (!k)
		return 1;
	const struct model_kind *mk = a->k;
	const struct model_meta *m = MODEL_META(a->obj);
	const char *name = m->name ? m->name : "";
	if (!k->status_subresource) {
		fprintf(stderr, "error: %s%s has no status subresource\n", k->plural,
		        group_suffix(k));
		return 1;
	}
	if (!a->has_status) {
		fprintf(stderr, "error: %s%s/%s: the object has no status to apply\n", k->singular,
		        group_suffix(k), name);
		return 1;
	}
	void *cur = calloc(2, mk->type->size), *out = cur ? (char *)cur + mk->type->size : NULL;
	int r =
	    cur ? model_get(s, mk, m->ns, m->name, cur, &e) : err_set(&e, -ENOMEM, "out of memory");
	if (r == 0 && check_fields(a, "patching")) {
		model_clear(mk, cur);
		free(cur);
		return 1;
	}
	char *before = r == 0 ? model_encode_text(mk, cur) : NULL;
	if (r == 0)
		r = model_update_status(s, mk, a->obj, out, &e);
	bool same = r == 0 && model_same(mk, out, before, "status");
	if (r == 0)
		model_clear(mk, out);
	if (cur)
		model_clear(mk, cur);
	free(before);
	free(cur);
	if (r < 0)
		return server_error(r, &e);
	printf("%s%s/%s status %s\n", k->singular, group_suffix(k), name,
	       same ? "unchanged" : "configured");
	return 0;
}

/* The file (or stdin for "-") into *text. */
static int read_input(const char *file, char **text, size_t *len, struct err *e)
{
	if (strcmp(file, "-"))
		return file_read_all(file, JSON_FILE_MAX, text, len, e);
	FILE *mem = open_memstream(text, len);
	char buf[4096];
	size_t n;
	if (!mem)
		return err_set(e, -ENOMEM, "out of memory");
	while ((n = fread(buf, 1, sizeof(buf), stdin)) > 0)
		fwrite(buf, 1, n, mem);
	fclose(mem);
	return 0;
}

int cli_apply_main(int argc, char **argv)
{
	const char *file = NULL, *url = cli_default_store(), *sub = "", *validate = "strict";
	const struct flag_def defs[] = {
	    {"f", FLAG_STRING, &file, "file with a JSON object, array or List (- for stdin)", true},
	    {"validate", FLAG_STRING, &validate,
	     "unknown or duplicate fields: strict (or true) refuses the object; warn (or false) "
	     "drops them with a warning, ignore silently (default strict)",
	     false},
	    {"store", FLAG_STRING, &url,
	     "object store: dir:PATH or kube (default $PILLAR_CSI_STORE)", false},
	    STORE_FLAG_DEFS(&cli_sf),
	    {"subresource", FLAG_STRING, &sub,
	     "status: replace only the status of existing objects (uid and resourceVersion in "
	     "the file are preconditions)",
	     false},
	};
	int r = role_parse_flags("pillar-csi apply",
	                         "Create or update the objects in a JSON file in the store.", defs,
	                         sizeof(defs) / sizeof(defs[0]), argc, argv);
	char *text = NULL;
	size_t len = 0, n = 0;
	struct model_any *objs = NULL;
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
	if (validate_mode(validate) < 0) {
		fprintf(
		    stderr,
		    "error: invalid - validate option \"%s\"; must be one of: strict (or true), "
		    "warn (or false), ignore\n",
		    validate);
		return 1;
	}
	apply_file = file;
	int (*one)(store *, const struct model_any *) = *sub ? apply_status : apply_one;
	r = read_input(file, &text, &len, &e);
	if (r == 0)
		r = model_decode_file(text, len, &objs, &n, &e);
	free(text);
	if (r < 0) {
		fprintf(stderr, "error: %s: %s\n", file, e.msg);
		return 1;
	}
	if ((r = cli_open_store(url, &s)) != 0) {
		model_any_free(objs, n);
		return r;
	}
	int failed = 0;
	for (size_t i = 0; i < n; i++)
		failed |= one(s, &objs[i]);
	store_close(s);
	model_any_free(objs, n);
	return failed ? 1 : 0;
}

/* ---- get ------------------------------------------------------------------------------------ */

/* One row of the table: the cells of object obj (malloc'd strings). */
static size_t row(const struct model_kind *mk, const struct store_kind *k,
                  const struct kind_columns *kc, const void *obj, bool wide, time_t now,
                  char **cells)
{
	const struct model_meta *m = MODEL_META(obj);
	size_t c = 0;
	char buf[256];
	cells[c++] = strdup(m->name ? m->name : "");
	if (k->namespaced)
		cells[c++] = strdup(m->ns ? m->ns : "");
	for (size_t j = 0; kc && j < 5 && kc->cols[j].header; j++) {
		model_jsonpath(mk, obj, kc->cols[j].path, buf, sizeof(buf));
		cells[c++] = strdup(buf);
	}
	if (wide)
		cells[c++] = strdup(m->uid ? m->uid : "");
	cli_age(m->creation_timestamp, (long long)now, buf, sizeof(buf));
	cells[c++] = strdup(buf);
	return c;
}

static void print_row(char *const *cells, const size_t *width, size_t ncol)
{
	for (size_t c = 0; c < ncol; c++) {
		const char *v = cells[c] ? cells[c] : "";
		if (c + 1 < ncol)
			printf("%-*s   ", (int)width[c], v);
		else
			printf("%s\n", v);
	}
}

/* The columns of kind k: NAME, NAMESPACE, the printer columns, UID (wide), AGE. */
static size_t headers(const struct store_kind *k, const struct kind_columns *kc, bool wide,
                      const char **hdr)
{
	size_t ncol = 0;
	hdr[ncol++] = "NAME";
	if (k->namespaced)
		hdr[ncol++] = "NAMESPACE";
	for (size_t c = 0; kc && c < 5 && kc->cols[c].header; c++)
		hdr[ncol++] = kc->cols[c].header;
	if (wide)
		hdr[ncol++] = "UID";
	hdr[ncol++] = "AGE";
	return ncol;
}

/* The table of the items: 0, or 1 after "error: out of memory" (the rows printed so far stay). */
/* The objects a list could not read (store.h), as name and error pairs in v. */
struct unreadable_rows {
	char **v;
	size_t n; /* strings: twice the objects */
	bool oom;
};

static void note_row(void *arg, const struct store_kind *k, const char *ns, const char *name,
                     const char *error)
{
	struct unreadable_rows *u = arg;
	(void)k;
	(void)ns;
	char **p = realloc(u->v, (u->n + 2) * sizeof(*p));
	if (!p) {
		u->oom = true;
		return;
	}
	u->v = p;
	p[u->n] = strdup(name);
	p[u->n + 1] = strdup(error);
	if (!p[u->n] || !p[u->n + 1]) {
		free(p[u->n]);
		free(p[u->n + 1]);
		u->oom = true;
		return;
	}
	u->n += 2;
}

static void rows_free(struct unreadable_rows *u)
{
	for (size_t i = 0; i < u->n; i++)
		free(u->v[i]);
	free(u->v);
}

/* The error rows of a table: the name, then "error: <why>" across the other columns. */
static void print_unreadable(const struct unreadable_rows *bad, size_t *width)
{
	for (size_t i = 0; i < bad->n; i += 2)
		printf("%-*s   error: %s\n", (int)width[0], bad->v[i], bad->v[i + 1]);
}

static int print_table(const struct model_kind *mk, const void *items, size_t nrow, bool wide,
                       const struct unreadable_rows *bad)
{
	const struct store_kind *k = model_store_kind(mk);
	const struct kind_columns *kc = NULL;
	char *cells[64][9];
	size_t width[9] = {0};
	const char *hdr[9];
	time_t now = time(NULL);

	for (size_t i = 0; i < sizeof(printer) / sizeof(printer[0]); i++)
		if (strcmp(printer[i].kind, k->kind) == 0)
			kc = &printer[i];
	size_t ncol = headers(k, kc, wide, hdr);
	for (size_t c = 0; c < ncol; c++)
		width[c] = strlen(hdr[c]);
	for (size_t i = 0; i < bad->n; i += 2)
		if (strlen(bad->v[i]) > width[0])
			width[0] = strlen(bad->v[i]);
	if (nrow == 0 && bad->n == 0) {
		fprintf(stderr, "No resources found\n");
		return 0;
	}
	if (nrow == 0)
		print_row((char *const *)hdr, width, ncol);
	bool oom = false;
	for (size_t start = 0; start < nrow && !oom; start += 64) {
		size_t n = nrow - start < 64 ? nrow - start : 64;
		for (size_t r = 0; r < n; r++) {
			const void *o = (const char *)items + (start + r) * mk->type->size;
			size_t c = row(mk, k, kc, o, wide, now, cells[r]);
			for (size_t j = 0; j < c; j++)
				if (!cells[r][j])
					oom = true;
				else if (strlen(cells[r][j]) > width[j])
					width[j] = strlen(cells[r][j]);
		}
		if (start == 0 && !oom)
			print_row((char *const *)hdr, width, ncol);
		for (size_t r = 0; r < n; r++) {
			if (!oom)
				print_row(cells[r], width, ncol);
			for (size_t c = 0; c < ncol; c++)
				free(cells[r][c]);
		}
	}
	if (!oom)
		print_unreadable(bad, width);
	if (oom)
		fprintf(stderr, "error: out of memory\n");
	return oom ? 1 : 0;
}

/* The positional arguments and flags of get; -1 to go on, else the exit status. */
static int get_args(int argc, char **argv, char **pos, int *npos, const char **out,
                    const char **url, const char **selector)
{
	const struct flag_def defs[] = {
	    {"o", FLAG_STRING, out,
	     "output format: json, wide, jsonpath=TEMPLATE or custom-columns=SPEC as kubectl's "
	     "(default: a table)",
	     false},
	    {"output", FLAG_STRING, out, "same as -o", false},
	    {"l", FLAG_STRING, selector, "label selector (k=v, k!=v, k, !k; comma = and)", false},
	    {"store", FLAG_STRING, url,
	     "object store: dir:PATH or kube (default $PILLAR_CSI_STORE)", false},
	    STORE_FLAG_DEFS(&cli_sf),
	};
	struct err e = {0};
	int r = flags_parse_mixed("pillar-csi get", defs, sizeof(defs) / sizeof(defs[0]), argc,
	                          argv, pos, npos, &e);
	if (r == FLAGS_HELP) {
		flags_usage(stdout, "pillar-csi get",
		            "Print objects: pillar-csi get KIND [NAME] [-o wide|json].  KIND is a "
		            "plural, singular or short name (pa, pst, pstr, psc, pvst, psnap).",
		            defs, sizeof(defs) / sizeof(defs[0]));
		return 0;
	}
	if (r == FLAGS_VERSION || r < 0 || *npos < 1 || *npos > 2 ||
	    (**out && strcmp(*out, "json") && strcmp(*out, "wide") &&
	     strncmp(*out, "jsonpath=", 9) && strncmp(*out, "custom-columns=", 15))) {
		if (r < 0)
			fprintf(stderr, "%s\n", e.msg);
		else if (r == FLAGS_VERSION)
			r = applet_dispatch(2, (char *[]){"pillar-csi", "--version", NULL});
		else
			fprintf(stderr, "pillar-csi get: usage: pillar-csi get KIND [NAME] [-o "
			                "wide|json|jsonpath=TEMPLATE|custom-columns=SPEC] "
			                "[--store=dir:PATH|kube]\n");
		return r == 0 ? 0 : 2;
	}
	return -1;
}

/* Reads the one object or the list (what it could not read into *bad); prints the error of
 * the store. */
static int get_objects(const struct model_kind *mk, const char *url, const char *name,
                       const char *selector, void **items, size_t *n, struct unreadable_rows *bad)
{
	const struct store_kind *k = model_store_kind(mk);
	struct err e = {0};
	store *s;
	int r = cli_open_store(url, &s);
	if (r != 0)
		return r;
	*items = NULL;
	*n = 0;
	if (name) {
		*items = calloc(1, mk->type->size);
		r = *items ? model_get(s, mk, k->namespaced ? "default" : NULL, name, *items, &e)
		           : err_set(&e, -ENOMEM, "out of memory");
		*n = r == 0;
	} else {
		struct store_unreadable catch = {note_row, bad}, prev;
		store_unreadable_catch(&catch, &prev);
		r = model_list(s, mk, NULL, selector, items, n, NULL, &e);
		store_unreadable_catch(&prev, NULL);
	}
	store_close(s);
	if (r < 0) /* both stores word NotFound as the API server does */
		fprintf(stderr, "Error from server (%s): %s\n", store_reason(r), e.msg);
	return r < 0 ? 1 : 0;
}

/* -o jsonpath=TEMPLATE or -o custom-columns=SPEC, as kubectl prints them (model/kpath.h). */
static int print_kpath(const struct model_kind *mk, const void *items, size_t n, bool single,
                       const char *out)
{
	void *doc = model_kpath_doc(mk, items, n, single);
	char *text = NULL;
	struct err e = {0};
	int r = !doc            ? err_set(&e, -ENOMEM, "out of memory")
	        : out[0] == 'j' ? model_kpath_template(doc, out + 9, &text, &e)
	                        : model_kpath_columns(doc, out + 15, &text, &e);
	model_kpath_doc_free(doc);
	if (r < 0) {
		fprintf(stderr, "error: %s\n", e.msg);
		return 1;
	}
	fputs(text, stdout);
	free(text);
	return 0;
}

int cli_get_main(int argc, char **argv)
{
	const char *out = "", *url = cli_default_store(), *selector = NULL;
	char **pos = calloc((size_t)argc + 1, sizeof(char *));
	int npos = 0, r;
	void *items = NULL;
	size_t n = 0;

	if (!pos)
		return 1;
	if ((r = get_args(argc, argv, pos, &npos, &out, &url, &selector)) >= 0) {
		free(pos);
		return r;
	}
	const struct store_kind *k = store_kind_lookup(pos[0]);
	const struct model_kind *mk = k ? model_kind_find(k->kind) : NULL;
	if (!mk) {
		fprintf(stderr, "error: the server doesn't have a resource type \"%s\"\n", pos[0]);
		free(pos);
		return 1;
	}
	struct unreadable_rows bad = {0};
	r = get_objects(mk, url, npos == 2 ? pos[1] : NULL, selector, &items, &n, &bad);
	if (r == 0 && strcmp(out, "json") == 0) {
		void *doc = model_kpath_doc(mk, items, n, npos == 2);
		char *text = NULL;
		if (doc && model_kpath_json(doc, &text) == 0) {
			fputs(text, stdout);
		} else {
			fprintf(stderr, "error: out of memory\n");
			r = 1;
		}
		free(text);
		model_kpath_doc_free(doc);
	} else if (r == 0 &&
	           (!strncmp(out, "jsonpath=", 9) || !strncmp(out, "custom-columns=", 15))) {
		r = print_kpath(mk, items, n, npos == 2, out);
	} else if (r == 0) {
		r = print_table(mk, items, n, strcmp(out, "wide") == 0, &bad);
	}
	/* a list that left objects out prints the others and fails, as kubectl does with
	 * partial errors; a table has them as error rows, other formats on standard error */
	if (r == 0 && (bad.n || bad.oom)) {
		for (size_t i = 0; (*out && strcmp(out, "wide")) && i < bad.n; i += 2)
			fprintf(stderr, "error: %s \"%s\": %s\n", k->kind, bad.v[i], bad.v[i + 1]);
		if (bad.oom)
			fprintf(stderr, "error: out of memory\n");
		r = 1;
	}
	rows_free(&bad);
	model_list_free(mk, items, n);
	free(pos);
	return r;
}

/* ---- delete --------------------------------------------------------------------------------- */

int cli_delete_main(int argc, char **argv)
{
	const char *url = cli_default_store();
	const struct flag_def defs[] = {
	    {"store", FLAG_STRING, &url,
	     "object store: dir:PATH or kube (default $PILLAR_CSI_STORE)", false},
	    STORE_FLAG_DEFS(&cli_sf),
	};
	char **pos = calloc((size_t)argc + 1, sizeof(char *));
	int npos = 0, r;
	struct err e = {0};
	store *s;

	if (!pos)
		return 1;
	r = flags_parse_mixed("pillar-csi delete", defs, sizeof(defs) / sizeof(defs[0]), argc, argv,
	                      pos, &npos, &e);
	if (r == FLAGS_HELP) {
		flags_usage(
		    stdout, "pillar-csi delete",
		    "Delete an object: pillar-csi delete KIND NAME (finalizers are respected).",
		    defs, sizeof(defs) / sizeof(defs[0]));
		free(pos);
		return 0;
	}
	if (r != FLAGS_OK || npos != 2) {
		fprintf(stderr, "%s\n",
		        r < 0 ? e.msg
		              : "pillar-csi delete: usage: pillar-csi delete KIND NAME "
		                "[--store=dir:PATH|kube]");
		free(pos);
		return 2;
	}
	const struct store_kind *k = store_kind_lookup(pos[0]);
	if (!k) {
		fprintf(stderr, "error: the server doesn't have a resource type \"%s\"\n", pos[0]);
		free(pos);
		return 1;
	}
	if ((r = cli_open_store(url, &s)) != 0) {
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
