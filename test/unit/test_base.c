/* Unit tests of src/base: klog line format, flags, durable files, strict JSON, exec. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/exec.h"
#include "base/file.h"
#include "base/flags.h"
#include "base/hash.h"
#include "base/json.h"
#include "base/keylock.h"
#include "base/log.h"
#include "base/stop.h"
#include "base/str.h"
#include "base/time.h"
#include "base/yaml.h"
#include "testutil.h"

/* Calls of getpid and read made while counting is set (the tests that count set it). */
static atomic_bool counting;
static atomic_int getpids, reads;

pid_t getpid(void)
{
	static pid_t (*real)(void);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "getpid");
	if (atomic_load(&counting))
		atomic_fetch_add(&getpids, 1);
	return real();
}

ssize_t read(int fd, void *buf, size_t n)
{
	static ssize_t (*real)(int, void *, size_t);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "read");
	if (atomic_load(&counting))
		atomic_fetch_add(&reads, 1);
	return real(fd, buf, n);
}

/* ---- log ---------------------------------------------------------------------------------- */

static size_t fmt_line(char *buf, size_t cap, char sev, const char *msg, ...)
{
	struct timespec ts = {0};
	struct tm tm = {.tm_year = 126,
	                .tm_mon = 11,
	                .tm_mday = 2,
	                .tm_hour = 11,
	                .tm_min = 23,
	                .tm_sec = 45,
	                .tm_isdst = -1};
	va_list ap;
	size_t n;
	ts.tv_sec = mktime(&tm);
	ts.tv_nsec = 123456789;
	va_start(ap, msg);
	n = log_format(buf, cap, sev, &ts, 1234, "src/base/x.c", 42, msg, ap);
	va_end(ap);
	return n;
}

START_TEST(test_log_klog_layout)
{
	char buf[512];
	fmt_line(buf, sizeof(buf), 'I', "volume created", "volume", "pool/pvc-1", "size",
	         "1073741824", (const char *)NULL);
	ck_assert_str_eq(buf, "I1202 11:23:45.123456    1234 x.c:42] \"volume created\" "
	                      "volume=\"pool/pvc-1\" size=\"1073741824\"\n");
}
END_TEST

START_TEST(test_log_escapes_and_severity)
{
	char buf[512];
	fmt_line(buf, sizeof(buf), 'E', "bad \"input\"", "err", "line1\nline2\t\\\x01",
	         (const char *)NULL);
	ck_assert_str_eq(buf, "E1202 11:23:45.123456    1234 x.c:42] \"bad \\\"input\\\"\" "
	                      "err=\"line1\\nline2\\t\\\\\\x01\"\n");
}
END_TEST

START_TEST(test_log_truncation_keeps_one_line)
{
	char buf[48];
	size_t n = fmt_line(buf, sizeof(buf), 'W', "a long message that does not fit in the buffer",
	                    (const char *)NULL);
	ck_assert_uint_gt(n, sizeof(buf));
	ck_assert_uint_eq(strlen(buf), sizeof(buf) - 1);
	ck_assert_int_eq(buf[sizeof(buf) - 2], '\n');
	ck_assert_ptr_eq(strchr(buf, '\n'), buf + sizeof(buf) - 2);
}
END_TEST

START_TEST(test_log_emit_writes_to_fd)
{
	int p[2];
	char buf[512] = {0};
	ck_assert_int_eq(pipe(p), 0);
	log_set_fd(p[1]);
	log_info("hello", "k", "v");
	log_set_verbosity(1);
	log_v(2, "hidden");
	log_v(1, "shown");
	log_set_fd(2);
	log_set_verbosity(0);
	close(p[1]);
	ck_assert_int_gt(read(p[0], buf, sizeof(buf) - 1), 0);
	close(p[0]);
	ck_assert_int_eq(buf[0], 'I');
	ck_assert_ptr_nonnull(strstr(buf, "test_base.c:"));
	ck_assert_ptr_nonnull(strstr(buf, "] \"hello\" k=\"v\"\n"));
	ck_assert_ptr_null(strstr(buf, "hidden"));
	ck_assert_ptr_nonnull(strstr(buf, "\"shown\""));
}
END_TEST

/* The process ID of a line (klog layout: severity+date, time, pid, ...). */
static long line_pid(const char *text, const char *msg)
{
	const char *m = strstr(text, msg);
	long pid = -1;
	ck_assert_ptr_nonnull(m);
	while (m > text && m[-1] != '\n')
		m--;
	ck_assert_int_eq(sscanf(m, "%*s %*s %ld", &pid), 1);
	return pid;
}

/* Every line carries the process ID, asked of the kernel once per process; a forked child's
 * lines carry its own. */
START_TEST(test_log_pid_asked_once)
{
	int p[2];
	char buf[2048] = {0};
	ck_assert_int_eq(pipe(p), 0);
	log_set_fd(p[1]);
	log_info("first");
	atomic_store(&getpids, 0);
	atomic_store(&counting, true);
	log_info("second");
	log_info("third");
	atomic_store(&counting, false);
	int asked = atomic_load(&getpids);
	ck_assert_int_eq(asked, 0);
	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		log_info("from the child");
		_exit(0);
	}
	ck_assert_int_eq(waitpid(child, NULL, 0), child);
	log_set_fd(2);
	close(p[1]);
	for (size_t n = 0; n < sizeof(buf) - 1;) {
		ssize_t r = read(p[0], buf + n, sizeof(buf) - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(p[0]);
	ck_assert_int_eq(line_pid(buf, "\"third\""), getpid());
	ck_assert_int_eq(line_pid(buf, "\"from the child\""), child);
}
END_TEST

/* ---- flags -------------------------------------------------------------------------------- */

struct fx {
	const char *addr;
	const char *cfg;
	bool leader;
	int64_t port;
	int64_t grace;
};

static int parse(struct fx *x, struct err *e, int *first, int argc, ...)
{
	char *argv[16];
	va_list ap;
	const struct flag_def defs[] = {
	    {"listen-address", FLAG_STRING, &x->addr, "address", false},
	    {"config", FLAG_STRING, &x->cfg, "config file", false},
	    {"leader-elect", FLAG_BOOL, &x->leader, "leader", false},
	    {"port", FLAG_INT, &x->port, "port", false},
	    {"grace", FLAG_DURATION, &x->grace, "grace", false},
	};
	argv[0] = "prog";
	va_start(ap, argc);
	for (int i = 1; i < argc; i++)
		argv[i] = va_arg(ap, char *);
	va_end(ap);
	return flags_parse("prog", defs, 5, argc, argv, first, e);
}

START_TEST(test_flags_forms)
{
	struct fx x = {":9500", NULL, false, 1, 5000};
	struct err e = {0};
	int first;
	ck_assert_int_eq(parse(&x, &e, &first, 7, "--listen-address=127.0.0.1:1", "--config",
	                       "/c.json", "--leader-elect", "--port=42", "--grace=1m30s"),
	                 FLAGS_OK);
	ck_assert_str_eq(x.addr, "127.0.0.1:1");
	ck_assert_str_eq(x.cfg, "/c.json");
	ck_assert(x.leader);
	ck_assert_int_eq(x.port, 42);
	ck_assert_int_eq(x.grace, 90000);
	ck_assert_int_eq(first, 7);
	ck_assert_int_eq(parse(&x, &e, &first, 3, "--leader-elect=false", "pos"), FLAGS_OK);
	ck_assert(!x.leader);
	ck_assert_int_eq(first, 2);
	ck_assert_int_eq(parse(&x, &e, &first, 4, "--port=7", "--", "--config"), FLAGS_OK);
	ck_assert_int_eq(first, 3);
}
END_TEST

START_TEST(test_flags_errors)
{
	struct fx x = {":9500", NULL, false, 1, 5000};
	struct err e = {0};
	int first;
	ck_assert_int_eq(parse(&x, &e, &first, 2, "--bogus=1"), -EINVAL);
	ck_assert_str_eq(e.msg, "prog: unknown flag --bogus; accepted: --listen-address, --config, "
	                        "--leader-elect, --port, --grace, --help, --version, --v");
	ck_assert_int_eq(parse(&x, &e, &first, 2, "--config"), -EINVAL);
	ck_assert_str_eq(e.msg, "prog: flag --config needs a value");
	ck_assert_int_eq(parse(&x, &e, &first, 2, "--port=12x"), -EINVAL);
	ck_assert_str_eq(e.msg, "prog: --port takes an integer, not \"12x\"");
	ck_assert_int_eq(parse(&x, &e, &first, 2, "--grace=5 s"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "--grace takes a duration"));
	ck_assert_int_eq(parse(&x, &e, &first, 2, "--leader-elect=maybe"), -EINVAL);
	ck_assert_int_eq(parse(&x, &e, &first, 2, "--v=99"), -EINVAL);
	ck_assert_int_eq(parse(&x, &e, &first, 2, "--help"), FLAGS_HELP);
	/* --help and --version are bools like the others */
	ck_assert_int_eq(parse(&x, &e, &first, 2, "--help=maybe"), -EINVAL);
	ck_assert_str_eq(e.msg, "prog: --help takes true or false, not \"maybe\"");
	ck_assert_int_eq(parse(&x, &e, &first, 2, "--help=true"), FLAGS_HELP);
	ck_assert_int_eq(parse(&x, &e, &first, 2, "--version=false"), FLAGS_OK);
	ck_assert_int_eq(parse(&x, &e, &first, 2, "--version"), FLAGS_VERSION);
}
END_TEST

START_TEST(test_flags_required_and_verbosity)
{
	const char *cfg = NULL;
	const struct flag_def defs[] = {{"config", FLAG_STRING, &cfg, "config", true}};
	char *argv1[] = {"p", "--v=3"};
	char *argv2[] = {"p", "--config=/x", "--v", "4"};
	struct err e = {0};
	ck_assert_int_eq(flags_parse("p", defs, 1, 2, argv1, NULL, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "p: flag --config is required");
	ck_assert_int_eq(flags_parse("p", defs, 1, 4, argv2, NULL, &e), FLAGS_OK);
	ck_assert_int_eq(log_verbosity(), 4);
	log_set_verbosity(0);
}
END_TEST

START_TEST(test_flags_mixed_positionals)
{
	const char *out = "table", *store = NULL;
	const struct flag_def defs[] = {
	    {"o", FLAG_STRING, &out, "output", false},
	    {"store", FLAG_STRING, &store, "store", false},
	};
	char *argv[] = {"get", "pa", "-o", "json", "name-1", "--store=dir:/s", "--", "-x"};
	char *pos[8];
	int npos = -1;
	struct err e = {0};
	ck_assert_int_eq(flags_parse_mixed("get", defs, 2, 8, argv, pos, &npos, &e), FLAGS_OK);
	ck_assert_int_eq(npos, 3);
	ck_assert_str_eq(pos[0], "pa");
	ck_assert_str_eq(pos[1], "name-1");
	ck_assert_str_eq(pos[2], "-x");
	ck_assert_str_eq(out, "json");
	ck_assert_str_eq(store, "dir:/s");
}
END_TEST

/* A one-letter flag is named as it is typed (-o, kubectl's shorthand), never --o: in the list of
 * accepted flags, in its errors and in the usage; klog's verbosity stays --v. */
START_TEST(test_flags_short_names)
{
	const char *out = NULL, *store = NULL;
	const struct flag_def defs[] = {
	    {"o", FLAG_STRING, &out, "output", false},
	    {"store", FLAG_STRING, &store, "store", true},
	};
	char *bogus[] = {"get", "-x"}, *novalue[] = {"get", "--store=kube", "-o"},
	     *missing[] = {"get", "-o", "json"};
	char *pos[4];
	int npos = 0;
	struct err e = {0};
	ck_assert_int_eq(flags_parse_mixed("get", defs, 2, 2, bogus, pos, &npos, &e), -EINVAL);
	ck_assert_str_eq(e.msg,
	                 "get: unknown flag -x; accepted: -o, --store, --help, --version, --v");
	npos = 0;
	ck_assert_int_eq(flags_parse_mixed("get", defs, 2, 3, novalue, pos, &npos, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "get: flag -o needs a value");
	npos = 0;
	ck_assert_int_eq(flags_parse_mixed("get", defs, 2, 3, missing, pos, &npos, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "get: flag --store is required");
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	ck_assert_ptr_nonnull(f);
	flags_usage(f, "get", "Gets.", defs, 2);
	fclose(f);
	ck_assert_ptr_nonnull(strstr(text, "\n  -o string\n"));
	ck_assert_ptr_nonnull(strstr(text, "\n  --store string\n"));
	ck_assert_ptr_nonnull(strstr(text, "\n  --v int\n"));
	ck_assert_ptr_null(strstr(text, "--o"));
	free(text);
}
END_TEST

START_TEST(test_str_quote)
{
	char b[64];
	ck_assert_str_eq(str_quote(b, sizeof(b), "vol-1", 63), "\"vol-1\"");
	ck_assert_str_eq(str_quote(b, sizeof(b), "a\x1b[2J\"\\\n\t\r\x7f\xff", 63),
	                 "\"a\\x1b[2J\\\"\\\\\\n\\t\\r\\x7f\\xff\"");
	ck_assert_str_eq(str_quote(b, sizeof(b), "abcdef", 3), "\"abc\"...");
	ck_assert_str_eq(str_quote(b, sizeof(b), NULL, 3), "\"\"");
	ck_assert_str_eq(str_quote(b, 12, "\x01\x02", 63), "\"\\x01\"..."); /* cut to fit */
	ck_assert_str_eq(str_quote(b, 5, "x", 63), "");
}
END_TEST

START_TEST(test_flags_durations)
{
	int64_t ms;
	ck_assert_int_eq(flags_parse_duration("5s", &ms), 0);
	ck_assert_int_eq(ms, 5000);
	ck_assert_int_eq(flags_parse_duration("1h2m3s", &ms), 0);
	ck_assert_int_eq(ms, 3723000);
	ck_assert_int_eq(flags_parse_duration("250ms", &ms), 0);
	ck_assert_int_eq(ms, 250);
	ck_assert_int_eq(flags_parse_duration("30", &ms), 0);
	ck_assert_int_eq(ms, 30000);
	ck_assert_int_eq(flags_parse_duration("-1s", &ms), -EINVAL);
	ck_assert_int_eq(flags_parse_duration("5x", &ms), -EINVAL);
	ck_assert_int_eq(flags_parse_duration("", &ms), -EINVAL);
	ck_assert_int_eq(flags_parse_duration("s", &ms), -EINVAL);
	/* Go's time.ParseDuration syntax: fractions, every unit, elements in any order */
	ck_assert_int_eq(flags_parse_duration("1h30m", &ms), 0);
	ck_assert_int_eq(ms, 5400000);
	ck_assert_int_eq(flags_parse_duration("1.5h", &ms), 0);
	ck_assert_int_eq(ms, 5400000);
	ck_assert_int_eq(flags_parse_duration("10m", &ms), 0);
	ck_assert_int_eq(ms, 600000);
	ck_assert_int_eq(flags_parse_duration(".5s", &ms), 0);
	ck_assert_int_eq(ms, 500);
	ck_assert_int_eq(flags_parse_duration("2m0.25s", &ms), 0);
	ck_assert_int_eq(ms, 120250);
	ck_assert_int_eq(flags_parse_duration("1500000us", &ms), 0);
	ck_assert_int_eq(ms, 1500);
	ck_assert_int_eq(flags_parse_duration("3000000ns", &ms), 0);
	ck_assert_int_eq(ms, 3);
	ck_assert_int_eq(flags_parse_duration("2\xc2\xb5s", &ms), 0); /* 2µs */
	ck_assert_int_eq(ms, 0);
	ck_assert_int_eq(flags_parse_duration("0.333333333333h", &ms), 0);
	ck_assert_int_eq(ms, 1199999);
	ck_assert_int_eq(flags_parse_duration("2562047h", &ms), 0); /* Go's largest whole hours */
	ck_assert_int_eq(flags_parse_duration("2562048h", &ms), -EINVAL);
	ck_assert_int_eq(flags_parse_duration("1.h", &ms), 0);
	ck_assert_int_eq(ms, 3600000);
	ck_assert_int_eq(flags_parse_duration(".s", &ms), -EINVAL);
	ck_assert_int_eq(flags_parse_duration("1h 30m", &ms), -EINVAL);
	ck_assert_int_eq(flags_parse_duration("+5s", &ms), -EINVAL);
	ck_assert_int_eq(flags_parse_duration("10", &ms), 0); /* a plain number: seconds */
	ck_assert_int_eq(ms, 10000);
}
END_TEST

START_TEST(test_flags_usage_from_table)
{
	const char *addr = ":9500";
	int64_t grace = 5000;
	const struct flag_def defs[] = {
	    {"listen-address", FLAG_STRING, &addr, "gRPC listen address", false},
	    {"shutdown-grace-period", FLAG_DURATION, &grace, "grace", false},
	};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	flags_usage(f, "pillar-csi agent", "Summary.", defs, 2);
	fclose(f);
	ck_assert_ptr_nonnull(strstr(buf, "Usage: pillar-csi agent [flags]\n\nSummary.\n"));
	ck_assert_ptr_nonnull(strstr(buf, "  --listen-address string\n        gRPC listen address "
	                                  "(default \":9500\")\n"));
	ck_assert_ptr_nonnull(
	    strstr(buf, "--shutdown-grace-period duration\n        grace (default 5s)"));
	ck_assert_ptr_nonnull(strstr(buf, "  --help\n"));
	free(buf);
}
END_TEST

/* ---- durable files and strict JSON -------------------------------------------------------- */

START_TEST(test_file_atomic_write_and_read)
{
	const char *d = tu_mkdtemp();
	char path[512], *buf;
	size_t len;
	struct stat st;
	snprintf(path, sizeof(path), "%s/rec.json", d);
	ck_assert_int_eq(file_write_atomic(path, "{\"a\":1}\n", 8, 0600, NULL), 0);
	ck_assert_int_eq(file_write_atomic(path, "{\"a\":2}\n", 8, 0640, NULL), 0);
	ck_assert_int_eq(file_read_all(path, 1024, &buf, &len, NULL), 0);
	ck_assert_str_eq(buf, "{\"a\":2}\n");
	ck_assert_uint_eq(len, 8);
	free(buf);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0640);
	/* no temporary file left behind */
	ck_assert_str_eq(tu_read(d, ".rec.json.tmp"), "");
	ck_assert_int_eq(file_read_all(path, 4, &buf, &len, NULL), -EFBIG);
	ck_assert_ptr_null(buf);
	tu_rmtree(d);
}
END_TEST

/* A file that its first read returns whole is read once: a short read is its end. */
START_TEST(test_file_read_ends_at_a_short_read)
{
	const char *d = tu_mkdtemp();
	char path[512], *buf;
	size_t len;
	snprintf(path, sizeof(path), "%s/rec.json", d);
	ck_assert_int_eq(file_write_atomic(path, "{\"a\":1}\n", 8, 0600, NULL), 0);
	atomic_store(&reads, 0);
	atomic_store(&counting, true);
	int r = file_read_all(path, 1024, &buf, &len, NULL);
	atomic_store(&counting, false);
	ck_assert_int_eq(r, 0);
	ck_assert_str_eq(buf, "{\"a\":1}\n");
	ck_assert_uint_eq(len, 8);
	int n = atomic_load(&reads);
	ck_assert_int_eq(n, 1);
	free(buf);
	ck_assert_int_eq(file_write_atomic(path, "", 0, 0600, NULL), 0);
	ck_assert_int_eq(file_read_all(path, 1024, &buf, &len, NULL), 0);
	ck_assert_str_eq(buf, "");
	free(buf);
	tu_rmtree(d);
}
END_TEST

/* file_temp_create: a new hidden name beside the target, the mode exact whatever the umask,
 * close-on-exec; a path naming no file or too long for the buffer is refused and leaves
 * nothing. */
START_TEST(test_file_temp_create)
{
	const char *d = tu_mkdtemp();
	char path[512], tmp[600], prefix[600];
	struct stat st;
	snprintf(path, sizeof(path), "%s/rec.json", d);
	mode_t old = umask(077);
	int fd = file_temp_create(path, 0644, tmp, sizeof(tmp));
	umask(old);
	ck_assert_int_ge(fd, 0);
	snprintf(prefix, sizeof(prefix), "%s/.rec.json.tmp.", d);
	ck_assert_int_eq(strncmp(tmp, prefix, strlen(prefix)), 0);
	ck_assert_uint_eq(strlen(tmp), strlen(prefix) + 6);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_int_eq(st.st_mode & 07777, 0644);
	ck_assert_int_eq(st.st_size, 0);
	ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
	ck_assert_int_eq(write(fd, "x", 1), 1);
	close(fd);
	/* a second one is another file */
	char tmp2[600];
	fd = file_temp_create(path, 0600, tmp2, sizeof(tmp2));
	ck_assert_int_ge(fd, 0);
	ck_assert_str_ne(tmp, tmp2);
	close(fd);
	unlink(tmp2);
	unlink(tmp);
	/* relative: beside it in the working directory */
	char cwd[512];
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	ck_assert_int_eq(chdir(d), 0);
	fd = file_temp_create("rec.json", 0600, tmp, sizeof(tmp));
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(strncmp(tmp, ".rec.json.tmp.", 14), 0);
	close(fd);
	ck_assert_int_eq(unlink(tmp), 0);
	ck_assert_int_eq(chdir(cwd), 0);
	snprintf(path, sizeof(path), "%s/", d);
	ck_assert_int_eq(file_temp_create(path, 0600, tmp, sizeof(tmp)), -EINVAL);
	snprintf(path, sizeof(path), "%s/rec.json", d);
	ck_assert_int_eq(file_temp_create(path, 0600, tmp, strlen(prefix) + 6), -ENAMETOOLONG);
	snprintf(path, sizeof(path), "%s/missing/rec.json", d);
	ck_assert_int_eq(file_temp_create(path, 0600, tmp, sizeof(tmp)), -ENOENT);
	DIR *dir = opendir(d);
	struct dirent *de;
	int names = 0;
	while ((de = readdir(dir)) != NULL)
		names += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(dir);
	ck_assert_int_eq(names, 0);
	tu_rmtree(d);
}
END_TEST

/* The names a sweep of leftovers takes: file_temp_create's and the spares, exactly. */
START_TEST(test_file_temp_names)
{
	static const char *const temps[] = {".rec.json.tmp.Ab3dE9", "..journal.tmp.a1B2c3",
	                                    ".x.tmp.000000", ".a.tmp.b.tmp.ZZZZZZ"};
	static const char *const others[] = {".rec.json.tmp.Ab3dE",
	                                     ".rec.json.tmp.Ab3dE9x",
	                                     ".rec.json.tmp.Ab-dE9",
	                                     "rec.json.tmp.Ab3dE9",
	                                     ".tmp.Ab3dE9",
	                                     "..tmp.Ab3dE9",
	                                     ".rec.json.tmpXAb3dE9",
	                                     ".rec.json.Ab3dE9",
	                                     "rec.json",
	                                     ".rec.json.tmp.Ab3dE9/",
	                                     ".spare",
	                                     ""};
	static const char *const spares[] = {FILE_SPARE, FILE_SPARE_PREV, FILE_SPARE ".0",
	                                     FILE_SPARE ".31", FILE_SPARE_PREV ".7"};
	static const char *const not_spares[] = {
	    FILE_SPARE ".", FILE_SPARE ".x",       FILE_SPARE ".1234",
	    FILE_SPARE "s", FILE_SPARE "x1",       FILE_SPARE_PREV ".",
	    "spare",        ".rec.json.tmp.Ab3dE9"};
	for (size_t i = 0; i < sizeof(temps) / sizeof(temps[0]); i++)
		ck_assert_msg(file_temp_name(temps[i]), "%s", temps[i]);
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
		ck_assert_msg(!file_temp_name(others[i]), "%s", others[i]);
	for (size_t i = 0; i < sizeof(spares) / sizeof(spares[0]); i++)
		ck_assert_msg(file_spare_name(spares[i]), "%s", spares[i]);
	for (size_t i = 0; i < sizeof(not_spares) / sizeof(not_spares[0]); i++)
		ck_assert_msg(!file_spare_name(not_spares[i]), "%s", not_spares[i]);
	/* what file_temp_create makes is such a name */
	const char *d = tu_mkdtemp();
	char path[512], tmp[600];
	snprintf(path, sizeof(path), "%s/rec.json", d);
	int fd = file_temp_create(path, 0600, tmp, sizeof(tmp));
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert(file_temp_name(strrchr(tmp, '/') + 1));
	tu_rmtree(d);
}
END_TEST

static bool spare_only(const char *name)
{
	return file_spare_name(name);
}

/* file_remove_temps removes the regular files of the pattern in the one directory, and nothing
 * else: not a look-alike name, a symlink of the pattern (nor its target), a directory or FIFO
 * of the pattern, a file below; it logs the count; a missing directory is 0. */
START_TEST(test_file_remove_temps)
{
	const char *d = tu_mkdtemp();
	char p[600];
	snprintf(p, sizeof(p), "%s/dir", d);
	tu_leftovers_plant(p);
	tu_write(p, FILE_SPARE ".3", "spare");
	tu_log_begin();
	ck_assert_int_eq(file_remove_temps(p, NULL), 2);
	ck_assert_int_eq(file_remove_temps(p, NULL), 0); /* nothing left of the pattern */
	const char *text = tu_log_end();
	ck_assert_msg(strstr(text, "removed temporary files of writes a killed process left") &&
	                  strstr(text, "count=\"2\""),
	              "%s", text);
	ck_assert_ptr_null(strstr(strstr(text, "count=") + 1, "count=")); /* none logged for 0 */
	tu_leftovers_check(p, 1);
	ck_assert_str_eq(tu_read(p, FILE_SPARE ".3"), "spare");
	/* another pattern: only its names */
	ck_assert_int_eq(file_remove_temps(p, spare_only), 1);
	ck_assert_str_eq(tu_read(p, FILE_SPARE ".3"), "");
	ck_assert_str_eq(tu_read(p, "rec.txt"), "keep");
	snprintf(p, sizeof(p), "%s/missing", d);
	ck_assert_int_eq(file_remove_temps(p, NULL), 0);
	tu_rmtree(d);
}
END_TEST

/* file_write_atomic_reuse: the replaced file's inode is the next write's temporary file (no
 * inode allocated for a write of an existing file), contents and modes are exact whatever the
 * old size, and a spare that another name links is never written into. */
START_TEST(test_file_atomic_write_reuses_inodes)
{
	const char *d = tu_mkdtemp();
	char a[512], b[512], spare[512], prev[512], *buf;
	struct stat st, s1;
	snprintf(a, sizeof(a), "%s/a.json", d);
	snprintf(b, sizeof(b), "%s/b.json", d);
	snprintf(spare, sizeof(spare), "%s/.spare", d);
	snprintf(prev, sizeof(prev), "%s/.spare.prev", d);
	ck_assert_int_eq(file_write_atomic_reuse(a, "first version\n", 14, 0644, &s1, NULL), 0);
	ck_assert_int_eq(
	    file_write_atomic_reuse(a, "second, longer version\n", 23, 0644, &st, NULL), 0);
	ck_assert_int_eq(file_write_atomic_reuse(a, "3\n", 2, 0600, &st, NULL), 0);
	ck_assert_uint_eq(st.st_ino, s1.st_ino); /* the first version's inode came back */
	ck_assert_int_eq(file_read_all(a, 1024, &buf, NULL, NULL), 0);
	ck_assert_str_eq(buf, "3\n");
	free(buf);
	ck_assert_int_eq(stat(a, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	ck_assert_uint_eq(st.st_nlink, 1);
	/* a spare linked to a live file (never made so, but checked): b stays whole */
	ck_assert_int_eq(file_write_atomic_reuse(b, "b\n", 2, 0644, NULL, NULL), 0);
	unlink(spare);
	ck_assert_int_eq(link(b, spare), 0);
	ck_assert_int_eq(file_write_atomic_reuse(a, "four\n", 5, 0644, NULL, NULL), 0);
	ck_assert_int_eq(file_read_all(b, 1024, &buf, NULL, NULL), 0);
	ck_assert_str_eq(buf, "b\n");
	free(buf);
	/* a write killed after keeping the replaced inode left prev linked to a: the next write
	 * of another file goes on, and a stays whole */
	unlink(prev);
	ck_assert_int_eq(link(a, prev), 0);
	ck_assert_int_eq(file_write_atomic_reuse(b, "b2\n", 3, 0644, NULL, NULL), 0);
	ck_assert_int_eq(file_write_atomic_reuse(b, "b3\n", 3, 0644, NULL, NULL), 0);
	ck_assert_int_eq(file_read_all(a, 1024, &buf, NULL, NULL), 0);
	ck_assert_str_eq(buf, "four\n");
	free(buf);
	ck_assert_int_eq(file_read_all(b, 1024, &buf, NULL, NULL), 0);
	ck_assert_str_eq(buf, "b3\n");
	free(buf);
	tu_rmtree(d);
}
END_TEST

/* file_write_atomic_grouped: contents and modes exact; the replaced inode comes back as the
 * spare once its replacement is durable, and a write leaves no slot name behind; a write in
 * another directory than the group's is durable too (its own fsync of that directory). */
START_TEST(test_file_atomic_write_grouped)
{
	static struct file_write_group g = FILE_WRITE_GROUP_INIT;
	const char *d = tu_mkdtemp();
	char a[512], b[512], sub[512], c[600], *buf;
	struct stat s1, st;
	snprintf(a, sizeof(a), "%s/a.mark", d);
	snprintf(b, sizeof(b), "%s/b.mark", d);
	ck_assert_int_eq(file_write_atomic_grouped(&g, a, "first\n", 6, 0600, NULL), 0);
	ck_assert_int_eq(stat(a, &s1), 0);
	ck_assert_int_eq(file_write_atomic_grouped(&g, a, "second, longer\n", 15, 0600, NULL), 0);
	ck_assert_int_eq(file_write_atomic_grouped(&g, b, "b\n", 2, 0640, NULL), 0);
	ck_assert_int_eq(stat(b, &st), 0);
	ck_assert_uint_eq(st.st_ino, s1.st_ino); /* a's first inode, a spare since */
	ck_assert_int_eq(st.st_mode & 0777, 0640);
	ck_assert_uint_eq(st.st_nlink, 1);
	ck_assert_int_eq(file_read_all(a, 64, &buf, NULL, NULL), 0);
	ck_assert_str_eq(buf, "second, longer\n");
	free(buf);
	ck_assert_int_eq(file_read_all(b, 64, &buf, NULL, NULL), 0);
	ck_assert_str_eq(buf, "b\n");
	free(buf);
	DIR *dir = opendir(d);
	struct dirent *de;
	while ((de = readdir(dir))) /* no .spare.<slot>, .spare.prev.<slot> (b took the spare) */
		ck_assert_msg(de->d_name[0] != '.' || !strcmp(de->d_name, ".") ||
		                  !strcmp(de->d_name, ".."),
		              "%s left", de->d_name);
	closedir(dir);
	/* a leftover slot file of a killed write, linked to a live file: never written into */
	char slot0[512];
	snprintf(slot0, sizeof(slot0), "%s/.spare.0", d);
	ck_assert_int_eq(link(b, slot0), 0);
	ck_assert_int_eq(unlink(b), 0);
	ck_assert_int_eq(link(slot0, b), 0);
	ck_assert_int_eq(file_write_atomic_grouped(&g, a, "3\n", 2, 0600, NULL), 0);
	ck_assert_int_eq(file_read_all(b, 64, &buf, NULL, NULL), 0);
	ck_assert_str_eq(buf, "b\n");
	free(buf);
	/* another directory */
	snprintf(sub, sizeof(sub), "%s/sub", d);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	snprintf(c, sizeof(c), "%s/c.mark", sub);
	ck_assert_int_eq(file_write_atomic_grouped(&g, c, "c\n", 2, 0600, NULL), 0);
	ck_assert_int_eq(file_read_all(c, 64, &buf, NULL, NULL), 0);
	ck_assert_str_eq(buf, "c\n");
	free(buf);
	/* a directory that does not exist: the error names the file, nothing is left */
	struct err e = {0};
	snprintf(c, sizeof(c), "%s/missing/c.mark", d);
	ck_assert_int_lt(file_write_atomic_grouped(&g, c, "c\n", 2, 0600, &e), 0);
	ck_assert_ptr_nonnull(strstr(e.msg, c));
	ck_assert_uint_eq(g.busy, 0);
	tu_rmtree(d);
}
END_TEST

START_TEST(test_file_failed_write_keeps_old)
{
	const char *d = tu_mkdtemp();
	char path[512], *buf;
	struct err e = {0};
	snprintf(path, sizeof(path), "%s/sub/rec", d);
	ck_assert_int_eq(file_write_atomic(path, "x", 1, 0600, &e), -ENOENT);
	ck_assert_ptr_nonnull(strstr(e.msg, "create temporary file"));
	ck_assert_ptr_nonnull(strstr(e.msg, path)); /* named after the file it was for */
	ck_assert_int_eq(file_mkdir_p(path, 0700, NULL), 0);
	/* a directory in the way: rename fails, the directory stays and no temp file remains */
	ck_assert_int_eq(file_write_atomic(path, "x", 1, 0600, &e), -EISDIR);
	ck_assert_int_eq(file_read_all(path, 10, &buf, NULL, &e), -EINVAL);
	ck_assert_int_eq(file_remove_durable(path, NULL), -EISDIR);
	tu_rmtree(d);
}
END_TEST

/* file_fsync_dir_group: callers that arrive while an fsync is in progress share the next one. */
#define GROUP_CALLERS 8
static struct file_dir_group group = FILE_DIR_GROUP_INIT;
static atomic_int group_fsyncs;

static void group_observe(const char *path)
{
	(void)path;
	/* the first fsync waits until every caller has begun: all of them then need one more */
	if (atomic_fetch_add(&group_fsyncs, 1) == 0)
		for (int i = 0; i < 30000; i++) {
			pthread_mutex_lock(&group.mu);
			bool all = group.requested == GROUP_CALLERS;
			pthread_mutex_unlock(&group.mu);
			if (all)
				break;
			usleep(1000);
		}
}

static void *group_caller(void *dir)
{
	return (void *)(intptr_t)file_fsync_dir_group(&group, dir, NULL);
}

START_TEST(test_file_fsync_dir_group_shares_fsyncs)
{
	const char *d = tu_mkdtemp();
	pthread_t t[GROUP_CALLERS];
	file_fsync_observer = group_observe;
	ck_assert_int_eq(pthread_create(&t[0], NULL, group_caller, (void *)d), 0);
	while (atomic_load(&group_fsyncs) == 0) /* the first caller's fsync has begun */
		usleep(1000);
	for (int i = 1; i < GROUP_CALLERS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, group_caller, (void *)d), 0);
	for (int i = 0; i < GROUP_CALLERS; i++) {
		void *r;
		pthread_join(t[i], &r);
		ck_assert_int_eq((int)(intptr_t)r, 0);
	}
	file_fsync_observer = NULL;
	/* the first caller's, and one for the seven that began during it */
	ck_assert_int_eq(atomic_load(&group_fsyncs), 2);
	ck_assert(group.done == GROUP_CALLERS && !group.running);
	/* a directory that cannot be opened: every caller gets the error */
	char missing[512];
	snprintf(missing, sizeof(missing), "%s/missing", d);
	struct err e = {0};
	ck_assert_int_eq(file_fsync_dir_group(&group, missing, &e), -ENOENT);
	ck_assert_ptr_nonnull(strstr(e.msg, missing));
	tu_rmtree(d);
}
END_TEST

START_TEST(test_json_strict_refuses_truncated_and_corrupt)
{
	const char *d = tu_mkdtemp();
	char path[512];
	cJSON *v = NULL;
	struct err e = {0};
	int64_t i;
	bool b;

	snprintf(path, sizeof(path), "%s/mark.json", d);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "volumeUID", "u-1");
	cJSON_AddNumberToObject(o, "generation", 7);
	cJSON_AddBoolToObject(o, "revoked", 1);
	ck_assert_int_eq(json_write_file(path, o, 0600, &e), 0);
	cJSON_Delete(o);
	ck_assert_int_eq(json_read_file(path, &v, &e), 0);
	ck_assert_str_eq(json_get_str(v, "volumeUID"), "u-1");
	ck_assert_int_eq(json_get_int64(v, "generation", &i), 0);
	ck_assert_int_eq(i, 7);
	ck_assert_int_eq(json_get_bool(v, "revoked", &b), 0);
	ck_assert(b);
	ck_assert_int_eq(json_get_int64(v, "volumeUID", &i), -EINVAL);
	ck_assert_int_eq(json_get_int64(v, "missing", &i), -ENOENT);
	ck_assert_ptr_null(json_get_str(v, "generation"));
	cJSON_Delete(v);

	/* truncated: the first half of a valid record */
	tu_write(d, "mark.json", "{\"volumeUID\":\"u-1\",\"gener");
	ck_assert_int_eq(json_read_file(path, &v, &e), -EBADMSG);
	ck_assert_ptr_null(v);
	ck_assert_ptr_nonnull(strstr(e.msg, "mark.json is corrupt: invalid JSON"));
	/* empty */
	tu_write(d, "mark.json", "");
	ck_assert_int_eq(json_read_file(path, &v, &e), -EBADMSG);
	/* two values */
	tu_write(d, "mark.json", "{} {}");
	ck_assert_int_eq(json_read_file(path, &v, &e), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(e.msg, "trailing data"));
	/* missing */
	ck_assert_int_eq(json_read_file("/nonexistent/x.json", &v, &e), -ENOENT);
	/* fractions and huge numbers are not integers */
	ck_assert_int_eq(json_parse_strict("{\"g\":1.5,\"h\":1e300}", 19, &v, &e), 0);
	ck_assert_int_eq(json_get_int64(v, "g", &i), -EINVAL);
	ck_assert_int_eq(json_get_int64(v, "h", &i), -EINVAL);
	cJSON_Delete(v);
	ck_assert_int_eq(json_parse_strict("{\"a\":\"x\0y\"}", 11, &v, &e), -EBADMSG);
	tu_rmtree(d);
}
END_TEST

/* ---- exec --------------------------------------------------------------------------------- */

START_TEST(test_exec_captures_and_exit_codes)
{
	struct exec_result r;
	const char *argv[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
	ck_assert_int_eq(exec_run(argv, NULL, &r, NULL), 0);
	ck_assert_int_eq(r.exit_code, 3);
	ck_assert_str_eq(r.out, "out\n");
	ck_assert_str_eq(r.err, "err\n");
	ck_assert(!r.timed_out);
	ck_assert_str_eq(exec_result_summary(&r), "err");
	exec_result_free(&r);
	exec_result_free(&r); /* twice is harmless */

	/* lvm2 prints its reason, then a usage hint: the summary is the reason */
	const char *lvm[] = {"sh", "-c",
	                     "printf '  Names starting \"snapshot\" are reserved. Please choose a "
	                     "different LV name.\\n  Run `lvcreate --help'\\'' for more "
	                     "information.\\n' >&2; exit 3",
	                     NULL};
	ck_assert_int_eq(exec_run(lvm, NULL, &r, NULL), 0);
	ck_assert_str_eq(exec_result_summary(&r),
	                 "  Names starting \"snapshot\" are reserved. Please choose a different LV "
	                 "name.");
	exec_result_free(&r);

	const char *ok[] = {"true", NULL};
	ck_assert_int_eq(exec_run(ok, NULL, &r, NULL), 0);
	ck_assert_int_eq(r.exit_code, 0);
	ck_assert_str_eq(r.out, "");
	exec_result_free(&r);
}
END_TEST

START_TEST(test_exec_timeout_kills_group)
{
	struct exec_result r;
	struct err e = {0};
	struct exec_opts o = {.timeout_ms = 300};
	/* the child starts a grandchild that would hold the pipe open for 30 s */
	const char *argv[] = {"sh", "-c", "sleep 30 & echo started; sleep 30", NULL};
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	ck_assert_int_eq(exec_run(argv, &o, &r, &e), -ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ck_assert(r.timed_out);
	ck_assert_int_eq(r.term_signal, SIGKILL);
	ck_assert_int_eq(r.exit_code, -1);
	ck_assert_str_eq(r.out, "started\n");
	ck_assert_ptr_nonnull(strstr(e.msg, "did not finish within 300 ms"));
	ck_assert_int_lt(b.tv_sec - a.tv_sec, 10);
	exec_result_free(&r);
}
END_TEST

START_TEST(test_exec_not_found_stdin_and_limits)
{
	struct exec_result r;
	struct err e = {0};
	const char *nf[] = {"pillar-no-such-command", NULL};
	ck_assert_int_eq(exec_run(nf, NULL, &r, &e), -ENOENT);
	ck_assert_str_eq(e.msg, "pillar-no-such-command: command not found");
	exec_result_free(&r);

	struct exec_opts o = {.stdin_data = "abc\n", .stdin_len = 4, .max_output = 2};
	const char *cat[] = {"cat", NULL};
	ck_assert_int_eq(exec_run(cat, &o, &r, NULL), 0);
	ck_assert_str_eq(r.out, "ab"); /* capped, and the child was not blocked */
	exec_result_free(&r);

	const char *sig[] = {"sh", "-c", "kill -TERM $$", NULL};
	ck_assert_int_eq(exec_run(sig, NULL, &r, NULL), 0);
	ck_assert_int_eq(r.term_signal, SIGTERM);
	exec_result_free(&r);

	const char *empty[] = {NULL};
	ck_assert_int_eq(exec_run(empty, NULL, &r, NULL), -EINVAL);
}
END_TEST

START_TEST(test_err_helpers)
{
	struct err e = {0};
	ck_assert_int_eq(err_set(&e, -EIO, "disk %d", 3), -EIO);
	err_prefix(&e, "create %s", "vol");
	ck_assert_str_eq(e.msg, "create vol: disk 3");
	ck_assert_int_eq(e.code, -EIO);
	ck_assert_int_eq(err_set(NULL, -EINVAL, "x"), -EINVAL);
	err_prefix(NULL, "x");
	err_clear(&e);
	ck_assert_str_eq(e.msg, "");
}
END_TEST

/* ---- str, time ------------------------------------------------------------------------------ */

/* A string is the bytes that were sent: NUL and malformed UTF-8 are faults, with their offset. */
START_TEST(test_str_check)
{
	static const struct {
		const char *s;
		size_t n;
		enum str_fault f;
		size_t at;
	} cases[] = {
	    {"", 0, STR_OK, 0},
	    {"pvc-1", 5, STR_OK, 5},
	    {"pvc-1\0junk", 10, STR_NUL, 5},
	    {"\xc3\xa9t\xc3\xa9", 5, STR_OK, 5},            /* été */
	    {"\xe2\x82\xac\xf0\x9f\x98\x80", 7, STR_OK, 7}, /* € and an emoji */
	    {"ab\xff", 3, STR_UTF8, 2},
	    {"a\xc0\xaf", 3, STR_UTF8, 1},        /* overlong '/' */
	    {"\xe0\x80\xaf", 3, STR_UTF8, 0},     /* overlong, 3 bytes */
	    {"\xed\xa0\x80", 3, STR_UTF8, 0},     /* a surrogate */
	    {"\xf4\x90\x80\x80", 4, STR_UTF8, 0}, /* above U+10FFFF */
	    {"x\xe2\x82", 3, STR_UTF8, 1},        /* cut short */
	    {"\xc3\xa9\x80", 3, STR_UTF8, 2},     /* a lone continuation byte */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t at = 99;
		ck_assert_msg(str_check(cases[i].s, cases[i].n, &at) == cases[i].f, "case %zu", i);
		ck_assert_uint_eq(at, cases[i].at);
	}
	ck_assert_str_eq(str_fault_text(STR_NUL), "contains a NUL byte");
	ck_assert_str_eq(str_fault_text(STR_UTF8), "is not valid UTF-8");
}
END_TEST

/* The checks read eight bytes at a time where they can: a fault is found at its own offset
 * wherever it stands against those words, and a string's end is found past any run of
 * backslashes (an odd run escapes the quote, an even one does not). */
START_TEST(test_checks_at_every_offset)
{
	static const char faults[] = {'\0', '\xff', '\x01'};
	for (size_t at = 0; at < 40; at++) {
		for (size_t f = 0; f < sizeof(faults); f++) {
			char text[64];
			memset(text, 'a', sizeof(text));
			text[at] = faults[f];
			size_t where = 99;
			enum str_fault got = str_check(text, 48, &where);
			ck_assert_int_eq(got, f == 0 ? STR_NUL : f == 1 ? STR_UTF8 : STR_OK);
			ck_assert_uint_eq(where, f == 2 ? 48 : at);
			/* {"x":"aaa...<fault>...aaa"} */
			char json[64] = "{\"x\":\"";
			memcpy(json + 6, text, 48);
			memcpy(json + 54, "\"}", 2);
			cJSON *v = NULL;
			struct err e = {0};
			ck_assert_int_eq(json_parse_strict(json, 56, &v, &e), -EBADMSG);
			ck_assert_ptr_null(v);
		}
	}
	for (int run = 0; run < 12; run++) {
		/* {"k":"<run backslashes, then a quote when run is odd>x","n":9007199254740993} */
		char json[128] = "{\"k\":\"";
		size_t n = strlen(json);
		for (int i = 0; i < run; i++)
			json[n++] = '\\';
		if (run % 2)
			json[n++] = '"';
		n += (size_t)snprintf(json + n, sizeof(json) - n, "x\",\"n\":9007199254740993}");
		cJSON *v = NULL;
		struct err e = {0};
		int64_t i = 0;
		ck_assert_msg(json_parse_strict(json, n, &v, &e) == 0, "%s: %s", json, e.msg);
		ck_assert_int_eq(json_get_int64(v, "n", &i), 0);
		ck_assert_int_eq(i, 9007199254740993LL);
		cJSON_Delete(v);
	}
}
END_TEST

/* cJSON turns \u0000 into the end of the C string: {"name":"a\u0000b"} would read as "a". */
START_TEST(test_json_strings_as_sent)
{
	static const struct {
		const char *text, *msg;
	} bad[] = {
	    {"{\"metadata\":{\"name\":\"pvc-1\\u0000junk\"}}",
	     "field metadata.name contains a NUL byte (byte 26)"},
	    {"{\"spec\":{\"pools\":[{\"name\":\"a\"},{\"name\":\"b\\u0000\"}]}}",
	     "field spec.pools[1].name contains a NUL byte"},
	    {"{\"a\":[1,[2,\"\\u0000\"]]}", "field a[1][1] contains a NUL byte"},
	    {"\"x\\u0000\"", "field (root) contains a NUL byte"},
	    {"{\"labels\":{\"a\\u0000b\":\"v\"}}", "a key of labels contains a NUL byte"},
	    {"{\"x\":\"\xff\"}", "field x is not valid UTF-8 (byte 6)"},
	    {"{\"k\\u00e9\xc3\":1}", "a key of (root) is not valid UTF-8"},
	    {"{\"x\":\"\\ud800\\udc00\\u0000\"}", "field x contains a NUL byte"},
	    /* cJSON reads a \u without four hex digits as \u0000 */
	    {"{\"name\":\"pvc-1\\uzzzzjunk\"}",
	     "field name contains an escape \\u without four hex digits (byte 14)"},
	    {"{\"a\":[\"\\u12g4\"]}", "field a[0] contains an escape \\u without four hex digits"},
	    {"{\"k\\u00e_x\":1}", "a key of (root) contains an escape \\u without four hex digits"},
	    /* raw control characters: RFC 8259 §7 has them escaped inside strings */
	    {"{\"spec\":{\"name\":\"a\x01"
	     "b\"}}",
	     "field spec.name contains a control character (byte 18)"},
	    {"{\"a\":[\"x\",\"line\nbreak\"]}", "field a[1] contains a control character"},
	    {"{\"k\tey\":1}", "a key of (root) contains a control character (byte 3)"},
	    {"{\"a\":\"\x1f\"}", "field a contains a control character (byte 6)"},
	    {"{\"a\":\x01\"b\"}", "invalid JSON: control character 0x01 at byte 5"},
	    {"[1,\x0c"
	     "2]",
	     "invalid JSON: control character 0x0c at byte 3"},
	};
	static const char *const good[] = {
	    "{\"x\":\"\\\\u0000\"}", /* a backslash, then the text u0000 */
	    "{\"x\":\"\\\\uzzzz\\u00E9\"}", /* a backslash, then the text uzzzz; é */
	    "{\"x\":\"\\u0001\\u00e9\xc3\xa9\"}",
	    "{\"x\\\"y\":\"a\\\"\",\"z\":[\"\\u0020\"]}",
	    "{\"x\":\"a\\nb\\t\\u001f\"}", /* escaped control characters are text */
	    "{\r\n\t\"x\" : [ 1 ,\n2 ]\n}\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cJSON *v = (cJSON *)1;
		struct err e = {0};
		ck_assert_int_eq(json_parse_strict(bad[i].text, strlen(bad[i].text), &v, &e),
		                 -EBADMSG);
		ck_assert_ptr_null(v);
		ck_assert_msg(strstr(e.msg, bad[i].msg), "case %zu: %s", i, e.msg);
		ck_assert(!json_text_checked(bad[i].text, strlen(bad[i].text)));
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		cJSON *v = NULL;
		struct err e = {0};
		ck_assert_msg(json_parse_strict(good[i], strlen(good[i]), &v, &e) == 0, "%s",
		              e.msg);
		cJSON_Delete(v);
	}
}
END_TEST

/* The API server's answers: a NUL byte is its own object's problem (json_parse_marked). */
START_TEST(test_json_marked)
{
	const char *list =
	    "{\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":"
	    "\"b\\u0000x\",\"annotations\":{\"k\":\"v\"}}},{\"metadata\":{\"labels\":"
	    "{\"k\\u0000\":\"\\\\u0000\"}}}]}";
	cJSON *v = NULL;
	struct err e = {0};
	char path[128];
	ck_assert_msg(json_parse_marked(list, strlen(list), &v, &e) == 0, "%s", e.msg);
	const cJSON *items = cJSON_GetObjectItem(v, "items");
	path[0] = '\0';
	ck_assert(!json_marked(cJSON_GetArrayItem(items, 0), path, sizeof(path)));
	ck_assert(json_marked(cJSON_GetArrayItem(items, 1), path, sizeof(path)));
	ck_assert_str_eq(path, "metadata.name");
	path[0] = '\0';
	ck_assert(json_marked(cJSON_GetArrayItem(items, 2), path, sizeof(path)));
	ck_assert_str_eq(path, "metadata.labels.?");
	path[0] = '\0';
	ck_assert(json_marked(v, path, sizeof(path)));
	ck_assert_str_eq(path, "items[1].metadata.name");
	/* the escaped backslash before u0000 is text, not a NUL */
	ck_assert_str_eq(
	    json_get_str(
	        cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(items, 2), "metadata"),
	                            "labels"),
	        "k\xef\xbf\xbf"),
	    "\\u0000");
	cJSON_Delete(v);
	/* text that holds U+FFFF already, or bytes that are not UTF-8: refused as a whole */
	static const char *const whole[] = {"{\"a\":\"\\u0000\",\"b\":\"\\uFFFF\"}",
	                                    "{\"a\":\"\\u0000\",\"b\":\"\xef\xbf\xbf\"}",
	                                    "{\"a\":\"\\u0000\",\"b\":\"\xff\"}"};
	for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++) {
		ck_assert_int_eq(json_parse_marked(whole[i], strlen(whole[i]), &v, &e), -EBADMSG);
		ck_assert_ptr_null(v);
	}
	/* without a NUL it is json_parse_strict */
	ck_assert_int_eq(json_parse_marked("{\"a\":1}", 7, &v, &e), 0);
	path[0] = '\0';
	ck_assert(!json_marked(v, path, sizeof(path)));
	cJSON_Delete(v);
}
END_TEST

/* YAML's "\0" escape would end the string the same way; keys are never cut to fit. */
START_TEST(test_yaml_strings_as_sent)
{
	cJSON *v = NULL;
	struct err e = {0};
	const char *y = "a: \"pool\\0x\"\n";
	ck_assert_int_eq(yaml_doc_parse(y, strlen(y), &v, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "a string contains a NUL byte at line 1"));
	y = "\"k\\0\": 1\n";
	ck_assert_int_eq(yaml_doc_parse(y, strlen(y), &v, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "NUL byte"));
	char big[400];
	memset(big, 'k', 300);
	snprintf(big + 300, sizeof(big) - 300, ": 1\n");
	ck_assert_int_eq(yaml_doc_parse(big, strlen(big), &v, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "mapping key too long"));
	y = "a: \"p\\x01\xc3\xa9\"\n";
	ck_assert_int_eq(yaml_doc_parse(y, strlen(y), &v, &e), 0);
	ck_assert_str_eq(cJSON_GetObjectItem(v, "a")->valuestring, "p\x01\xc3\xa9");
	cJSON_Delete(v);
}
END_TEST

START_TEST(test_str_copy)
{
	char b[4];
	ck_assert(str_copy(b, sizeof(b), "abc"));
	ck_assert_str_eq(b, "abc");
	ck_assert(!str_copy(b, sizeof(b), "abcd")); /* cut, still terminated */
	ck_assert_str_eq(b, "abc");
	ck_assert(str_copy(b, sizeof(b), ""));
	ck_assert_str_eq(b, "");
	ck_assert(!str_copy(b, 1, "x"));
	ck_assert_str_eq(b, "");
}
END_TEST

/* Integers of 10^15 and more, up to int64_t's limits, survive parse → print → parse digit for
 * digit (cJSON alone printed 15 significant digits: 1000000000000001 came back as 1e15, and a
 * double cannot even hold 2^53+1), whether parsed, created with json_int64 or nested among
 * strings that contain digits and escaped quotes. */
START_TEST(test_json_exact_integers)
{
	static const char text[] =
	    "{\"a\\\"1\":\"12345678901234567\",\"l\":[999999999999999,1000000000000001,"
	    "9007199254740993,9223372036854775807,-9223372036854775808,-1000000000000001,12,1.5],"
	    "\"o\":{\"c\":1125899906842625}}";
	static const int64_t want[] = {999999999999999LL,
	                               1000000000000001LL,
	                               9007199254740993LL,
	                               INT64_MAX,
	                               INT64_MIN,
	                               -1000000000000001LL,
	                               12};
	cJSON *v = NULL, *again = NULL;
	struct err e = {0};
	int64_t i;
	ck_assert_int_eq(json_parse_strict(text, strlen(text), &v, &e), 0);
	const cJSON *l = cJSON_GetObjectItem(v, "l");
	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		ck_assert_int_eq(json_int64_of(cJSON_GetArrayItem(l, (int)k), &i), 0);
		ck_assert_int_eq(i, want[k]);
	}
	ck_assert_int_eq(json_int64_of(cJSON_GetArrayItem(l, 7), &i), -EINVAL);
	ck_assert_int_eq(json_get_int64(cJSON_GetObjectItem(v, "o"), "c", &i), 0);
	ck_assert_int_eq(i, 1125899906842625LL);
	ck_assert_str_eq(json_get_str(v, "a\"1"), "12345678901234567");
	char *t = json_dump(v);
	ck_assert_str_eq(t, text);
	free(t);
	/* a subtree prints alone, pretty too */
	t = json_print(cJSON_GetArrayItem(l, 3), true);
	ck_assert_str_eq(t, "9223372036854775807");
	free(t);
	t = json_print(v, true);
	ck_assert_int_eq(json_parse_strict(t, strlen(t), &again, &e), 0);
	ck_assert_int_eq(json_int64_of(cJSON_GetArrayItem(cJSON_GetObjectItem(again, "l"), 4), &i),
	                 0);
	ck_assert_int_eq(i, INT64_MIN);
	free(t);
	cJSON_Delete(again);
	cJSON_Delete(v);
	/* created */
	static const int64_t made[] = {INT64_MAX, INT64_MIN, 1000000000000001LL,
	                               9007199254740993LL};
	static const char *const printed[] = {"9223372036854775807", "-9223372036854775808",
	                                      "1000000000000001", "9007199254740993"};
	for (size_t k = 0; k < 4; k++) {
		v = json_int64(made[k]);
		t = json_dump(v);
		ck_assert_str_eq(t, printed[k]);
		ck_assert_int_eq(json_int64_of(v, &i), 0);
		ck_assert_int_eq(i, made[k]);
		free(t);
		cJSON_Delete(v);
	}
	/* beyond int64_t */
	ck_assert_int_eq(json_parse_strict("[9223372036854775808]", 21, &v, &e), 0);
	ck_assert_int_eq(json_int64_of(v->child, &i), -EINVAL);
	cJSON_Delete(v);
}
END_TEST

/* The reference values of the FNV authors' test suite (fnv-1a, 32 and 64 bits). */
START_TEST(test_hash_fnv1a)
{
	ck_assert_uint_eq(hash_fnv1a32(""), 0x811c9dc5u);
	ck_assert_uint_eq(hash_fnv1a32("a"), 0xe40c292cu);
	ck_assert_uint_eq(hash_fnv1a32("foobar"), 0xbf9cf968u);
	ck_assert_uint_eq(hash_fnv1a64(""), 0xcbf29ce484222325ull);
	ck_assert_uint_eq(hash_fnv1a64("a"), 0xaf63dc4c8601ec8cull);
	ck_assert_uint_eq(hash_fnv1a64("foobar"), 0x85944171f73967e8ull);
}
END_TEST

START_TEST(test_time_helpers)
{
	int64_t t0 = time_mono_ms();
	time_sleep_ms(30);
	int64_t el = time_mono_ms() - t0;
	ck_assert_int_ge(el, 30);
	/* time_after reads the clock between before and after: the deadline is 1999 ms past a moment
	 * in that window, whatever the scheduler did between the reads */
	struct timespec before, after;
	clock_gettime(CLOCK_MONOTONIC, &before);
	struct timespec at = time_after(CLOCK_MONOTONIC, 1999);
	clock_gettime(CLOCK_MONOTONIC, &after);
	ck_assert_int_lt(at.tv_nsec, 1000000000L);
	int64_t at_ns = (int64_t)at.tv_sec * 1000000000 + at.tv_nsec;
	int64_t before_ns = (int64_t)before.tv_sec * 1000000000 + before.tv_nsec;
	int64_t after_ns = (int64_t)after.tv_sec * 1000000000 + after.tv_nsec;
	ck_assert_int_ge(at_ns - before_ns, 1999 * 1000000LL);
	ck_assert_int_le(at_ns - after_ns, 1999 * 1000000LL);
	int64_t r = time_real_us(), s = (int64_t)time(NULL);
	ck_assert_int_ge(r / 1000000, s - 1);
	ck_assert_int_le(r / 1000000, s + 1); /* time() reads the coarse clock: it may lag a tick */
}
END_TEST

static void *stopper_main(void *arg)
{
	time_sleep_ms(50);
	stop_set(arg);
	return NULL;
}

START_TEST(test_stop_wait)
{
	struct stop s;
	pthread_t th;
	stop_init(&s);
	int64_t t0 = time_mono_ms();
	ck_assert(!stop_wait_ms(&s, 40)); /* not set: the whole wait */
	ck_assert_int_ge(time_mono_ms() - t0, 40);
	ck_assert(!stop_isset(&s));
	ck_assert_int_eq(pthread_create(&th, NULL, stopper_main, &s), 0);
	t0 = time_mono_ms();
	ck_assert(stop_wait_ms(&s, 10000)); /* woken by the other thread */
	ck_assert_int_lt(time_mono_ms() - t0, 5000);
	pthread_join(th, NULL);
	ck_assert(stop_isset(&s) && stop_wait_ms(&s, 10000));
	ck_assert_int_eq(time_mono_us_fn(NULL) / 1000 >= (uint64_t)t0, 1);
	ck_assert_int_ge(time_real_us_fn(NULL) / 1000000, (int64_t)time(NULL) - 1);
	stop_fini(&s);
}
END_TEST

/* ---- keylock -------------------------------------------------------------------------------- */

START_TEST(test_keylock_try)
{
	struct keylock k;
	struct keylock_hold a, b, c;
	keylock_init(&k);
	ck_assert_int_eq(keylock_try(&k, &a, "pvc-1"), 0);
	ck_assert_int_eq(keylock_try(&k, &b, "pvc-1"), -EBUSY);
	ck_assert_int_eq(keylock_try(&k, &b, "pvc-2"), 0);
	ck_assert_uint_eq(keylock_releases(&k), 0); /* taking and refusing release nothing */
	keylock_release(&k, &a);
	ck_assert_uint_eq(keylock_releases(&k), 1);
	ck_assert_int_eq(keylock_try(&k, &c, "pvc-1"), 0);
	keylock_release(&k, &b);
	keylock_release(&k, &c);
	ck_assert_uint_eq(keylock_releases(&k), 3);
	for (int i = 0; i < KEYLOCK_BUCKETS; i++)
		ck_assert_ptr_null(k.held[i]);
	keylock_fini(&k);
}
END_TEST

/* Many keys held at once (a restore batch): every one busy, each released independently of
 * the order it was taken in, and a released key is free again while its chain neighbours stay
 * held. */
START_TEST(test_keylock_many)
{
	enum { N = 4000 };
	static struct keylock k;
	static struct keylock_hold h[N], again;
	static char keys[N][24];
	keylock_init(&k);
	for (int i = 0; i < N; i++) {
		snprintf(keys[i], sizeof(keys[i]), "pool/pvc-%05d", i);
		ck_assert_int_eq(keylock_try(&k, &h[i], keys[i]), 0);
	}
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(keylock_try(&k, &again, keys[i]), -EBUSY);
	for (int i = 0; i < N; i += 2) /* every other one, oldest first */
		keylock_release(&k, &h[i]);
	for (int i = 0; i < N; i++) {
		int r = keylock_try(&k, &again, keys[i]);
		ck_assert_int_eq(r, i % 2 ? -EBUSY : 0);
		if (r == 0)
			keylock_release(&k, &again);
	}
	for (int i = N - 1; i > 0; i -= 2)
		keylock_release(&k, &h[i]);
	for (int i = 0; i < KEYLOCK_BUCKETS; i++)
		ck_assert_ptr_null(k.held[i]);
	keylock_fini(&k);
}
END_TEST

struct kl_waiter {
	struct keylock *k;
	int *order, *n;
};

static void *kl_wait_thread(void *arg)
{
	struct kl_waiter *w = arg;
	struct keylock_hold h;
	keylock_wait(w->k, &h, "pvc-1");
	w->order[(*w->n)++] = 2;
	keylock_release(w->k, &h);
	return NULL;
}

START_TEST(test_keylock_wait)
{
	struct keylock k;
	struct keylock_hold h, other;
	int order[2], n = 0;
	struct kl_waiter w = {&k, order, &n};
	pthread_t t;
	keylock_init(&k);
	keylock_wait(&k, &h, "pvc-1");
	keylock_wait(&k, &other, "pvc-2"); /* another key does not wait */
	ck_assert_int_eq(pthread_create(&t, NULL, kl_wait_thread, &w), 0);
	usleep(100 * 1000); /* the second caller is waiting */
	order[n++] = 1;
	keylock_release(&k, &h);
	pthread_join(t, NULL);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(order[0], 1);
	ck_assert_int_eq(order[1], 2);
	keylock_release(&k, &other);
	keylock_fini(&k);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("base");
	TCase *t = tcase_create("log");
	tcase_add_test(t, test_log_klog_layout);
	tcase_add_test(t, test_log_escapes_and_severity);
	tcase_add_test(t, test_log_truncation_keeps_one_line);
	tcase_add_test(t, test_log_emit_writes_to_fd);
	tcase_add_test(t, test_log_pid_asked_once);
	suite_add_tcase(s, t);
	t = tcase_create("flags");
	tcase_add_test(t, test_flags_forms);
	tcase_add_test(t, test_flags_errors);
	tcase_add_test(t, test_flags_required_and_verbosity);
	tcase_add_test(t, test_flags_durations);
	tcase_add_test(t, test_flags_mixed_positionals);
	tcase_add_test(t, test_flags_short_names);
	tcase_add_test(t, test_str_quote);
	tcase_add_test(t, test_flags_usage_from_table);
	suite_add_tcase(s, t);
	t = tcase_create("file");
	tcase_add_test(t, test_file_atomic_write_and_read);
	tcase_add_test(t, test_file_read_ends_at_a_short_read);
	tcase_add_test(t, test_file_temp_create);
	tcase_add_test(t, test_file_temp_names);
	tcase_add_test(t, test_file_remove_temps);
	tcase_add_test(t, test_file_failed_write_keeps_old);
	tcase_add_test(t, test_file_fsync_dir_group_shares_fsyncs);
	tcase_add_test(t, test_file_atomic_write_grouped);
	tcase_add_test(t, test_file_atomic_write_reuses_inodes);
	tcase_add_test(t, test_json_strict_refuses_truncated_and_corrupt);
	tcase_add_test(t, test_json_exact_integers);
	tcase_add_test(t, test_err_helpers);
	suite_add_tcase(s, t);
	t = tcase_create("str_time");
	tcase_add_test(t, test_str_copy);
	tcase_add_test(t, test_str_check);
	tcase_add_test(t, test_checks_at_every_offset);
	tcase_add_test(t, test_json_strings_as_sent);
	tcase_add_test(t, test_yaml_strings_as_sent);
	tcase_add_test(t, test_json_marked);
	tcase_add_test(t, test_hash_fnv1a);
	tcase_add_test(t, test_time_helpers);
	tcase_add_test(t, test_stop_wait);
	suite_add_tcase(s, t);
	t = tcase_create("keylock");
	tcase_add_test(t, test_keylock_try);
	tcase_add_test(t, test_keylock_many);
	tcase_add_test(t, test_keylock_wait);
	suite_add_tcase(s, t);
	t = tcase_create("exec");
	tcase_set_timeout(t, 20);
	tcase_add_test(t, test_exec_captures_and_exit_codes);
	tcase_add_test(t, test_exec_timeout_kills_group);
	tcase_add_test(t, test_exec_not_found_stdin_and_limits);
	suite_add_tcase(s, t);
	return tu_run(s);
}
