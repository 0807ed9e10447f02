#include "controller/probes.h"

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

struct listener {
	int fd;
	bool metrics, started;
	pthread_t th;
	struct probes *p;
};

struct probes {
	struct ctl *c;
	struct listener l[2];
	int stop_pipe[2];
};

void probes_answer(struct ctl *c, bool metrics, const char *path, int *status, char *body,
                   size_t cap)
{
	if (!metrics && strcmp(path, "/healthz") == 0) {
		*status = 200;
		snprintf(body, cap, "ok\n");
	} else if (!metrics && strcmp(path, "/readyz") == 0) {
		bool ok = ctl_store_ready(c);
		*status = ok ? 200 : 503;
		snprintf(body, cap, ok ? "ok\n" : "object store not reachable\n");
	} else if (metrics && strcmp(path, "/metrics") == 0) {
		*status = 200;
		snprintf(body, cap,
		         "# HELP pillar_csi_build_info Build information of the running binary.\n"
		         "# TYPE pillar_csi_build_info gauge\n"
		         "pillar_csi_build_info{version=\"%s\",commit=\"%s\"} 1\n"
		         "# HELP pillar_csi_store_ready Whether the object store answers (1) or "
		         "not (0).\n"
		         "# TYPE pillar_csi_store_ready gauge\n"
		         "pillar_csi_store_ready %d\n",
		         version_string(), version_commit(), ctl_store_ready(c) ? 1 : 0);
	} else {
		*status = 404;
		snprintf(body, cap, "not found\n");
	}
}

static void serve_one(struct listener *l, int fd)
{
	char req[2048], path[256] = "", body[2048], head[256];
	size_t n = 0;
	int status;
	struct pollfd pf = {.fd = fd, .events = POLLIN};
	/* read the request head (bounded in size and time) */
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
		status = 400;
		snprintf(body, sizeof(body), "bad request\n");
	} else {
		char *q = strchr(path, '?');
		if (q)
			*q = '\0';
		probes_answer(l->p->c, l->metrics, path, &status, body, sizeof(body));
	}
	snprintf(head, sizeof(head),
	         "HTTP/1.1 %d %s\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
	         "Content-Length: %zu\r\nConnection: close\r\n\r\n",
	         status,
	         status == 200   ? "OK"
	         : status == 404 ? "Not Found"
	         : status == 503 ? "Service Unavailable"
	                         : "Bad Request",
	         strlen(body));
	if (write(fd, head, strlen(head)) >= 0 && write(fd, body, strlen(body)) >= 0)
		shutdown(fd, SHUT_WR);
}

static void *listener_main(void *arg)
{
	struct listener *l = arg;
	for (;;) {
		struct pollfd pf[2] = {{.fd = l->fd, .events = POLLIN},
		                       {.fd = l->p->stop_pipe[0], .events = POLLIN}};
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[1].revents)
			break;
		int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		struct timeval tv = {.tv_sec = 2};
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		serve_one(l, fd);
		close(fd);
	}
	return NULL;
}

static int open_listener(struct probes *p, int i, const char *addr, struct err *e)
{
	struct h2_addr a;
	int fd;
	if (!addr || !*addr || strcmp(addr, "0") == 0) {
		p->l[i].fd = -1;
		return 0;
	}
	if (h2_addr_parse(addr, true, &a, e) < 0)
		return e ? e->code : -EINVAL;
	fd = h2_listen(&a, 0660, e);
	if (fd < 0)
		return fd;
	p->l[i] = (struct listener){.fd = fd, .metrics = i == 1, .p = p};
	if (pthread_create(&p->l[i].th, NULL, listener_main, &p->l[i]) != 0) {
		close(fd);
		p->l[i].fd = -1;
		return err_set(e, -EAGAIN, "probes: cannot start a thread");
	}
	p->l[i].started = true;
	return 0;
}

int probes_start(struct ctl *c, const char *health_addr, const char *metrics_addr,
                 struct probes **out, struct err *e)
{
	struct probes *p = calloc(1, sizeof(*p));
	int r;
	*out = NULL;
	if (!p)
		return err_set(e, -ENOMEM, "probes: out of memory");
	p->c = c;
	p->l[0].fd = p->l[1].fd = -1;
	if (pipe2(p->stop_pipe, O_CLOEXEC) < 0) {
		free(p);
		return err_set(e, -errno, "probes: pipe: %s", strerror(errno));
	}
	if ((r = open_listener(p, 0, health_addr, e)) < 0 ||
	    (r = open_listener(p, 1, metrics_addr, e)) < 0) {
		err_prefix(e, "probes");
		probes_stop(p);
		return r;
	}
	*out = p;
	return 0;
}

int probes_port(const struct probes *p, int i)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (!p || i < 0 || i > 1 || p->l[i].fd < 0 ||
	    getsockname(p->l[i].fd, (struct sockaddr *)&ss, &len) < 0)
		return -1;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return -1;
}

void probes_stop(struct probes *p)
{
	if (!p)
		return;
	if (write(p->stop_pipe[1], "x", 1) < 0)
		log_warn("probes: cannot signal the listener threads");
	for (int i = 0; i < 2; i++) {
		if (p->l[i].started)
			pthread_join(p->l[i].th, NULL);
		if (p->l[i].fd >= 0)
			close(p->l[i].fd);
	}
	close(p->stop_pipe[0]);
	close(p->stop_pipe[1]);
	free(p);
}
