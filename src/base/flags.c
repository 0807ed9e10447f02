#include "base/flags.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"

static int64_t verbosity_flag;
static const struct flag_def common_defs[] = {
    {"help", FLAG_BOOL, NULL, "show this help and exit", false},
    {"version", FLAG_BOOL, NULL, "print the version line and exit", false},
    {"v", FLAG_INT, &verbosity_flag, "log verbosity (klog levels; 2 is a useful default)", false},
};
#define N_COMMON (sizeof(common_defs) / sizeof(common_defs[0]))

/* How a flag is written: one dash before a one-letter name (-o, -f, -l: kubectl's shorthands),
 * two before the others and before v (klog's --v). */
static const char *dash(const char *name)
{
	return name[0] && !name[1] && strcmp(name, "v") ? "-" : "--";
}

/* Whether the n bytes at s are printable ASCII. */
static bool printable(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

static int accepted_list(char *buf, size_t cap, const struct flag_def *defs, size_t n)
{
	size_t len = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n + N_COMMON; i++) {
		const struct flag_def *d = i < n ? &defs[i] : &common_defs[i - n];
		int w = snprintf(buf + len, cap - len, "%s%s%s", len ? ", " : "", dash(d->name),
		                 d->name);
		if (w < 0 || (size_t)w >= cap - len)
			return -1;
		len += (size_t)w;
	}
	return 0;
}

/* One "<decimal>[.<fraction>]<unit>" element of a Go duration at *p, added to *ns (Go's
 * time.ParseDuration units; the fraction is exact to the nanosecond).  0 or -EINVAL. */
static int duration_element(const char **p, int64_t *ns)
{
	static const struct {
		const char *unit;
		int64_t ns;
	} units[] = {{"ns", 1},           {"us", 1000},     {"\xc2\xb5s", 1000},
	             {"\xce\xbcs", 1000}, {"ms", 1000000},  {"h", 3600000000000},
	             {"m", 60000000000},  {"s", 1000000000}};
	const char *q = *p;
	int64_t whole = 0, frac = 0, scale = 1;
	bool digits = false;
	for (; *q >= '0' && *q <= '9'; q++, digits = true) {
		if (whole > (INT64_MAX - 9) / 10)
			return -EINVAL;
		whole = whole * 10 + (*q - '0');
	}
	if (*q == '.')
		for (q++; *q >= '0' && *q <= '9'; q++, digits = true)
			if (scale < 1000000000) /* nine digits: the rest is below 4 µs of an hour */
				frac = frac * 10 + (*q - '0'), scale *= 10;
	if (!digits)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		size_t ul = strlen(units[i].unit);
		if (strncmp(q, units[i].unit, ul) != 0)
			continue;
		int64_t u = units[i].ns, part = frac * (u / scale) + (frac * (u % scale)) / scale;
		if (whole > (INT64_MAX - *ns) / u || part > INT64_MAX - *ns - whole * u)
			return -EINVAL;
		*ns += whole * u + part;
		*p = q + ul;
		return 0;
	}
	return -EINVAL;
}

int flags_parse_duration(const char *s, int64_t *ms)
{
	int64_t ns = 0;
	const char *p = s;

	if (!s || !*s)
		return -EINVAL;
	if (strcmp(s, "0") == 0) {
		*ms = 0;
		return 0;
	}
	{ /* a plain integer means seconds */
		char *end;
		errno = 0;
		long long v = strtoll(s, &end, 10);
		if (*s >= '0' && *s <= '9' && *end == '\0' && errno == 0 && v >= 0 &&
		    v <= INT64_MAX / 1000) {
			*ms = (int64_t)v * 1000;
			return 0;
		}
	}
	while (*p)
		if (duration_element(&p, &ns) < 0)
			return -EINVAL;
	*ms = ns / 1000000;
	return 0;
}

static int set_value(const char *prog, const struct flag_def *d, const char *val, struct err *e)
{
	char q[900]; /* the value as a message echoes it (str_quote) */
	switch (d->type) {
	case FLAG_BOOL: {
		bool b;
		if (!val || strcmp(val, "true") == 0 || strcmp(val, "1") == 0)
			b = true;
		else if (strcmp(val, "false") == 0 || strcmp(val, "0") == 0)
			b = false;
		else
			return err_set(e, -EINVAL, "%s: %s%s takes true or false, not %s", prog,
			               dash(d->name), d->name, str_quote(q, sizeof(q), val, 200));
		if (d->dst)
			*(bool *)d->dst = b;
		return 0;
	}
	case FLAG_STRING: *(const char **)d->dst = val; return 0;
	case FLAG_INT: {
		char *end;
		errno = 0;
		long long v = strtoll(val, &end, 10);
		if (errno || end == val || *end)
			return err_set(e, -EINVAL, "%s: %s%s takes an integer, not %s", prog,
			               dash(d->name), d->name, str_quote(q, sizeof(q), val, 200));
		*(int64_t *)d->dst = (int64_t)v;
		return 0;
	}
	case FLAG_DURATION:
		if (flags_parse_duration(val, (int64_t *)d->dst) < 0)
			return err_set(
			    e, -EINVAL,
			    "%s: %s%s takes a duration such as 5s, 1m30s or 500ms, not %s", prog,
			    dash(d->name), d->name, str_quote(q, sizeof(q), val, 200));
		return 0;
	}
	return -EINVAL;
}

/* --help or --version: a bool like the others (--help=false is no help, --help=maybe an error);
 * sets *on when true. */
static int common_bool(const char *prog, const struct flag_def *d, const char *val, int *on,
                       struct err *e)
{
	bool b = false;
	const struct flag_def def = {d->name, FLAG_BOOL, &b, d->help, false};
	if (set_value(prog, &def, val, e) < 0)
		return -EINVAL;
	*on |= b;
	return 0;
}

static int parse(const char *prog, const struct flag_def *defs, size_t n, int argc, char **argv,
                 int *first_arg, char **pos, int *npos, struct err *e)
{
	bool seen[64] = {false};
	int help = 0, version = 0;
	int i;

	if (n > 64)
		return err_set(e, -E2BIG, "%s: too many flags in table", prog);
	verbosity_flag = log_verbosity();
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *name, *eq, *val = NULL;
		const struct flag_def *d = NULL;
		size_t nlen, k;

		if (strcmp(a, "--") == 0) {
			i++;
			if (pos)
				while (i < argc)
					pos[(*npos)++] = argv[i++];
			break;
		}
		if (a[0] != '-' || a[1] == '\0') {
			if (!pos)
				break; /* first positional argument */
			pos[(*npos)++] = argv[i];
			continue;
		}
		name = a + (a[1] == '-' ? 2 : 1);
		eq = strchr(name, '=');
		nlen = eq ? (size_t)(eq - name) : strlen(name);
		for (k = 0; k < n + N_COMMON; k++) {
			const struct flag_def *c = k < n ? &defs[k] : &common_defs[k - n];
			if (strlen(c->name) == nlen && strncmp(c->name, name, nlen) == 0) {
				d = c;
				break;
			}
		}
		if (!d) {
			char acc[1024], q[300];
			size_t alen = eq ? (size_t)(eq - a) : strlen(a);
			accepted_list(acc, sizeof(acc), defs, n);
			if (!printable(a, alen)) /* never a raw control byte on the terminal */
				return err_set(e, -EINVAL, "%s: unknown flag %s; accepted: %s",
				               prog, str_quote(q, sizeof(q), a, alen), acc);
			return err_set(e, -EINVAL, "%s: unknown flag %.*s; accepted: %s", prog,
			               (int)alen, a, acc);
		}
		if (eq) {
			val = eq + 1;
		} else if (d->type != FLAG_BOOL) {
			if (i + 1 >= argc)
				return err_set(e, -EINVAL, "%s: flag %s%s needs a value", prog,
				               dash(d->name), d->name);
			val = argv[++i];
		}
		if (d == &common_defs[0] || d == &common_defs[1]) {
			if (common_bool(prog, d, val, d == &common_defs[0] ? &help : &version, e) <
			    0)
				return -EINVAL;
			continue;
		}
		if (set_value(prog, d, val, e) < 0)
			return -EINVAL;
		if (k < n)
			seen[k] = true;
	}
	if (first_arg)
		*first_arg = i;
	if (help)
		return FLAGS_HELP;
	if (version)
		return FLAGS_VERSION;
	if (verbosity_flag < 0 || verbosity_flag > 10)
		return err_set(e, -EINVAL, "%s: --v takes a level from 0 to 10", prog);
	log_set_verbosity((int)verbosity_flag);
	for (size_t k = 0; k < n; k++)
		if (defs[k].required && !seen[k])
			return err_set(e, -EINVAL, "%s: flag %s%s is required", prog,
			               dash(defs[k].name), defs[k].name);
	return FLAGS_OK;
}

int flags_parse(const char *prog, const struct flag_def *defs, size_t n, int argc, char **argv,
                int *first_arg, struct err *e)
{
	return parse(prog, defs, n, argc, argv, first_arg, NULL, NULL, e);
}

int flags_parse_mixed(const char *prog, const struct flag_def *defs, size_t n, int argc,
                      char **argv, char **pos, int *npos, struct err *e)
{
	*npos = 0;
	return parse(prog, defs, n, argc, argv, NULL, pos, npos, e);
}

static void print_default(FILE *out, const struct flag_def *d)
{
	if (!d->dst)
		return;
	switch (d->type) {
	case FLAG_BOOL:
		if (*(bool *)d->dst)
			fprintf(out, " (default true)");
		break;
	case FLAG_STRING:
		if (*(const char **)d->dst && **(const char **)d->dst)
			fprintf(out, " (default \"%s\")", *(const char **)d->dst);
		break;
	case FLAG_INT: fprintf(out, " (default %" PRId64 ")", *(int64_t *)d->dst); break;
	case FLAG_DURATION: {
		int64_t ms = *(int64_t *)d->dst;
		if (ms % 1000)
			fprintf(out, " (default %" PRId64 "ms)", ms);
		else
			fprintf(out, " (default %" PRId64 "s)", ms / 1000);
		break;
	}
	}
}

void flags_usage(FILE *out, const char *prog, const char *summary, const struct flag_def *defs,
                 size_t n)
{
	static const char *const kind[] = {"", " string", " int", " duration"};
	fprintf(out, "Usage: %s [flags]\n\n%s\n\nFlags:\n", prog, summary);
	for (size_t k = 0; k < n + N_COMMON; k++) {
		const struct flag_def *d = k < n ? &defs[k] : &common_defs[k - n];
		fprintf(out, "  %s%s%s\n        %s", dash(d->name), d->name, kind[d->type],
		        d->help);
		if (d->required)
			fprintf(out, " (required)");
		print_default(out, d);
		fputc('\n', out);
	}
}
