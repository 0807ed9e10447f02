#include "testutil.h"

#include <cjson/cJSON.h>
#include <dirent.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/config.h"
#include "base/file.h"
#include "base/json.h"
#include "base/log.h"
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

/* Names beside the two temporary files that a sweep keeps (regular files, content "keep"). */
static const char *const kept_names[] = {".rec.json.tmp.Ab3dE",
                                         ".rec.json.tmp.Ab3dE9x",
                                         "rec.json.tmp.Ab3dE9",
                                         ".tmp.Ab3dE9",
                                         "rec.txt",
                                         ".rec.json"};
static const char *const temp_names[] = {".rec.json.tmp.Ab3dE9", "..drained.tmp.a1B2c3"};

static const char *beside(const char *dir, const char *name)
{
	static char p[PATH_MAX];
	ck_assert(snprintf(p, sizeof(p), "%s/%s", dir, name) < (int)sizeof(p));
	return p;
}

void tu_leftovers_plant(const char *dir)
{
	char target[PATH_MAX];
	ck_assert(mkdir(dir, 0755) == 0 || errno == EEXIST);
	for (size_t i = 0; i < sizeof(temp_names) / sizeof(temp_names[0]); i++)
		tu_write(dir, temp_names[i], "{\"half\":");
	for (size_t i = 0; i < sizeof(kept_names) / sizeof(kept_names[0]); i++)
		tu_write(dir, kept_names[i], "keep");
	snprintf(target, sizeof(target), "%s.outside", dir);
	FILE *f = fopen(target, "w");
	ck_assert_ptr_nonnull(f);
	fputs("target", f);
	fclose(f);
	ck_assert_int_eq(symlink(target, beside(dir, ".link.json.tmp.Ab3dE9")), 0);
	ck_assert_int_eq(mkfifo(beside(dir, ".fifo.json.tmp.Ab3dE9"), 0600), 0);
	tu_write(dir, ".sub.json.tmp.Ab3dE9/.in.json.tmp.Ab3dE9", "below");
}

void tu_leftovers_check(const char *dir, int swept)
{
	struct stat st;
	char target[PATH_MAX];
	for (size_t i = 0; i < sizeof(temp_names) / sizeof(temp_names[0]); i++)
		ck_assert_msg((access(beside(dir, temp_names[i]), F_OK) != 0) == !!swept,
		              "%s/%s is %s", dir, temp_names[i], swept ? "left" : "gone");
	for (size_t i = 0; i < sizeof(kept_names) / sizeof(kept_names[0]); i++)
		ck_assert_msg(!strcmp(tu_read(dir, kept_names[i]), "keep"), "%s/%s is gone", dir,
		              kept_names[i]);
	ck_assert_int_eq(lstat(beside(dir, ".link.json.tmp.Ab3dE9"), &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	snprintf(target, sizeof(target), "%s.outside", dir);
	char text[16] = "";
	FILE *f = fopen(target, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fread(text, 1, sizeof(text) - 1, f), 6);
	fclose(f);
	ck_assert_str_eq(text, "target");
	ck_assert_int_eq(lstat(beside(dir, ".fifo.json.tmp.Ab3dE9"), &st), 0);
	ck_assert(S_ISFIFO(st.st_mode));
	ck_assert_str_eq(tu_read(dir, ".sub.json.tmp.Ab3dE9/.in.json.tmp.Ab3dE9"), "below");
}

static FILE *log_file;

void tu_log_begin(void)
{
	log_file = tmpfile();
	ck_assert_ptr_nonnull(log_file);
	log_set_fd(fileno(log_file));
}

const char *tu_log_end(void)
{
	static char buf[65536];
	log_set_fd(2);
	ck_assert_ptr_nonnull(log_file);
	rewind(log_file);
	size_t n = fread(buf, 1, sizeof(buf) - 1, log_file);
	buf[n] = '\0';
	fclose(log_file);
	log_file = NULL;
	return buf;
}

/* ---- power cuts ------------------------------------------------------------------------------ */

static void copy_file(const char *from_path, const char *to_path)
{
	FILE *from = fopen(from_path, "rb"), *to = fopen(to_path, "wb");
	ck_assert_msg(from && to, "copy %s to %s", from_path, to_path);
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), from)) > 0)
		ck_assert_uint_eq(fwrite(buf, 1, n, to), n);
	fclose(from);
	fclose(to);
}

static void durable_copy(const char *control, const char *d, char *copy, size_t cap)
{
	int k = snprintf(copy, cap, "%s.durable/", control);
	for (const char *c = d; *c && k < (int)cap - 1; c++)
		copy[k++] = *c == '/' ? '!' : *c;
	copy[k] = '\0';
}

/* Calls each(path in d, its path in the copy, its lstat) for each entry of d but "." and "..". */
static void each_entry(const char *d, const char *copy,
                       void (*each)(const char *p, const char *q, const struct stat *st,
                                    const char *name))
{
	char p[2000], q[2000];
	DIR *in = opendir(d);
	struct dirent *de;
	while (in && (de = readdir(in))) {
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", d, de->d_name);
		snprintf(q, sizeof(q), "%s/%s", copy, de->d_name);
		if (lstat(p, &st) == 0)
			each(p, q, &st, de->d_name);
	}
	if (in)
		closedir(in);
}

static void baseline_one(const char *p, const char *q, const struct stat *st, const char *name)
{
	if (S_ISREG(st->st_mode))
		copy_file(p, q);
	else if (S_ISDIR(st->st_mode) && name[0] != '.')
		mkdir(q, 0700);
}

void tu_durable_baseline(const char *control, const char *d)
{
	char copy[1400];
	snprintf(copy, sizeof(copy), "%s.durable", control);
	mkdir(copy, 0700);
	durable_copy(control, d, copy, sizeof(copy));
	ck_assert_int_eq(mkdir(copy, 0700), 0);
	each_entry(d, copy, baseline_one);
}

static void restore_one(const char *p, const char *q, const struct stat *st, const char *name)
{
	(void)name;
	if (!S_ISREG(st->st_mode))
		return;
	if (access(q, F_OK) != 0)
		ck_assert_int_eq(unlink(p), 0);
	else
		copy_file(q, p);
}

void tu_durable_restore(const char *control, const char *d)
{
	char copy[1400];
	durable_copy(control, d, copy, sizeof(copy));
	each_entry(d, copy, restore_one);
}

void tu_power_cut(const char *control, const char *acked, void (*work)(int acked_fd))
{
	int fd = open(acked, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
	ck_assert_int_ge(fd, 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		setenv("PILLAR_TEST_POWERCUT", control, 1);
		file_powercut_from_env();
		work(fd);
		_exit(3); /* never cut */
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	close(fd);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
	              "the child was not cut: status %d", status);
}

void tu_ack(int acked_fd, int i)
{
	char line[32];
	snprintf(line, sizeof(line), "%d\n", i);
	if (write(acked_fd, line, strlen(line)) != (ssize_t)strlen(line))
		_exit(1);
}

int tu_acked_each(const char *acked, void (*check)(int i, void *arg), void *arg)
{
	FILE *f = fopen(acked, "r");
	int i, n = 0;
	ck_assert_msg(f != NULL, "%s: %s", acked, strerror(errno));
	while (fscanf(f, "%d", &i) == 1) {
		check(i, arg);
		n++;
	}
	fclose(f);
	return n;
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

void *tu_store_agent(const char *name, size_t pad)
{
	const struct store_kind *k = store_kind_lookup("pa");
	char *buf = malloc(pad + 512);
	cJSON *o = NULL;
	ck_assert_ptr_nonnull(k);
	ck_assert_ptr_nonnull(buf);
	int n = snprintf(buf, 512,
	                 "{\"apiVersion\":\"%s\",\"kind\":\"%s\",\"metadata\":{\"name\":"
	                 "\"%s\"},\"spec\":{\"pad\":\"",
	                 k->api_version, k->kind, name);
	ck_assert(n > 0 && n < 500);
	memset(buf + n, 'x', pad);
	strcpy(buf + n + pad, "\"}}");
	ck_assert_int_eq(json_parse_strict(buf, strlen(buf), &o, NULL), 0);
	free(buf);
	return o;
}

void tu_store_create_agent(void *into, const char *name, size_t pad)
{
	struct err e = {0};
	cJSON *o = tu_store_agent(name, pad);
	ck_assert_msg(store_create(into, o, NULL, &e) == 0, "%s", e.msg);
	cJSON_Delete(o);
}

void tu_store_update_agent(void *s, const char *name, int pad)
{
	struct err e = {0};
	cJSON *cur = NULL;
	ck_assert(pad >= 0 && pad <= 32);
	ck_assert_msg(store_get(s, store_kind_lookup("pa"), NULL, name, &cur, &e) == 0, "%s", e.msg);
	cJSON *spec = cJSON_GetObjectItem(cur, "spec");
	cJSON_ReplaceItemInObject(
	    spec, "pad", cJSON_CreateString("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" + 32 - pad));
	ck_assert_msg(store_update(s, cur, NULL, &e) == 0, "%s", e.msg);
	cJSON_Delete(cur);
}

int tu_store_agent_pad(void *s, const char *name)
{
	cJSON *o = NULL;
	struct err e = {0};
	int r = store_get(s, store_kind_lookup("pa"), NULL, name, &o, &e);
	ck_assert_msg(r == 0 || r == STORE_NOT_FOUND, "%s", e.msg);
	if (r < 0)
		return -1;
	const cJSON *pad = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "spec"), "pad");
	int n = cJSON_IsString(pad) ? (int)strlen(pad->valuestring) : -2;
	cJSON_Delete(o);
	return n;
}

void tu_store_foreign_boot(const char *dir, int seq)
{
	char p[PATH_MAX], mark[64];
	snprintf(p, sizeof(p), "%s/.oplock", dir);
	snprintf(mark, sizeof(mark), "J another-boot %020d\n", seq);
	int fd = open(p, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, mark, strlen(mark), 256), (ssize_t)strlen(mark));
	close(fd);
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
