/* exec — run a command with a timeout and capture what it says.
 *
 * No shell: an argument vector, searched on PATH (tests put fake commands first on PATH).
 * The child gets /dev/null (or the given bytes) on stdin, its own process group, default signal
 * dispositions and an empty signal mask.  On timeout the whole process group is killed with
 * SIGKILL.  stdout and stderr are captured separately up to a limit each (the rest is read and
 * dropped, so a chatty child never blocks).  Safe to call from several threads at once.
 */
#ifndef PILLAR_BASE_EXEC_H
#define PILLAR_BASE_EXEC_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

struct exec_opts {
	int timeout_ms;         /* <= 0: 30 s */
	size_t max_output;      /* per stream; 0: 1 MiB */
	const char *stdin_data; /* NULL: /dev/null */
	size_t stdin_len;
	const char *const *envp; /* NULL: inherit */
};

struct exec_result {
	int exit_code;   /* 0-255 when the child exited, -1 otherwise */
	int term_signal; /* the signal that ended it, 0 otherwise */
	bool timed_out;
	char *out; /* NUL-terminated, never NULL after exec_run returned 0 or -ETIMEDOUT */
	size_t out_len;
	char *err;
	size_t err_len;
};

/* Returns 0 when the command ran to its end, whatever its exit status; -ETIMEDOUT when it was
 * killed at the deadline (result filled); -ENOENT when the command was not found; another
 * negative errno when it could not be started.  Call exec_result_free afterwards in every case. */
int exec_run(const char *const argv[], const struct exec_opts *opts, struct exec_result *res,
             struct err *e);

/* Frees the buffers in res (not res itself); safe on a zeroed or already freed result. */
void exec_result_free(struct exec_result *res);

/* The last line of stderr (or stdout when stderr is empty), trimmed, for error messages; the
 * line before when the last is a usage hint ("Run `<tool> --help' ..."). Points into res;
 * empty string when both are empty. */
const char *exec_result_summary(struct exec_result *res);

#endif
