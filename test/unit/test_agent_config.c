/* The agent's configuration file (agent-api.md §11.2, docs/agent-config.md) against fixtures:
 * every file under test/unit/fixtures/agent-config/ is parsed and the result — the backends
 * read, or the error with its exact message — must equal the text of the file's .want
 * companion byte for byte.  The messages are a contract users script against; whatever code
 * reads the file, these files must read the same. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/config.h"
#include "testutil.h"

#define FIXTURES "test/unit/fixtures/agent-config/"

/* The whole file at path (malloc'd, *len bytes, NUL-terminated for printing). */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	char *buf = NULL;
	size_t cap = 0, n = 0, got;
	do {
		if (n + 4096 + 1 > cap) {
			cap = (n + 4096 + 1) * 2;
			buf = realloc(buf, cap);
			ck_assert(buf != NULL);
		}
		got = fread(buf + n, 1, 4096, f);
		n += got;
	} while (got > 0);
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

static const char *errno_name(int r)
{
	switch (-r) {
	case EINVAL: return "EINVAL";
	case ENOMEM: return "ENOMEM";
	case EBADMSG: return "EBADMSG";
	default: return "other";
	}
}

static const char *text_or_null(const char *s)
{
	return s ? s : "(null)";
}

/* What the parser made of buf: "error <errno>: <message>\n", or one line per backend with
 * every member of struct backend_config. */
static void parse_result(const char *buf, size_t len, char *out, size_t cap)
{
	struct agent_config c;
	struct err e = {0};
	size_t at = 0;
	int r = agent_config_parse(buf, len, &c, &e);
	if (r < 0) {
		snprintf(out, cap, "error %s: %s\n", errno_name(r), e.msg);
		return;
	}
	ck_assert_uint_gt(c.n, 0);
	for (size_t i = 0; i < c.n && at < cap; i++) {
		const struct backend_config *b = &c.backends[i];
		at += (size_t)snprintf(
		    out + at, cap - at,
		    "backends[%zu]: %s pool=%s parent_dataset=%s thin_pool=%s thin_default=%s "
		    "directory=%s preallocate=%s\n",
		    i, backend_kind_name(b->kind), text_or_null(b->pool),
		    text_or_null(b->parent_dataset), text_or_null(b->thin_pool),
		    b->thin_default ? "true" : "false", text_or_null(b->directory),
		    b->preallocate ? "true" : "false");
	}
	ck_assert_uint_lt(at, cap);
	agent_config_clear(&c);
}

static int json_files(const struct dirent *d)
{
	size_t n = strlen(d->d_name);
	return n > 5 && strcmp(d->d_name + n - 5, ".json") == 0;
}

START_TEST(test_fixtures)
{
	struct dirent **names;
	int n = scandir(FIXTURES, &names, json_files, alphasort), failed = 0, ok = 0;
	ck_assert_msg(n > 100, "fixtures missing in " FIXTURES);
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX], got[16384];
		size_t len, want_len;
		snprintf(path, sizeof(path), FIXTURES "%s", names[i]->d_name);
		char *buf = slurp(path, &len);
		parse_result(buf, len, got, sizeof(got));
		snprintf(path + strlen(path) - 5, 6, ".want");
		char *want = slurp(path, &want_len);
		if (strcmp(got, want) != 0) {
			fprintf(stderr, "%s\n  want: %s  got:  %s", names[i]->d_name, want, got);
			failed++;
		}
		ok += strncmp(want, "error ", 6) != 0;
		free(want);
		free(buf);
		free(names[i]);
	}
	free(names);
	ck_assert_msg(failed == 0, "%d of %d fixtures read differently (listed above)", failed, n);
	ck_assert_msg(ok >= 10 && n - ok >= 90, "%d valid and %d invalid fixtures", ok, n - ok);
}
END_TEST

/* A file that cannot be read is named with the reason. */
START_TEST(test_unreadable)
{
	struct agent_config c;
	struct err e = {0};
	ck_assert_int_eq(agent_config_load("/nonexistent/config.json", &c, &e), -ENOENT);
	ck_assert_str_eq(e.msg,
	                 "config: cannot read /nonexistent/config.json: No such file or directory");
	ck_assert_uint_eq(c.n, 0);
	ck_assert_ptr_null(c.backends);
	ck_assert_int_eq(agent_config_load(FIXTURES "ok-docs-example.json", &c, &e), 0);
	ck_assert_uint_eq(c.n, 4);
	agent_config_clear(&c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent_config");
	TCase *t = tcase_create("files");
	tcase_add_test(t, test_fixtures);
	tcase_add_test(t, test_unreadable);
	suite_add_tcase(s, t);
	return tu_run(s);
}
