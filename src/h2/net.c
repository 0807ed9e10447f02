#include "h2/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int h2_addr_parse(const char *target, bool listen, struct h2_addr *a, struct err *e)
{
	char host[256], port[16];
	const char *s = target, *colon;
	struct addrinfo hints = {0}, *res = NULL;
	int r;

	memset(a, 0, sizeof(*a));
	if (!target || !*target)
		return err_set(e, -EINVAL, "empty address");
	snprintf(a->text, sizeof(a->text), "%s", target);
	if (strncmp(s, "unix:", 5) == 0) {
		struct sockaddr_un *un = (struct sockaddr_un *)&a->sa;
		s += 5;
		if (strncmp(s, "//", 2) == 0)
			s += 2;
		if (s[0] != '/')
			return err_set(e, -EINVAL, "address %s: unix socket path must be absolute",
			               target);
		if (strlen(s) >= sizeof(un->sun_path))
			return err_set(e, -ENAMETOOLONG, "address %s: unix socket path too long",
			               target);
		un->sun_family = AF_UNIX;
		strcpy(un->sun_path, s);
		a->family = AF_UNIX;
		a->len = sizeof(*un);
		strcpy(a->host, "localhost");
		return 0;
	}
	if (strncmp(s, "tcp://", 6) == 0)
		s += 6;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':' || (size_t)(close - s - 1) >= sizeof(host))
			return err_set(e, -EINVAL, "address %s: want [ipv6]:port", target);
		memcpy(host, s + 1, (size_t)(close - s - 1));
		host[close - s - 1] = '\0';
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || (size_t)(colon - s) >= sizeof(host))
			return err_set(e, -EINVAL, "address %s: want host:port", target);
		memcpy(host, s, (size_t)(colon - s));
		host[colon - s] = '\0';
		if (strchr(host, ':'))
			return err_set(e, -EINVAL, "address %s: put an IPv6 address in brackets",
			               target);
	}
	{
		char *end;
		long p = strtol(colon + 1, &end, 10);
		if (!colon[1] || *end || p < 0 || p > 65535 || (!listen && p == 0))
			return err_set(e, -EINVAL, "address %s: bad port", target);
		snprintf(port, sizeof(port), "%ld", p);
	}
	if (!listen && !host[0])
		return err_set(e, -EINVAL, "address %s: missing host", target);
	snprintf(a->host, sizeof(a->host), "%s", host);
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (listen ? AI_PASSIVE : 0);
	hints.ai_family = AF_UNSPEC;
	if (!host[0])
		hints.ai_family = AF_INET6; /* ":port": dual-stack wildcard */
	r = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (r || !res) {
		if (res)
			freeaddrinfo(res);
		return err_set(e, -EHOSTUNREACH, "address %s: cannot resolve %s: %s", target,
		               host[0] ? host : "wildcard", gai_strerror(r));
	}
	memcpy(&a->sa, res->ai_addr, res->ai_addrlen);
	a->len = res->ai_addrlen;
	a->family = res->ai_family;
	freeaddrinfo(res);
	return 0;
}

static int unix_prepare(const char *path, struct err *e)
{
	struct stat st;
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	int fd, rc;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : err_set(e, -errno, "%s: %s", path, strerror(errno));
	if (!S_ISSOCK(st.st_mode))
		return err_set(e, -EEXIST, "%s exists and is not a socket; not removing it", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_set(e, -errno, "socket: %s", strerror(errno));
	strcpy(un.sun_path, path);
	rc = connect(fd, (struct sockaddr *)&un, sizeof(un));
	close(fd);
	if (rc == 0)
		return err_set(e, -EADDRINUSE, "%s: another server is listening on it", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return err_set(e, -errno, "removing stale socket %s: %s", path, strerror(errno));
	return 0;
}

int h2_listen(const struct h2_addr *a, unsigned unix_mode, struct err *e)
{
	int fd, one = 1, zero = 0, rc;
	const char *path = ((const struct sockaddr_un *)&a->sa)->sun_path;

	if (a->family == AF_UNIX) {
		rc = unix_prepare(path, e);
		if (rc)
			return rc;
	}
	fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_set(e, -errno, "%s: socket: %s", a->text, strerror(errno));
	if (a->family != AF_UNIX) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (a->family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	}
	if (bind(fd, (const struct sockaddr *)&a->sa, a->len) < 0) {
		rc = -errno;
		close(fd);
		return err_set(e, rc, "%s: bind: %s", a->text, strerror(-rc));
	}
	if (a->family == AF_UNIX && unix_mode && chmod(path, unix_mode) < 0) {
		rc = -errno;
		close(fd);
		return err_set(e, rc, "%s: chmod: %s", a->text, strerror(-rc));
	}
	if (listen(fd, 512) < 0) {
		rc = -errno;
		close(fd);
		return err_set(e, rc, "%s: listen: %s", a->text, strerror(-rc));
	}
	return fd;
}

int h2_connect_start(const struct h2_addr *a, bool *in_progress, struct err *e)
{
	int fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return err_set(e, -errno, "%s: socket: %s", a->text, strerror(errno));
	if (a->family != AF_UNIX)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*in_progress = false;
	if (connect(fd, (const struct sockaddr *)&a->sa, a->len) < 0) {
		int rc = -errno;
		if (rc == -EINPROGRESS || rc == -EAGAIN) {
			*in_progress = true;
			return fd;
		}
		close(fd);
		return err_set(e, rc, "connect to %s: %s", a->text, strerror(-rc));
	}
	return fd;
}

int h2_connect_result(int fd)
{
	int v = 0;
	socklen_t l = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &v, &l) < 0)
		return -errno;
	return -v;
}
