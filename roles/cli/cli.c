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
int cli_list_page;

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
	if (cli_list_page > 0)
		o.list_page = cli_list_page;
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
