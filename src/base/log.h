/* log — klog-format text lines on stderr.
 *
 *   I1202 11:23:45.123456    1234 file.c:42] "message" key="value"
 *
 * Severity I/W/E/F, local time with microseconds, the process id right-aligned in 7 columns, the
 * source file's base name and line.  Structured calls take the message and then key, value
 * string pairs; values are quoted and escaped like Go's %q so a line stays one line.  `--v=N`
 * sets the verbosity that log_v() compares against.  Thread-safe: one write(2) per line.
 * Never pass secrets or whole certificates.
 */
#ifndef PILLAR_BASE_LOG_H
#define PILLAR_BASE_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <time.h>

void log_set_verbosity(int v);
int log_verbosity(void);
/* Where lines go; default 2 (stderr).  Tests point it at a pipe or file. */
void log_set_fd(int fd);

/* kv is a NULL-terminated list of const char * key, value pairs. */
void log_emit(char sev, const char *file, int line, const char *msg, ...);
void log_emitf(char sev, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Formats one line (with trailing newline) into buf; returns the length it needed (like
 * snprintf).  tid and ts are explicit so that tests can check the exact layout. */
size_t log_format(char *buf, size_t cap, char sev, const struct timespec *ts, long tid,
                  const char *file, int line, const char *msg, va_list kv);

#define log_info(...)  log_emit('I', __FILE__, __LINE__, __VA_ARGS__, (const char *)0)
#define log_warn(...)  log_emit('W', __FILE__, __LINE__, __VA_ARGS__, (const char *)0)
#define log_error(...) log_emit('E', __FILE__, __LINE__, __VA_ARGS__, (const char *)0)
#define log_v(n, ...)                                                                    \
	do {                                                                             \
		if (log_verbosity() >= (n))                                              \
			log_emit('I', __FILE__, __LINE__, __VA_ARGS__, (const char *)0); \
	} while (0)
#define log_infof(...)  log_emitf('I', __FILE__, __LINE__, __VA_ARGS__)
#define log_warnf(...)  log_emitf('W', __FILE__, __LINE__, __VA_ARGS__)
#define log_errorf(...) log_emitf('E', __FILE__, __LINE__, __VA_ARGS__)

#endif
