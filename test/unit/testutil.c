#include "testutil.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/config.h"
#include "base/json.h"
#include "store/store.h"

const char *tu_mkdtemp(void)
{
	static char path[PATH_MAX];
	const char *base = getenv("TMPDIR");
	snprintf(path, sizeof(path), "%s/pillar-unit.XXXXXX", base && *base ? base : "/tmp");
	ck_assert_msg(mkdtemp(path) != NULL, "mkdtemp: %s", strerror(errno));
	return path;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p);
}

void tu_rmtree(const char *path)
{
	if (path && *path)
		nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void tu_write(const char *dir, const char *name, const char *text)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	for (char *s = p + strlen(dir) + 1; *s; s++) {
		if (*s == '/') {
			*s = '\0';
			mkdir(p, 0755);
			*s = '/';
		}
	}
	FILE *f = fopen(p, "w");
	ck_assert_msg(f != NULL, "open %s: %s", p, strerror(errno));
	fputs(text, f);
	fclose(f);
}

const char *tu_read(const char *dir, const char *name)
{
	static char buf[65536];
	char p[PATH_MAX];
	size_t n = 0;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "r");
	buf[0] = '\0';
	if (!f)
		return buf;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

int tu_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

void tu_agent_layout(const char *root, struct agent_config *cfg)
{
	static const char *const dirs[] = {
	    "/cfs",  "/cfs/nvmet", "/cfs/nvmet/subsystems", "/cfs/nvmet/ports", "/cfs/nvmet/hosts",
	    "/files"};
	char p[4200], json[4400];
	struct err e = {0};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", root, dirs[i]);
		ck_assert_msg(mkdir(p, 0755) == 0, "mkdir %s: %s", p, strerror(errno));
	}
	snprintf(json, sizeof(json),
	         "{\"backends\":[{\"file\":{\"pool\":\"fpool\",\"directory\":\"%s/files\"}}]}",
	         root);
	ck_assert_msg(agent_config_parse(json, strlen(json), cfg, &e) == 0, "%s", e.msg);
}

void *tu_store_obj(const char *kind, const char *name, const char *spec_json)
{
	const struct store_kind *k = store_kind_lookup(kind);
	char buf[2048];
	cJSON *o = NULL;
	ck_assert_ptr_nonnull(k);
	snprintf(
	    buf, sizeof(buf),
	    "{\"apiVersion\":\"%s\",\"kind\":\"%s\",\"metadata\":{\"name\":\"%s\"},\"spec\":%s}",
	    k->api_version, k->kind, name, spec_json);
	ck_assert_int_eq(json_parse_strict(buf, strlen(buf), &o, NULL), 0);
	return o;
}

void tu_expect_event(void *watch, int t, const char *name, const char *field)
{
	store_watch *w = watch;
	enum store_event_type got;
	cJSON *o = NULL;
	struct err e = {0};
	int r = store_watch_next(w, 5000, &got, &o, &e);
	ck_assert_msg(r == 1, "no event (r=%d %s) while waiting for %d %s", r, e.msg, t, name);
	ck_assert_msg((int)got == t, "event %d for %s, expected %d for %s", got,
	              store_meta_str(o, "name"), t, name);
	ck_assert_str_eq(store_meta_str(o, "name"), name);
	ck_assert_ptr_nonnull(json_get_str(o, "kind"));
	if (field)
		ck_assert_ptr_nonnull(cJSON_GetObjectItem(o, field));
	cJSON_Delete(o);
}
