#include "httpserve.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/log.h"
#include "h2/net.h"
#include "version/version.h"

struct httpserve {
	int fd, stop_pipe[2];
	pthread_t th;
	httpserve_fn fn;
	void *ctx;
};

static const char *reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 404: return "Not Found";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	default: return "Bad Request";
	}
}

static bool write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

static void serve_one(struct httpserve *h, int fd)
{
	char req[2048], path[256] = "", head[256];
	size_t n = 0;
	int status = 400;
	struct metrics_text body = {0};
	struct pollfd pf = {.fd = fd, .events = POLLIN};
	/* the request head, bounded in size and time */
	while (n < sizeof(req) - 1 && poll(&pf, 1, 2000) == 1) {
		ssize_t r = read(fd, req + n, sizeof(req) - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		req[n] = '\0';
		if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
			break;
	}
	req[n] = '\0';
	if (sscanf(req, "GET %255s HTTP/1.", path) != 1) {
		metrics_text_printf(&body, "bad request\n");
	} else {
		char *q = strchr(path, '?');
		if (q)
			*q = '\0';
		h->fn(h->ctx, path, &status, &body);
	}
	if (body.failed) {
		metrics_text_free(&body);
		status = 500;
		metrics_text_printf(&body, "out of memory\n");
	}
	snprintf(head, sizeof(head),
	         "HTTP/1.1 %d %s\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
	         "Content-Length: %zu\r\nConnection: close\r\n\r\n",
	         status, reason(status), body.len);
	if (write_all(fd, head, strlen(head)) && write_all(fd, body.buf ? body.buf : "", body.len))
		shutdown(fd, SHUT_WR);
	metrics_text_free(&body);
}

static void *listener_main(void *arg)
{
	struct httpserve *h = arg;
	for (;;) {
		struct pollfd pf[2] = {{.fd = h->fd, .events = POLLIN},
		                       {.fd = h->stop_pipe[0], .events = POLLIN}};
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[1].revents)
			break;
		int fd = accept4(h->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		struct timeval tv = {.tv_sec = 2};
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		serve_one(h, fd);
		close(fd);
	}
	return NULL;
}

bool httpserve_addr_off(const char *addr)
{
	return !addr || !*addr || strcmp(addr, "0") == 0;
}

int httpserve_start(const char *addr, httpserve_fn fn, void *ctx, struct httpserve **out,
                    struct err *e)
{
	struct h2_addr a;
	struct httpserve *h;
	*out = NULL;
	if (httpserve_addr_off(addr))
		return 0;
	if (h2_addr_parse(addr, true, &a, e) < 0)
		return e ? e->code : -EINVAL;
	if (!(h = calloc(1, sizeof(*h))))
		return err_set(e, -ENOMEM, "out of memory");
	h->fn = fn;
	h->ctx = ctx;
	if (pipe2(h->stop_pipe, O_CLOEXEC) < 0) {
		int r = -errno;
		free(h);
		return err_set(e, r, "pipe: %s", strerror(-r));
	}
	if ((h->fd = h2_listen(&a, 0660, e)) < 0) {
		int r = h->fd;
		close(h->stop_pipe[0]);
		close(h->stop_pipe[1]);
		free(h);
		return r;
	}
	if (pthread_create(&h->th, NULL, listener_main, h) != 0) {
		close(h->fd);
		close(h->stop_pipe[0]);
		close(h->stop_pipe[1]);
		free(h);
		return err_set(e, -EAGAIN, "cannot start a listener thread");
	}
	*out = h;
	return 0;
}

int httpserve_port(const struct httpserve *h)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (!h || getsockname(h->fd, (struct sockaddr *)&ss, &len) < 0)
		return -1;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return -1;
}

void httpserve_stop(struct httpserve *h)
{
	if (!h)
		return;
	if (write(h->stop_pipe[1], "x", 1) < 0)
		log_warn("http listener: cannot signal its thread");
	pthread_join(h->th, NULL);
	close(h->fd);
	close(h->stop_pipe[0]);
	close(h->stop_pipe[1]);
	free(h);
}

/* ---- /metrics --------------------------------------------------------------------------------- */

static void build_info(struct metrics_text *t, void *ctx)
{
	(void)ctx;
	const char *labels[] = {"version", version_string(), "commit", version_commit(), NULL};
	metrics_text_header(t, "pillar_csi_build_info",
	                    "Build information of the running binary (always 1).", METRICS_GAUGE);
	metrics_text_sample(t, "pillar_csi_build_info", labels, 1);
}

void role_metrics_answer(void *ctx, const char *path, int *status, struct metrics_text *body)
{
	(void)ctx;
	if (strcmp(path, "/metrics") == 0) {
		*status = 200;
		metrics_write(body);
	} else {
		*status = 404;
		metrics_text_printf(body, "not found\n");
	}
}

void role_metrics_gate(const char *addr)
{
	if (httpserve_addr_off(addr))
		metrics_disable();
}

void role_metrics_register(void)
{
	metrics_register_collector(build_info, NULL);
	metrics_register_collector(metrics_process_collect, NULL);
}

int role_metrics_start(const char *addr, struct httpserve **out, struct err *e)
{
	role_metrics_register();
	return httpserve_start(addr, role_metrics_answer, NULL, out, e);
}
