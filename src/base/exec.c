#include "base/exec.h"
#include "base/time.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct capture {
	char *buf;
	size_t len, cap, max;
};

static int capture_add(struct capture *c, const char *p, size_t n)
{
	if (c->len >= c->max)
		return 0;
	if (n > c->max - c->len)
		n = c->max - c->len;
	if (c->len + n + 1 > c->cap) {
		size_t cap = c->cap ? c->cap : 4096;
		while (cap < c->len + n + 1)
			cap *= 2;
		char *b = realloc(c->buf, cap);
		if (!b)
			return -ENOMEM;
		c->buf = b;
		c->cap = cap;
	}
	memcpy(c->buf + c->len, p, n);
	c->len += n;
	c->buf[c->len] = '\0';
	return 0;
}

static int capture_finish(struct capture *c, char **out, size_t *len)
{
	if (!c->buf) {
		c->buf = calloc(1, 1);
		if (!c->buf)
			return -ENOMEM;
	}
	*out = c->buf;
	*len = c->len;
	c->buf = NULL;
	return 0;
}

void exec_result_free(struct exec_result *res)
{
	if (!res)
		return;
	free(res->out);
	free(res->err);
	res->out = res->err = NULL;
	res->out_len = res->err_len = 0;
}

static void close_pipe(int p[2])
{
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	p[0] = p[1] = -1;
}

static int spawn(const char *const argv[], const struct exec_opts *o, int in[2], int out[2],
                 int errp[2], pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	int r;

	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	if (in[0] >= 0)
		posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	else
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
	sigemptyset(&none);
	sigfillset(&all);
	sigdelset(&all, SIGKILL);
	sigdelset(&all, SIGSTOP);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
	                                  POSIX_SPAWN_SETPGROUP);
	r = posix_spawnp(pid, argv[0], &fa, &at, (char *const *)argv,
	                 o->envp ? (char *const *)o->envp : environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	return -r;
}

/* One running child: its pipes, what it wrote so far and what of stdin it took. */
struct child {
	pid_t pid;
	int in[2], out[2], err[2];
	struct capture cout, cerr;
	size_t in_off;
};

static void child_close(struct child *ch)
{
	close_pipe(ch->out);
	close_pipe(ch->err);
	close_pipe(ch->in);
}

/* Pipes and posix_spawn.  0, or a negative errno with e set (nothing left open). */
static int child_start(const char *const argv[], const struct exec_opts *o, struct child *ch,
                       struct err *e)
{
	int r;
	if (pipe2(ch->out, O_CLOEXEC) < 0 || pipe2(ch->err, O_CLOEXEC) < 0 ||
	    (o->stdin_data && pipe2(ch->in, O_CLOEXEC) < 0)) {
		r = -errno;
		child_close(ch);
		return err_set(e, r, "exec %s: pipe: %s", argv[0], strerror(-r));
	}
	r = spawn(argv, o, ch->in, ch->out, ch->err, &ch->pid);
	close(ch->out[1]);
	close(ch->err[1]);
	ch->out[1] = ch->err[1] = -1;
	if (ch->in[0] >= 0) {
		close(ch->in[0]);
		ch->in[0] = -1;
		fcntl(ch->in[1], F_SETFL, O_NONBLOCK);
	}
	if (r < 0) {
		child_close(ch);
		if (r == -ENOENT)
			return err_set(e, r, "%s: command not found", argv[0]);
		return err_set(e, r, "exec %s: %s", argv[0], strerror(-r));
	}
	if (ch->in[1] >= 0 && o->stdin_len == 0) {
		close(ch->in[1]);
		ch->in[1] = -1;
	}
	return 0;
}

/* Reads stdout/stderr and feeds stdin after one poll.  0, or -ENOMEM. */
static int child_io(struct child *ch, const struct exec_opts *o, const struct pollfd *pf,
                    const int idx[3])
{
	for (int k = 0; k < 2; k++) {
		int *fd = k == 0 ? &ch->out[0] : &ch->err[0];
		struct capture *c = k == 0 ? &ch->cout : &ch->cerr;
		if (idx[k] < 0 || !(pf[idx[k]].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		char buf[8192];
		ssize_t n = read(*fd, buf, sizeof(buf));
		if (n > 0) {
			if (capture_add(c, buf, (size_t)n) < 0)
				return -ENOMEM;
		} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
			close(*fd);
			*fd = -1;
		}
	}
	if (idx[2] >= 0 && (pf[idx[2]].revents & (POLLOUT | POLLERR | POLLHUP))) {
		ssize_t w = write(ch->in[1], o->stdin_data + ch->in_off, o->stdin_len - ch->in_off);
		if (w > 0)
			ch->in_off += (size_t)w;
		if ((w < 0 && errno != EAGAIN && errno != EINTR) || ch->in_off >= o->stdin_len) {
			close(ch->in[1]);
			ch->in[1] = -1;
		}
	}
	return 0;
}

/* Until the child closed stdout and stderr: 0; -ETIMEDOUT at the deadline; -ENOMEM. */
static int child_pump(struct child *ch, const struct exec_opts *o, int64_t deadline)
{
	while (ch->out[0] >= 0 || ch->err[0] >= 0) {
		struct pollfd pf[3];
		int nf = 0, idx[3] = {-1, -1, -1};
		int64_t left = deadline - time_mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		const int fds[3] = {ch->out[0], ch->err[0], ch->in[1]};
		for (int k = 0; k < 3; k++)
			if (fds[k] >= 0) {
				idx[k] = nf;
				pf[nf++] = (struct pollfd){.fd = fds[k],
				                           .events = k < 2 ? POLLIN : POLLOUT};
			}
		if (poll(pf, (nfds_t)nf, (int)(left > 1000 ? 1000 : left)) < 0) {
			if (errno == EINTR)
				continue;
			return 0;
		}
		if (child_io(ch, o, pf, idx) < 0)
			return -ENOMEM;
	}
	return 0;
}

int exec_run(const char *const argv[], const struct exec_opts *opts, struct exec_result *res,
             struct err *e)
{
	static const struct exec_opts defaults = {0};
	const struct exec_opts *o = opts ? opts : &defaults;
	struct child ch = {.pid = -1, .in = {-1, -1}, .out = {-1, -1}, .err = {-1, -1}};
	int r, status = 0, timeout = o->timeout_ms > 0 ? o->timeout_ms : 30000;

	memset(res, 0, sizeof(*res));
	res->exit_code = -1;
	if (!argv || !argv[0])
		return err_set(e, -EINVAL, "exec: empty command");
	ch.cout.max = ch.cerr.max = o->max_output ? o->max_output : (1u << 20);
	if ((r = child_start(argv, o, &ch, e)) < 0)
		return r;
	r = child_pump(&ch, o, time_mono_ms() + timeout);
	if (r < 0)
		kill(-ch.pid, SIGKILL);
	child_close(&ch);
	while (waitpid(ch.pid, &status, 0) < 0 && errno == EINTR)
		;
	if (r == -ENOMEM || capture_finish(&ch.cout, &res->out, &res->out_len) < 0 ||
	    capture_finish(&ch.cerr, &res->err, &res->err_len) < 0) {
		free(ch.cout.buf);
		free(ch.cerr.buf);
		exec_result_free(res);
		return err_set(e, -ENOMEM, "exec %s: out of memory", argv[0]);
	}
	if (WIFEXITED(status))
		res->exit_code = WEXITSTATUS(status);
	else if (WIFSIGNALED(status))
		res->term_signal = WTERMSIG(status);
	res->timed_out = r == -ETIMEDOUT;
	if (res->timed_out)
		return err_set(e, -ETIMEDOUT, "%s did not finish within %d ms and was killed",
		               argv[0], timeout);
	return 0;
}

const char *exec_result_summary(struct exec_result *res)
{
	char *s = res->err_len ? res->err : res->out;
	size_t n = res->err_len ? res->err_len : res->out_len;
	if (!s)
		return "";
	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\r'))
		s[--n] = '\0';
	char *last = strrchr(s, '\n');
	if (last && strncmp(last + 1 + strspn(last + 1, " \t"), "Run `", 5) == 0) {
		/* lvm2's usage hint after the reason ("Run `lvcreate --help' for more
		 * information."): the line before it says what went wrong */
		*last = '\0';
		last = strrchr(s, '\n');
	}
	return last ? last + 1 : s;
}
