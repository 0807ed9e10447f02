/* `pillar-csi apply|get|delete` on the embedded store (spec/standalone.md): printer-column
 * JSONPath, ages, and the verbs run through the real binary (PILLAR_BIN). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/exec.h"
#include "base/json.h"
#include "cli/cli.h"
#include "model/kpath.h"
#include "model/model.h"
#include "model/pillar.h"
#include "store/store.h"
#include "testutil.h"

static const char *bin(void)
{
	const char *b = getenv("PILLAR_BIN");
	return b && *b ? b : "build/pillar-csi";
}

START_TEST(test_jsonpath)
{
	const char *doc =
	    "{\"spec\":{\"agentRef\":\"storage-1\",\"n\":3},\"status\":{\"conditions\":["
	    "{\"type\":\"Ready\",\"status\":\"False\"},{\"type\":\"ExportsReady\","
	    "\"status\":\"True\"}],\"ok\":true,\"list\":[\"a\",\"b\"]}}";
	cJSON *o;
	char buf[64];
	ck_assert_int_eq(json_parse_strict(doc, strlen(doc), &o, NULL), 0);
	model_jsonpath_json(o, ".spec.agentRef", buf, sizeof(buf));
	ck_assert_str_eq(buf, "storage-1");
	model_jsonpath_json(o, ".spec.n", buf, sizeof(buf));
	ck_assert_str_eq(buf, "3");
	model_jsonpath_json(o, ".status.conditions[?(@.type==\"ExportsReady\")].status", buf,
	                    sizeof(buf));
	ck_assert_str_eq(buf, "True");
	model_jsonpath_json(o, ".status.conditions[?(@.type==\"Ready\")].status", buf, sizeof(buf));
	ck_assert_str_eq(buf, "False");
	model_jsonpath_json(o, ".status.conditions[?(@.type==\"Nope\")].status", buf, sizeof(buf));
	ck_assert_str_eq(buf, "");
	model_jsonpath_json(o, ".status.list[1]", buf, sizeof(buf));
	ck_assert_str_eq(buf, "b");
	model_jsonpath_json(o, ".status.ok", buf, sizeof(buf));
	ck_assert_str_eq(buf, "true");
	model_jsonpath_json(o, ".missing.deeper", buf, sizeof(buf));
	ck_assert_str_eq(buf, "");
	model_jsonpath_json(o, "garbage", buf, sizeof(buf));
	ck_assert_str_eq(buf, "");
	cJSON_Delete(o);
}
END_TEST

START_TEST(test_age)
{
	char buf[32];
	struct tm tm = {.tm_year = 126, .tm_mon = 11, .tm_mday = 2, .tm_hour = 12};
	long long t0 = (long long)timegm(&tm);
	const char *ts = "2026-12-02T12:00:00Z";
	cli_age(ts, t0 + 45, buf, sizeof(buf));
	ck_assert_str_eq(buf, "45s");
	cli_age(ts, t0 + 310, buf, sizeof(buf));
	ck_assert_str_eq(buf, "5m10s");
	cli_age(ts, t0 + 3600 + 120, buf, sizeof(buf));
	ck_assert_str_eq(buf, "62m");
	cli_age(ts, t0 + 5 * 3600 + 600, buf, sizeof(buf));
	ck_assert_str_eq(buf, "5h10m");
	cli_age(ts, t0 + 30 * 3600, buf, sizeof(buf));
	ck_assert_str_eq(buf, "30h");
	cli_age(ts, t0 + 20 * 86400, buf, sizeof(buf));
	ck_assert_str_eq(buf, "20d");
	cli_age("yesterday", t0, buf, sizeof(buf));
	ck_assert_str_eq(buf, "<unknown>");
}
END_TEST

static int run(struct exec_result *r, const char *const *argv)
{
	int rc = exec_run(argv, NULL, r, NULL);
	ck_assert_msg(rc == 0, "could not run %s", argv[0]);
	return r->exit_code;
}

/* Runs argv and expects its exit code; where not NULL, out and err are what stdout and stderr
 * hold: exactly (whole), or somewhere in them (!whole). */
static void expect_run(const char *const *argv, int code, bool whole, const char *out,
                       const char *err)
{
	struct exec_result r;
	int got = run(&r, argv);
	ck_assert_msg(got == code, "%s %s: exit %d, want %d; stderr:\n%s", argv[1], argv[2], got,
	              code, r.err);
	if (out && whole)
		ck_assert_str_eq(r.out, out);
	if (err && whole)
		ck_assert_str_eq(r.err, err);
	if (out && !whole)
		ck_assert_msg(strstr(r.out, out), "%s %s: no \"%s\" in stdout:\n%s", argv[1],
		              argv[2], out, r.out);
	if (err && !whole)
		ck_assert_msg(strstr(r.err, err), "%s %s: no \"%s\" in stderr:\n%s", argv[1],
		              argv[2], err, r.err);
	exec_result_free(&r);
}

/* The object a `get ... -o json` argv prints (exit 0). */
static cJSON *get_json(const char *const *argv)
{
	struct exec_result r;
	cJSON *o = NULL;
	ck_assert_int_eq(run(&r, argv), 0);
	ck_assert_int_eq(json_parse_strict(r.out, r.out_len, &o, NULL), 0);
	exec_result_free(&r);
	return o;
}

/* A fresh scratch directory d, the --store flag of an embedded store in it, and the path of
 * the file name in it. */
static void scratch(char d[512], char storeflag[600], char file[600], const char *name)
{
	snprintf(d, 512, "%s", tu_mkdtemp());
	snprintf(storeflag, 600, "--store=dir:%s/store", d);
	snprintf(file, 600, "%s/%s", d, name);
}

START_TEST(test_verbs_through_the_binary)
{
	char d[512], storeflag[600], file[600];
	struct exec_result r;
	scratch(d, storeflag, file, "objs.json");
	tu_write(d, "objs.json",
	         "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":["
	         "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarAgent\","
	         "\"metadata\":{\"name\":\"storage-1\"},\"spec\":{\"nodeRef\":{\"name\":\"storage-"
	         "1\"}}},"
	         "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarStore\","
	         "\"metadata\":{\"name\":\"tank\"},\"spec\":{\"agentRef\":\"storage-1\","
	         "\"backend\":{\"zfs\":{\"pool\":\"tank\"}}}}]}");
	const char *apply[] = {bin(), "apply", "-f", file, storeflag, NULL};
	expect_run(apply, 0, true,
	           "pillaragent.pillar-csi.bhyoo.com/storage-1 created\n"
	           "pillarstore.pillar-csi.bhyoo.com/tank created\n",
	           NULL);
	expect_run(apply, 0, false, "pillarstore.pillar-csi.bhyoo.com/tank unchanged\n", NULL);

	/* the table uses the CRD's printer columns */
	const char *get[] = {bin(), "get", "pst", storeflag, NULL};
	ck_assert_int_eq(run(&r, get), 0);
	ck_assert_msg(strncmp(r.out,
	                      "NAME   TARGET      AVAILABLE   READY   AGE\n"
	                      "tank   storage-1                       ",
	                      80) == 0,
	              "got:\n%s", r.out);
	exec_result_free(&r);

	const char *getjson[] = {bin(), "get",  "pillaragent", "storage-1",
	                         "-o",  "json", storeflag,     NULL};
	cJSON *o = get_json(getjson);
	ck_assert_str_eq(json_get_str(o, "kind"), "PillarAgent");
	ck_assert_ptr_nonnull(json_get_str(cJSON_GetObjectItem(o, "metadata"), "uid"));
	cJSON_Delete(o);

	const char *del[] = {bin(), "delete", "pa", "storage-1", storeflag, NULL};
	expect_run(del, 0, true, "pillaragent.pillar-csi.bhyoo.com \"storage-1\" deleted\n", NULL);
	expect_run(getjson, 1, true, NULL,
	           "Error from server (NotFound): pillaragents.pillar-csi.bhyoo.com "
	           "\"storage-1\" not found\n");

	const char *badkind[] = {bin(), "get", "widgets", storeflag, NULL};
	expect_run(badkind, 1, true, NULL,
	           "error: the server doesn't have a resource type \"widgets\"\n");
	tu_write(d, "bad.json", "{\"kind\":");
	snprintf(file, sizeof(file), "%s/bad.json", d);
	const char *badfile[] = {bin(), "apply", "-f", file, storeflag, NULL};
	expect_run(badfile, 1, false, NULL, "invalid JSON");
	/* an object its CRD's rules reject is refused with the spec's message (crds.md §3.1) and
	 * not stored; the valid objects of the same file are */
	tu_write(d, "invalid.json",
	         "[{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarAgent\","
	         "\"metadata\":{\"name\":\"both\"},\"spec\":{\"nodeRef\":{\"name\":\"n1\"},"
	         "\"external\":{\"address\":\"10.0.0.9\",\"port\":9500}}},"
	         "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarAgent\","
	         "\"metadata\":{\"name\":\"ok\"},\"spec\":{\"nodeRef\":{\"name\":\"n1\"}}}]");
	snprintf(file, sizeof(file), "%s/invalid.json", d);
	const char *invalid[] = {bin(), "apply", "-f", file, storeflag, NULL};
	expect_run(invalid, 1, true, "pillaragent.pillar-csi.bhyoo.com/ok created\n",
	           "Error from server (Invalid): PillarAgent \"both\" is invalid: "
	           "exactly one of spec.nodeRef or spec.external must be set\n");
	const char *getboth[] = {bin(), "get", "pa", "both", storeflag, NULL};
	expect_run(getboth, 1, false, NULL, "(NotFound)");
	const char *nostore[] = {bin(), "get", "pa", NULL};
	expect_run(nostore, 1, false, NULL, "pass --store=dir:PATH");
	/* a corrupt record is an error row of the listing, the other objects are listed; the
	 * command fails, as kubectl does when it could not read everything */
	char broken[700], want[900];
	tu_write(d, "store/pillaragents/broken.json", "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1");
	snprintf(broken, sizeof(broken), "%s/store/pillaragents/broken.json", d);
	const char *getpa[] = {bin(), "get", "pa", storeflag, NULL};
	ck_assert_int_eq(run(&r, getpa), 1);
	snprintf(want, sizeof(want), "\nbroken   error: %s is corrupt", broken);
	ck_assert_msg(strstr(r.out, want) && strstr(r.out, "\nok "), "got:\n%s", r.out);
	exec_result_free(&r);
	const char *getpajson[] = {bin(), "get", "pa", "-o", "json", storeflag, NULL};
	snprintf(want, sizeof(want), "error: PillarAgent \"broken\": %s is corrupt", broken);
	expect_run(getpajson, 1, false, "\"name\": \"ok\"", want);
	tu_rmtree(d);
}
END_TEST

/* apply --validate (kubectl's levels): strict, the default, refuses unknown and duplicate
 * fields with the API server's message and stores nothing; warn and false apply the object
 * without them with a warning each; ignore silently.  A NUL byte in a string is refused
 * whatever the level. */
START_TEST(test_apply_validate)
{
	char d[512], storeflag[600], file[600];
	struct exec_result r;
	scratch(d, storeflag, file, "pa.json");
	tu_write(d, "pa.json",
	         "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarAgent\","
	         "\"metadata\":{\"name\":\"s1\"},\"spec\":{\"nodeRef\":{\"name\":\"n1\",\"name\":"
	         "\"n2\"},\"bogus\":true}}");
	const char *strict[] = {bin(), "apply", "-f", file, storeflag, NULL};
	const char *get[] = {bin(), "get", "pa", "s1", "-o", "json", storeflag, NULL};
	char want[1024];
	snprintf(want, sizeof(want),
	         "Error from server (BadRequest): error when creating \"%s\": PillarAgent in "
	         "version \"v1alpha1\" cannot be handled as a PillarAgent: strict decoding error: "
	         "unknown field \"spec.bogus\", duplicate field \"spec.nodeRef.name\"\n",
	         file);
	expect_run(strict, 1, true, "", want);
	expect_run(get, 1, true, NULL, NULL); /* nothing stored */

	const char *warn[] = {bin(), "apply", "-f", file, storeflag, "--validate=warn", NULL};
	expect_run(warn, 0, true, "pillaragent.pillar-csi.bhyoo.com/s1 created\n",
	           "Warning: unknown field \"spec.bogus\"\n"
	           "Warning: duplicate field \"spec.nodeRef.name\"\n");
	ck_assert_int_eq(run(&r, get),
	                 0); /* stored as the API server stores it: pruned, last wins */
	ck_assert_ptr_null(strstr(r.out, "bogus"));
	ck_assert_ptr_nonnull(strstr(r.out, "\"name\": \"n2\""));
	exec_result_free(&r);

	/* an update is refused the same way under strict (the request is then a patch) */
	expect_run(strict, 1, false, NULL, "error when patching");
	const char *off[] = {bin(), "apply", "-f", file, storeflag, "--validate=false", NULL};
	ck_assert_int_eq(run(&r, off), 0);
	ck_assert_ptr_nonnull(strstr(r.err, "Warning: unknown field \"spec.bogus\"\n"));
	ck_assert_str_eq(r.out, "pillaragent.pillar-csi.bhyoo.com/s1 unchanged\n");
	exec_result_free(&r);
	const char *ignore[] = {bin(), "apply", "-f", file, storeflag, "--validate=ignore", NULL};
	expect_run(ignore, 0, true, NULL, "");
	const char *bad[] = {bin(), "apply", "-f", file, storeflag, "--validate=maybe", NULL};
	expect_run(bad, 1, false, NULL, "invalid - validate option \"maybe\"");

	/* "s1\u0000x" must not name s1, at any level */
	tu_write(d, "pa.json",
	         "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarAgent\","
	         "\"metadata\":{\"name\":\"s1\\u0000x\"},\"spec\":{\"external\":{\"address\":"
	         "\"10.0.0.1\",\"port\":9}}}");
	expect_run(ignore, 1, false, NULL, ": field metadata.name contains a NUL byte");
	ck_assert_int_eq(run(&r, get), 0);
	ck_assert_ptr_null(strstr(r.out, "10.0.0.1"));
	exec_result_free(&r);
	tu_rmtree(d);
}
END_TEST

/* apply --subresource=status replaces only the status of an existing object, with the file's uid
 * and resourceVersion as preconditions (the standalone form of the ExportSpecMissing repair of
 * operations.md §9); kinds without a status subresource and other subresources are refused. */
START_TEST(test_apply_status_subresource)
{
	char d[512], storeflag[600], file[600];
	scratch(d, storeflag, file, "o.json");
#define PVST_HEAD                                                                           \
	"{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarVolumeState\"," \
	"\"metadata\":{\"name\":\"pvc-1\"%s},\"spec\":{\"agentRef\":\"storage-1\"}%s}"
	char buf[1024];
	snprintf(buf, sizeof(buf), PVST_HEAD, "", "");
	tu_write(d, "o.json", buf);
	const char *apply[] = {bin(), "apply", "-f", file, storeflag, NULL};
	const char *applys[] = {bin(), "apply", "-f", file, storeflag, "--subresource=status",
	                        NULL};
	expect_run(apply, 0, true, NULL, NULL);

	/* a plain apply never writes status (status subresource) */
	snprintf(buf, sizeof(buf), PVST_HEAD, "",
	         ",\"status\":{\"phase\":\"Ready\",\"exportSpec\":{\"bindAddress\":\"10.0.0.5\","
	         "\"port\":4420,\"aclEnabled\":true}}");
	tu_write(d, "o.json", buf);
	expect_run(apply, 0, true, NULL, NULL);
	const char *get[] = {bin(), "get", "pvst", "pvc-1", "-o", "json", storeflag, NULL};
	cJSON *o = get_json(get);
	ck_assert_ptr_null(cJSON_GetObjectItem(o, "status"));
	cJSON_Delete(o);

	expect_run(applys, 0, true,
	           "pillarvolumestate.pillar-csi.bhyoo.com/pvc-1 status configured\n", NULL);
	expect_run(applys, 0, true,
	           "pillarvolumestate.pillar-csi.bhyoo.com/pvc-1 status unchanged\n", NULL);
	o = get_json(get);
	const cJSON *st = cJSON_GetObjectItem(o, "status");
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(st, "exportSpec"), "bindAddress"),
	                 "10.0.0.5");
	ck_assert_str_eq(json_get_str(cJSON_GetObjectItem(o, "spec"), "agentRef"), "storage-1");
	cJSON_Delete(o);

	/* stale resourceVersion or another uid: Conflict, nothing written */
	snprintf(buf, sizeof(buf), PVST_HEAD, ",\"resourceVersion\":\"1\"",
	         ",\"status\":{\"phase\":\"Ready\"}");
	tu_write(d, "o.json", buf);
	expect_run(applys, 1, false, NULL, "Error from server (Conflict): ");
	snprintf(buf, sizeof(buf), PVST_HEAD, ",\"uid\":\"00000000-0000-4000-8000-000000000000\"",
	         ",\"status\":{\"phase\":\"Ready\"}");
	tu_write(d, "o.json", buf);
	expect_run(applys, 1, false, NULL, "Error from server (Conflict): ");
	expect_run(get, 0, false, "exportSpec", NULL);

	/* missing object, kind without status, unsupported subresource */
	tu_write(d, "o.json",
	         "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarVolumeState\","
	         "\"metadata\":{\"name\":\"pvc-2\"},\"status\":{\"phase\":\"Ready\"}}");
	expect_run(applys, 1, false, NULL, "Error from server (NotFound): ");
	tu_write(d, "o.json",
	         "{\"apiVersion\":\"storage.k8s.io/v1\",\"kind\":\"CSINode\","
	         "\"metadata\":{\"name\":\"node-a\"},\"status\":{}}");
	expect_run(applys, 1, true, NULL,
	           "error: csinodes.storage.k8s.io has no status subresource\n");
	const char *scale[] = {bin(), "apply", "-f", file, storeflag, "--subresource=scale", NULL};
	expect_run(scale, 1, true, NULL,
	           "error: --subresource \"scale\" is not supported; the only "
	           "subresource is \"status\"\n");
	tu_rmtree(d);
#undef PVST_HEAD
}
END_TEST

/* ---- get of a long list ------------------------------------------------------------------- */

#define LONG_N 1100

/* Object i of the long list: its name and target; 700 and 1050 are wider than the others, so
 * the columns widen in a later chunk. */
static void long_cells(int i, char name[64], char target[64])
{
	snprintf(name, 64, "pvc-%04d%s", i,
	         i == 700    ? "-with-a-much-longer-name"
	         : i == 1050 ? "-longer"
	                     : "");
	snprintf(target, 64, "storage-%d%s", i % 3, i == 700 ? "-far-away" : "");
}

static void seed_long(const char *d)
{
	for (int i = 0; i < LONG_N; i++) {
		char name[64], target[64], file[128], text[1024];
		long_cells(i, name, target);
		snprintf(file, sizeof(file), "store/pillarvolumestates/%s.json", name);
		snprintf(
		    text, sizeof(text),
		    "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":"
		    "\"PillarVolumeState\",\"metadata\":{\"name\":\"%s\",\"uid\":\"u-%d\","
		    "\"labels\":{\"pillar-csi.bhyoo.com/agent\":\"%s\"},\"resourceVersion\":"
		    "\"%d\",\"generation\":1,\"creationTimestamp\":\"2000-01-01T00:00:00Z\"},"
		    "\"spec\":{\"volumeID\":\"%s/file/nvmeof-tcp/p/%s\",\"agentVolumeID\":\"p/%s\","
		    "\"agentRef\":\"%s\",\"backendType\":\"file\",\"protocolType\":\"nvmeof-tcp\","
		    "\"capacityBytes\":1048576},\"status\":{\"phase\":\"%s\"}}",
		    name, i, target, i + 1, target, name, name, target,
		    i % 4 ? "Ready" : "Pending");
		tu_write(d, file, text);
	}
}

/* The table kubectl's printer makes of the long list in chunks of chunk rows (0: one chunk):
 * each chunk is padded to the widest cell of its header and of every row up to its end. */
static char *long_table(size_t chunk)
{
	static const char *hdr[6] = {"NAME", "PHASE", "TARGET", "BACKEND", "PROTOCOL", "AGE"};
	size_t width[6], len = 0;
	char *text = NULL, age[32];
	FILE *f = open_memstream(&text, &len);
	cli_age("2000-01-01T00:00:00Z", (long long)time(NULL), age, sizeof(age));
	for (int c = 0; c < 6; c++)
		width[c] = strlen(hdr[c]);
	for (int start = 0; start < LONG_N; start += chunk ? (int)chunk : LONG_N) {
		int end = chunk && start + (int)chunk < LONG_N ? start + (int)chunk : LONG_N;
		char name[64], target[64];
		for (int i = start; i < end; i++) {
			long_cells(i, name, target);
			width[0] = strlen(name) > width[0] ? strlen(name) : width[0];
			width[2] = strlen(target) > width[2] ? strlen(target) : width[2];
			width[1] = i % 4 == 0 && width[1] < 7 ? 7 : width[1]; /* Pending */
			width[4] = strlen("nvmeof-tcp");
		}
		if (start == 0)
			fprintf(f, "%-*s   %-*s   %-*s   %-*s   %-*s   %s\n", (int)width[0], hdr[0],
			        (int)width[1], hdr[1], (int)width[2], hdr[2], (int)width[3], hdr[3],
			        (int)width[4], hdr[4], hdr[5]);
		for (int i = start; i < end; i++) {
			long_cells(i, name, target);
			fprintf(f, "%-*s   %-*s   %-*s   %-*s   %-*s   %s\n", (int)width[0], name,
			        (int)width[1], i % 4 ? "Ready" : "Pending", (int)width[2], target,
			        (int)width[3], "file", (int)width[4], "nvmeof-tcp", age);
		}
	}
	fclose(f);
	return text;
}

/* -o json of the list as model_kpath_json prints the whole List (the output before get
 * streamed it). */
static char *long_json(const char *dir, const char *selector)
{
	store *s;
	void *items, *doc;
	size_t n;
	char *text = NULL;
	ck_assert_int_eq(store_open_url(dir, false, &s, NULL), 0);
	ck_assert_int_eq(model_list(s, &model_pvst_kind, NULL, selector, &items, &n, NULL, NULL),
	                 0);
	ck_assert_ptr_nonnull(doc = model_kpath_doc(&model_pvst_kind, items, n, false));
	ck_assert_int_eq(model_kpath_json(doc, &text), 0);
	model_kpath_doc_free(doc);
	model_list_free(&model_pvst_kind, items, n);
	store_close(s);
	return text;
}

/* `get` of a list longer than a chunk: the table is kubectl's chunked table for the default 500
 * rows, any --chunk-size and 0 (one table), -o json is the whole List byte for byte, and a
 * label selector's rows are chunked the same way. */
START_TEST(test_get_long_list)
{
	char d[512], storeflag[600], file[600], url[600];
	struct exec_result r;
	scratch(d, storeflag, file, "unused");
	snprintf(url, sizeof(url), "dir:%s/store", d);
	seed_long(d);
	static const struct {
		const char *flag;
		size_t chunk;
	} tables[] = {
	    {NULL, 500}, {"--chunk-size=7", 7}, {"--chunk-size=0", 0}, {"--chunk-size=2000", 0}};
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		const char *get[] = {bin(), "get", "pvst", storeflag, tables[i].flag, NULL};
		char *want = long_table(tables[i].chunk);
		ck_assert_int_eq(run(&r, get), 0);
		ck_assert_msg(strcmp(r.out, want) == 0, "%s: got %zu bytes, want %zu:\n%.400s",
		              tables[i].flag ? tables[i].flag : "default", strlen(r.out),
		              strlen(want), r.out);
		free(want);
		exec_result_free(&r);
	}
	const char *json[] = {bin(), "get", "pvst", "-o", "json", storeflag, NULL};
	char *want = long_json(url, NULL);
	expect_run(json, 0, true, want, NULL);
	free(want);
	const char *sel[] = {
	    bin(),     "get", "pvst", "-o", "json", "-l", "pillar-csi.bhyoo.com/agent=storage-1",
	    storeflag, NULL};
	want = long_json(url, "pillar-csi.bhyoo.com/agent=storage-1");
	expect_run(sel, 0, true, want, NULL); /* so what follows holds of its output */
	ck_assert_ptr_nonnull(strstr(want, "\"pvc-1099\""));
	ck_assert_ptr_null(strstr(want, "\"pvc-1098\""));
	free(want);
	const char *bad[] = {bin(), "get", "pvst", "--chunk-size=-1", storeflag, NULL};
	expect_run(bad, 2, true, NULL, "pillar-csi get: --chunk-size must be 0 or more\n");
	tu_rmtree(d);
}
END_TEST

/* An empty list is the empty List of kubectl -o json, and no table. */
START_TEST(test_get_empty_list)
{
	char d[512], storeflag[600], file[600];
	scratch(d, storeflag, file, "unused");
	const char *json[] = {bin(), "get", "pvst", "-o", "json", storeflag, NULL};
	expect_run(json, 0, true,
	           "{\n    \"apiVersion\": \"v1\",\n    \"items\": [],\n    \"kind\": "
	           "\"List\",\n    \"metadata\": {\n        \"resourceVersion\": "
	           "\"\"\n    }\n}\n",
	           NULL);
	const char *table[] = {bin(), "get", "pvst", storeflag, NULL};
	expect_run(table, 0, true, "", "No resources found\n");
	tu_rmtree(d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cli");
	TCase *t = tcase_create("cli");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_jsonpath);
	tcase_add_test(t, test_age);
	tcase_add_test(t, test_verbs_through_the_binary);
	tcase_add_test(t, test_apply_status_subresource);
	tcase_add_test(t, test_apply_validate);
	tcase_add_test(t, test_get_long_list);
	tcase_add_test(t, test_get_empty_list);
	suite_add_tcase(s, t);
	return tu_run(s);
}
