/* flags — the one GNU long-option parser every role uses.
 *
 * A role describes its flags in a table; the parser accepts `--name=value` and `--name value`
 * (and `--name` alone for booleans), `--` to end flags, and adds the common flags `--help`,
 * `--version` and `--v=N` (log verbosity) to every table.  The value already stored at each
 * flag's destination is its default, and `--help` output is generated from the table.
 */
#ifndef PILLAR_BASE_FLAGS_H
#define PILLAR_BASE_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/err.h"

enum flag_type {
	FLAG_BOOL,     /* bool *; --x, --x=true|false */
	FLAG_STRING,   /* const char **; points into argv or stays the default */
	FLAG_INT,      /* int64_t * */
	FLAG_DURATION, /* int64_t * milliseconds: Go's duration syntax ("1h2m3s", "1.5h", "500ms";
	                * units h m s ms us µs ns, no sign); plain numbers are seconds */
};

struct flag_def {
	const char *name; /* without the leading dashes */
	enum flag_type type;
	void *dst;
	const char *help;
	bool required; /* must be given on the command line */
};

enum flags_result {
	FLAGS_OK = 0,
	FLAGS_HELP = 1,    /* --help was given: print flags_usage, exit 0 */
	FLAGS_VERSION = 2, /* --version was given: print the version line, exit 0 */
};

/* Parses argv[1..argc-1].  Returns a flags_result, or a negative errno (-EINVAL) with a one-line
 * message in e naming the problem and the flags that are accepted.  On success *first_arg is the
 * index of the first positional argument (argc when none). */
int flags_parse(const char *prog, const struct flag_def *defs, size_t n, int argc, char **argv,
                int *first_arg, struct err *e);

/* Like flags_parse, but flags and positional arguments may be mixed (`get pa -o json`, GNU
 * style): the positional arguments are stored in order in pos (room for argc entries) and
 * counted in *npos. */
int flags_parse_mixed(const char *prog, const struct flag_def *defs, size_t n, int argc,
                      char **argv, char **pos, int *npos, struct err *e);

/* Prints "Usage: <prog> [flags]", the summary and one block per flag, with defaults. */
void flags_usage(FILE *out, const char *prog, const char *summary, const struct flag_def *defs,
                 size_t n);

/* Parses a duration as FLAG_DURATION does (below a millisecond rounds down); 0, or -EINVAL for
 * anything else, a sign or more than 2^63-1 ns (292 years, Go's limit too). */
int flags_parse_duration(const char *s, int64_t *ms);

#endif
