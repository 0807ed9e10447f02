/* cli get: `pillar-csi get` prints the objects as the store hands them over (docs/cli.md "get"):
 * a table one chunk of rows at a time, sized as kubectl's printer sizes a chunked list; -o json
 * a List item by item.  Only -o jsonpath and -o custom-columns hold the whole list: a template
 * may address any item, and kubectl sizes custom columns over all rows. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "applets.h"
#include "cli/cli.h"
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

#define MAX_CELLS     9
#define CHUNK_DEFAULT 500 /* kubectl's --chunk-size */

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
	*u = (struct unreadable_rows){0};
}

/* ---- the table ------------------------------------------------------------------------------ */

/* A table being printed.  The rows of one chunk are held, then sized and printed; a column's
 * width is the widest of its header and every cell printed or held so far, so widths only grow
 * from one chunk to the next (kubectl's tabwriter remembers them) and rows are never padded
 * again.  The header goes out with the first chunk; the error rows of unreadable objects come
 * last. */
struct table {
	const struct model_kind *mk;
	const struct store_kind *k;
	const struct kind_columns *kc;
	bool wide;
	time_t now;
	size_t chunk; /* rows sized together; 0: the whole list */
	size_t ncol, width[MAX_CELLS];
	const char *hdr[MAX_CELLS];
	char *(*rows)[MAX_CELLS]; /* the chunk held: n of cap */
	size_t n, cap;
	bool started; /* the header is out */
	const struct unreadable_rows *bad;
	bool oom;
};

/* One row of the table: the cells of object obj (malloc'd strings). */
static size_t row(const struct table *t, const void *obj, char **cells)
{
	const struct model_meta *m = MODEL_META(obj);
	const struct kind_columns *kc = t->kc;
	size_t c = 0;
	char buf[256];
	cells[c++] = strdup(m->name ? m->name : "");
	if (t->k->namespaced)
		cells[c++] = strdup(m->ns ? m->ns : "");
	for (size_t j = 0; kc && j < 5 && kc->cols[j].header; j++) {
		model_jsonpath(t->mk, obj, kc->cols[j].path, buf, sizeof(buf));
		cells[c++] = strdup(buf);
	}
	if (t->wide)
		cells[c++] = strdup(m->uid ? m->uid : "");
	cli_age(m->creation_timestamp, (long long)t->now, buf, sizeof(buf));
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
static void table_init(struct table *t, const struct model_kind *mk, bool wide, size_t chunk,
                       const struct unreadable_rows *bad)
{
	*t = (struct table){.mk = mk,
	                    .k = model_store_kind(mk),
	                    .wide = wide,
	                    .now = time(NULL),
	                    .chunk = chunk,
	                    .bad = bad};
	for (size_t i = 0; i < sizeof(printer) / sizeof(printer[0]); i++)
		if (strcmp(printer[i].kind, t->k->kind) == 0)
			t->kc = &printer[i];
	t->hdr[t->ncol++] = "NAME";
	if (t->k->namespaced)
		t->hdr[t->ncol++] = "NAMESPACE";
	for (size_t c = 0; t->kc && c < 5 && t->kc->cols[c].header; c++)
		t->hdr[t->ncol++] = t->kc->cols[c].header;
	if (wide)
		t->hdr[t->ncol++] = "UID";
	t->hdr[t->ncol++] = "AGE";
	for (size_t c = 0; c < t->ncol; c++)
		t->width[c] = strlen(t->hdr[c]);
}

static void widen(size_t *width, const char *cell)
{
	if (cell && strlen(cell) > *width)
		*width = strlen(cell);
}

/* The rows held dropped (a list taken again). */
static void table_drop(struct table *t)
{
	for (size_t r = 0; r < t->n; r++)
		for (size_t c = 0; c < t->ncol; c++)
			free(t->rows[r][c]);
	t->n = 0;
}

/* Sizes and prints the rows held (the header first when none was printed). */
static void table_flush(struct table *t)
{
	for (size_t i = 0; i < t->bad->n; i += 2)
		widen(&t->width[0], t->bad->v[i]);
	for (size_t r = 0; r < t->n; r++)
		for (size_t c = 0; c < t->ncol; c++)
			widen(&t->width[c], t->rows[r][c]);
	if (!t->oom && !t->started && (t->n || t->bad->n)) {
		print_row((char *const *)t->hdr, t->width, t->ncol);
		t->started = true;
	}
	for (size_t r = 0; r < t->n && !t->oom; r++)
		print_row(t->rows[r], t->width, t->ncol);
	table_drop(t);
}

/* model_each_fn: one object's row held, the chunk printed when full. */
static int table_add(void *obj, void *arg)
{
	struct table *t = arg;
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		if (t->chunk && cap > t->chunk)
			cap = t->chunk;
		void *p = realloc(t->rows, cap * sizeof(*t->rows));
		if (!p) {
			t->oom = true;
			return -ENOMEM;
		}
		t->rows = p;
		t->cap = cap;
	}
	size_t c = row(t, obj, t->rows[t->n++]);
	for (size_t j = 0; j < c; j++)
		t->oom |= !t->rows[t->n - 1][j];
	if (t->chunk && t->n == t->chunk)
		table_flush(t);
	return t->oom ? -ENOMEM : 0;
}

/* The rows still held, then the error rows; 0, or 1 after "error: out of memory". */
static int table_end(struct table *t)
{
	if (!t->started && t->n == 0 && t->bad->n == 0 && !t->oom)
		fprintf(stderr, "No resources found\n");
	table_flush(t);
	for (size_t i = 0; i < t->bad->n && !t->oom; i += 2)
		printf("%-*s   error: %s\n", (int)t->width[0], t->bad->v[i], t->bad->v[i + 1]);
	free(t->rows);
	t->rows = NULL;
	if (t->oom)
		fprintf(stderr, "error: out of memory\n");
	return t->oom ? 1 : 0;
}

/* ---- -o json -------------------------------------------------------------------------------- */

struct json_list {
	const struct model_kind *mk;
	size_t n;     /* items written */
	bool started; /* the List's head is out */
};

/* model_each_fn: one item of the List. */
static int json_add(void *obj, void *arg)
{
	struct json_list *j = arg;
	if (!j->started)
		model_kpath_json_list_begin(stdout);
	j->started = true;
	int r = model_kpath_json_list_item(stdout, j->mk, obj, j->n);
	j->n += r == 0;
	return r;
}

static int json_end(struct json_list *j)
{
	if (!j->started)
		model_kpath_json_list_begin(stdout);
	model_kpath_json_list_end(stdout, j->n);
	return 0;
}

/* ---- -o jsonpath, -o custom-columns ---------------------------------------------------------- */

/* The List document kubectl's templates are evaluated on. */
struct kpath_list {
	void *doc;
	const struct model_kind *mk;
};

/* model_each_fn: one item into the document. */
static int doc_add(void *obj, void *arg)
{
	struct kpath_list *d = arg;
	return model_kpath_doc_add(d->doc, d->mk, obj);
}

/* -o jsonpath=TEMPLATE or -o custom-columns=SPEC, as kubectl prints them (model/kpath.h). */
static int print_kpath(void *doc, const char *out)
{
	char *text = NULL;
	struct err e = {0};
	int r = !doc            ? err_set(&e, -ENOMEM, "out of memory")
	        : out[0] == 'j' ? model_kpath_template(doc, out + 9, &text, &e)
	                        : model_kpath_columns(doc, out + 15, &text, &e);
	if (r < 0) {
		fprintf(stderr, "error: %s\n", e.msg);
		return 1;
	}
	fputs(text, stdout);
	free(text);
	return 0;
}

static bool kpath_format(const char *out)
{
	return !strncmp(out, "jsonpath=", 9) || !strncmp(out, "custom-columns=", 15);
}

/* ---- the verb ------------------------------------------------------------------------------- */

/* What was parsed from the command line. */
struct get_args {
	const char *out, *url, *selector;
	int64_t chunk;
	char **pos;
	int npos;
};

/* The positional arguments and flags of get; -1 to go on, else the exit status. */
static int get_args(int argc, char **argv, struct get_args *a)
{
	const struct flag_def defs[] = {
	    {"o", FLAG_STRING, &a->out,
	     "output format: json, wide, jsonpath=TEMPLATE or custom-columns=SPEC as kubectl's "
	     "(default: a table)",
	     false},
	    {"output", FLAG_STRING, &a->out, "same as -o", false},
	    {"l", FLAG_STRING, &a->selector, "label selector (k=v, k!=v, k, !k; comma = and)",
	     false},
	    {"chunk-size", FLAG_INT, &a->chunk,
	     "objects per list request and per chunk of a table, whose columns are sized chunk by "
	     "chunk as kubectl's (default 500; 0: the table is sized over the whole list)",
	     false},
	    {"store", FLAG_STRING, &a->url,
	     "object store: dir:PATH or kube (default $PILLAR_CSI_STORE)", false},
	    STORE_FLAG_DEFS(&cli_sf),
	};
	const char *out;
	struct err e = {0};
	int r = flags_parse_mixed("pillar-csi get", defs, sizeof(defs) / sizeof(defs[0]), argc,
	                          argv, a->pos, &a->npos, &e);
	if (r == FLAGS_HELP) {
		flags_usage(stdout, "pillar-csi get",
		            "Print objects: pillar-csi get KIND [NAME] [-o wide|json].  KIND is a "
		            "plural, singular or short name (pa, pst, pstr, psc, pvst, psnap).",
		            defs, sizeof(defs) / sizeof(defs[0]));
		return 0;
	}
	out = a->out;
	if (r == 0 && a->chunk < 0) {
		fprintf(stderr, "pillar-csi get: --chunk-size must be 0 or more\n");
		return 2;
	}
	if (r == FLAGS_VERSION || r < 0 || a->npos < 1 || a->npos > 2 ||
	    (*out && strcmp(out, "json") && strcmp(out, "wide") && !kpath_format(out))) {
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

/* One object, in the format asked for; the exit status. */
static int get_one(store *s, const struct model_kind *mk, const char *name, const char *out)
{
	const struct store_kind *k = model_store_kind(mk);
	struct err e = {0};
	void *obj = calloc(1, mk->type->size);
	int r = obj ? model_get(s, mk, k->namespaced ? "default" : NULL, name, obj, &e)
	            : err_set(&e, -ENOMEM, "out of memory");
	if (r < 0) { /* both stores word NotFound as the API server does */
		fprintf(stderr, "Error from server (%s): %s\n", store_reason(r), e.msg);
		free(obj);
		return 1;
	}
	if (!strcmp(out, "json") || kpath_format(out)) {
		void *doc = model_kpath_doc(mk, obj, 1, true);
		char *text = NULL;
		if (kpath_format(out)) {
			r = print_kpath(doc, out);
		} else if (doc && model_kpath_json(doc, &text) == 0) {
			fputs(text, stdout);
		} else {
			fprintf(stderr, "error: out of memory\n");
			r = 1;
		}
		free(text);
		model_kpath_doc_free(doc);
	} else {
		struct unreadable_rows none = {0};
		struct table t;
		table_init(&t, mk, !strcmp(out, "wide"), 0, &none);
		table_add(obj, &t);
		r = table_end(&t);
	}
	model_clear(mk, obj);
	free(obj);
	return r;
}

static void table_drop_held(void *arg)
{
	table_drop(arg);
}

static void doc_drop(void *arg)
{
	struct kpath_list *d = arg;
	model_kpath_doc_free(d->doc);
	d->doc = model_kpath_doc(d->mk, NULL, 0, false);
}

/* The kind listed through fn, the objects it cannot read into bad.  A list whose continue token
 * expired (store.h) is taken again, as model_list takes it, while nothing of it was printed
 * (*started false): drop (optional) forgets what fn kept of the first attempt. */
static int each_object(store *s, const struct model_kind *mk, const char *selector,
                       model_each_fn fn, void *arg, const bool *started, void (*drop)(void *),
                       struct unreadable_rows *bad, struct err *e)
{
	struct store_unreadable catch = {note_row, bad}, prev;
	int r;
	store_unreadable_catch(&catch, &prev);
	for (int again = 0;; again++) {
		r = model_list_each(s, mk, NULL, selector, fn, arg, NULL, e);
		if (r != STORE_EXPIRED || *started || again == 3)
			break;
		if (drop)
			drop(arg);
		rows_free(bad);
	}
	store_unreadable_catch(&prev, NULL);
	return r;
}

/* The list in the format asked for, printed as it is read; the exit status.  A list that fails
 * part way prints what it read (a table's rows, a closed List), then the error, as kubectl. */
static int get_list(store *s, const struct model_kind *mk, const struct get_args *a,
                    struct unreadable_rows *bad)
{
	struct err e = {0};
	int r, rc = 0;
	bool never = false;
	if (!strcmp(a->out, "json")) {
		struct json_list j = {.mk = mk};
		r = each_object(s, mk, a->selector, json_add, &j, &j.started, NULL, bad, &e);
		if (r == 0 || j.started)
			rc = json_end(&j);
		if (r == -ENOMEM)
			fprintf(stderr, "error: out of memory\n");
	} else if (kpath_format(a->out)) {
		struct kpath_list d = {model_kpath_doc(mk, NULL, 0, false), mk};
		r = d.doc ? each_object(s, mk, a->selector, doc_add, &d, &never, doc_drop, bad, &e)
		          : -ENOMEM;
		if (r == 0)
			rc = print_kpath(d.doc, a->out);
		else if (r == -ENOMEM)
			fprintf(stderr, "error: out of memory\n");
		model_kpath_doc_free(d.doc);
	} else {
		struct table t;
		table_init(&t, mk, !strcmp(a->out, "wide"), (size_t)a->chunk, bad);
		r = each_object(s, mk, a->selector, table_add, &t, &t.started, table_drop_held, bad,
		                &e);
		if (r == 0 || t.started || t.n || bad->n)
			rc = table_end(&t); /* says when out of memory */
		free(t.rows);
	}
	if (r < 0 && r != -ENOMEM)
		fprintf(stderr, "Error from server (%s): %s\n", store_reason(r), e.msg);
	return r < 0 ? 1 : rc;
}

int cli_get_main(int argc, char **argv)
{
	struct get_args a = {.out = "", .url = cli_default_store(), .chunk = CHUNK_DEFAULT};
	struct unreadable_rows bad = {0};
	store *s;
	int r;

	if (!(a.pos = calloc((size_t)argc + 1, sizeof(char *))))
		return 1;
	if ((r = get_args(argc, argv, &a)) >= 0) {
		free(a.pos);
		return r;
	}
	const struct store_kind *k = store_kind_lookup(a.pos[0]);
	const struct model_kind *mk = k ? model_kind_find(k->kind) : NULL;
	if (!mk) {
		fprintf(stderr, "error: the server doesn't have a resource type \"%s\"\n",
		        a.pos[0]);
		free(a.pos);
		return 1;
	}
	cli_list_page = a.chunk > 0 && a.chunk < 1 << 30 ? (int)a.chunk : 0;
	if ((r = cli_open_store(a.url, &s)) != 0) {
		free(a.pos);
		return r;
	}
	r = a.npos == 2 ? get_one(s, mk, a.pos[1], a.out) : get_list(s, mk, &a, &bad);
	store_close(s);
	/* a list that left objects out prints the others and fails, as kubectl does with
	 * partial errors; a table has them as error rows, other formats on standard error */
	if (r == 0 && (bad.n || bad.oom)) {
		for (size_t i = 0; (*a.out && strcmp(a.out, "wide")) && i < bad.n; i += 2)
			fprintf(stderr, "error: %s \"%s\": %s\n", k->kind, bad.v[i], bad.v[i + 1]);
		if (bad.oom)
			fprintf(stderr, "error: out of memory\n");
		r = 1;
	}
	rows_free(&bad);
	free(a.pos);
	return r;
}
