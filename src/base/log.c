#include "base/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static atomic_int verbosity;
static atomic_int out_fd = 2;

void log_set_verbosity(int v)
{
	atomic_store(&verbosity, v);
}
int log_verbosity(void)
{
	return atomic_load(&verbosity);
}
void log_set_fd(int fd)
{
	atomic_store(&out_fd, fd);
}

/* The process ID every line carries, asked of the kernel once per process (a forked child
 * asks again). */
static atomic_long pid;
static pthread_once_t pid_once = PTHREAD_ONCE_INIT;

static void pid_forget(void)
{
	atomic_store(&pid, 0);
}

static void pid_watch_forks(void)
{
	pthread_atfork(NULL, NULL, pid_forget);
}

static long log_pid(void)
{
	long p = atomic_load(&pid);
	if (!p) {
		pthread_once(&pid_once, pid_watch_forks);
		p = (long)getpid();
		atomic_store(&pid, p);
	}
	return p;
}

struct sbuf {
	char *p;
	size_t cap, len;
};

static void sb_putc(struct sbuf *b, char c)
{
	if (b->len + 1 < b->cap)
		b->p[b->len] = c;
	b->len++;
}

static void sb_puts(struct sbuf *b, const char *s)
{
	while (*s)
		sb_putc(b, *s++);
}

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	sb_puts(b, tmp);
}

/* Go %q style quoting: printable ASCII as is, the usual escapes, \xNN for the rest. */
static void sb_quote(struct sbuf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	sb_putc(b, '"');
	for (const unsigned char *u = (const unsigned char *)(s ? s : ""); *u; u++) {
		switch (*u) {
		case '"': sb_puts(b, "\\\""); break;
		case '\\': sb_puts(b, "\\\\"); break;
		case '\n': sb_puts(b, "\\n"); break;
		case '\r': sb_puts(b, "\\r"); break;
		case '\t': sb_puts(b, "\\t"); break;
		default:
			if (*u < 0x20 || *u == 0x7f) {
				sb_puts(b, "\\x");
				sb_putc(b, hex[*u >> 4]);
				sb_putc(b, hex[*u & 15]);
			} else {
				sb_putc(b, (char)*u); /* UTF-8 passes through */
			}
		}
	}
	sb_putc(b, '"');
}

static void sb_header(struct sbuf *b, char sev, const struct timespec *ts, long tid,
                      const char *file, int line)
{
	struct tm tm;
	const char *base = strrchr(file, '/');
	time_t sec = ts->tv_sec;

	localtime_r(&sec, &tm);
	sb_printf(b, "%c%02d%02d %02d:%02d:%02d.%06ld %7ld %s:%d] ", sev, tm.tm_mon + 1, tm.tm_mday,
	          tm.tm_hour, tm.tm_min, tm.tm_sec, (long)(ts->tv_nsec / 1000), tid,
	          base ? base + 1 : file, line);
}

static size_t sb_finish(struct sbuf *b)
{
	sb_putc(b, '\n');
	if (b->cap) {
		if (b->len < b->cap) {
			b->p[b->len] = '\0';
		} else {
			/* Truncated: keep it one line that still ends in a newline. */
			b->p[b->cap - 2] = '\n';
			b->p[b->cap - 1] = '\0';
		}
	}
	return b->len;
}

size_t log_format(char *buf, size_t cap, char sev, const struct timespec *ts, long tid,
                  const char *file, int line, const char *msg, va_list kv)
{
	struct sbuf b = {buf, cap, 0};
	const char *k;

	sb_header(&b, sev, ts, tid, file, line);
	sb_quote(&b, msg);
	while ((k = va_arg(kv, const char *)) != NULL) {
		const char *v = va_arg(kv, const char *);
		sb_putc(&b, ' ');
		sb_puts(&b, k);
		sb_putc(&b, '=');
		sb_quote(&b, v ? v : "<nil>");
	}
	return sb_finish(&b);
}

static void write_line(const char *p, size_t n)
{
	int fd = atomic_load(&out_fd);
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

void log_emit(char sev, const char *file, int line, const char *msg, ...)
{
	char buf[4096];
	struct timespec ts;
	va_list ap;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	va_start(ap, msg);
	n = log_format(buf, sizeof(buf), sev, &ts, log_pid(), file, line, msg, ap);
	va_end(ap);
	write_line(buf, n < sizeof(buf) ? n : sizeof(buf) - 1);
}

void log_emitf(char sev, const char *file, int line, const char *fmt, ...)
{
	char buf[4096], text[3072];
	struct sbuf b = {buf, sizeof(buf), 0};
	struct timespec ts;
	va_list ap;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	sb_header(&b, sev, &ts, log_pid(), file, line);
	for (char *c = text; *c; c++)
		sb_putc(&b, *c == '\n' ? ' ' : *c);
	n = sb_finish(&b);
	write_line(buf, n < sizeof(buf) ? n : sizeof(buf) - 1);
}
