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

int exec_run(const char *const argv[], const struct exec_opts *opts, struct exec_result *res,
             struct err *e)
{
	static const struct exec_opts defaults = {0};
	const struct exec_opts *o = opts ? opts : &defaults;
	struct capture cout = {0}, cerr = {0};
	int in[2] = {-1, -1}, out[2] = {-1, -1}, errp[2] = {-1, -1};
	size_t in_off = 0;
	int64_t deadline;
	pid_t pid = -1;
	int r, status = 0;
	bool timed_out = false;

	memset(res, 0, sizeof(*res));
	res->exit_code = -1;
	if (!argv || !argv[0])
		return err_set(e, -EINVAL, "exec: empty command");
	cout.max = cerr.max = o->max_output ? o->max_output : (1u << 20);
	deadline = time_mono_ms() + (o->timeout_ms > 0 ? o->timeout_ms : 30000);

	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
	    (o->stdin_data && pipe2(in, O_CLOEXEC) < 0)) {
		r = -errno;
		close_pipe(out);
		close_pipe(errp);
		close_pipe(in);
		return err_set(e, r, "exec %s: pipe: %s", argv[0], strerror(-r));
	}
	r = spawn(argv, o, in, out, errp, &pid);
	close(out[1]);
	close(errp[1]);
	out[1] = errp[1] = -1;
	if (in[0] >= 0) {
		close(in[0]);
		in[0] = -1;
		fcntl(in[1], F_SETFL, O_NONBLOCK);
	}
	if (r < 0) {
		close_pipe(out);
		close_pipe(errp);
		close_pipe(in);
		if (r == -ENOENT)
			return err_set(e, r, "%s: command not found", argv[0]);
		return err_set(e, r, "exec %s: %s", argv[0], strerror(-r));
	}
	if (in[1] >= 0 && o->stdin_len == 0) {
		close(in[1]);
		in[1] = -1;
	}

	while (out[0] >= 0 || errp[0] >= 0) {
		struct pollfd pf[3];
		int nf = 0, io = -1, ie = -1, ii = -1;
		int64_t left = deadline - time_mono_ms();
		if (left <= 0) {
			timed_out = true;
			break;
		}
		if (out[0] >= 0) {
			io = nf;
			pf[nf++] = (struct pollfd){.fd = out[0], .events = POLLIN};
		}
		if (errp[0] >= 0) {
			ie = nf;
			pf[nf++] = (struct pollfd){.fd = errp[0], .events = POLLIN};
		}
		if (in[1] >= 0) {
			ii = nf;
			pf[nf++] = (struct pollfd){.fd = in[1], .events = POLLOUT};
		}
		if (poll(pf, (nfds_t)nf, (int)(left > 1000 ? 1000 : left)) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int k = 0; k < 2; k++) {
			int idx = k == 0 ? io : ie;
			int *fd = k == 0 ? &out[0] : &errp[0];
			struct capture *c = k == 0 ? &cout : &cerr;
			if (idx < 0 || !(pf[idx].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			char buf[8192];
			ssize_t n = read(*fd, buf, sizeof(buf));
			if (n > 0) {
				if (capture_add(c, buf, (size_t)n) < 0) {
					timed_out = false;
					goto oom;
				}
			} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
				close(*fd);
				*fd = -1;
			}
		}
		if (ii >= 0 && (pf[ii].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t w = write(in[1], o->stdin_data + in_off, o->stdin_len - in_off);
			if (w > 0)
				in_off += (size_t)w;
			if ((w < 0 && errno != EAGAIN && errno != EINTR) ||
			    in_off >= o->stdin_len) {
				close(in[1]);
				in[1] = -1;
			}
		}
	}
	if (timed_out)
		kill(-pid, SIGKILL);
	close_pipe(out);
	close_pipe(errp);
	close_pipe(in);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status))
		res->exit_code = WEXITSTATUS(status);
	else if (WIFSIGNALED(status))
		res->term_signal = WTERMSIG(status);
	res->timed_out = timed_out;
	if (capture_finish(&cout, &res->out, &res->out_len) < 0 ||
	    capture_finish(&cerr, &res->err, &res->err_len) < 0) {
		free(cout.buf);
		free(cerr.buf);
		exec_result_free(res);
		return err_set(e, -ENOMEM, "exec %s: out of memory", argv[0]);
	}
	if (timed_out)
		return err_set(e, -ETIMEDOUT, "%s did not finish within %d ms and was killed",
		               argv[0], o->timeout_ms > 0 ? o->timeout_ms : 30000);
	return 0;

oom:
	kill(-pid, SIGKILL);
	close_pipe(out);
	close_pipe(errp);
	close_pipe(in);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	free(cout.buf);
	free(cerr.buf);
	return err_set(e, -ENOMEM, "exec %s: out of memory", argv[0]);
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
	return last ? last + 1 : s;
}
