/* Loop side of the gRPC server: listeners, connections, lifecycle (one stream of a
 * connection: grpc/stream.c). */
#include "grpc/server_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/log.h"
#include "base/mem.h"
#include "grpc/metrics.h"
#include "h2/net.h"

void grpc_server_opts_init(struct grpc_server_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->unix_mode = 0660;
	o->max_msg = GRPC_DEFAULT_MAX_MSG;
	o->max_streams = 100;
	o->max_conns = 1024;
	o->max_header_list = 16384;
	o->max_conns_per_peer = 64;
	o->handshake_timeout_ms = 10000;
	o->idle_timeout_ms = 300000;
	o->keepalive_ms = 120000;
	o->keepalive_timeout_ms = 20000;
	o->conn_log_interval_ms = 10000;
	o->workers = 8;
}

/* The events of the rate-limited connection log (h2/connlog.h): message texts users grep for
 * (docs/troubleshooting.md). */
static const char LOG_REFUSED[] = "gRPC connection refused";
static const char LOG_TIMEOUT[] = "gRPC connection timed out";
static const char LOG_TLS[] = "TLS handshake failed";

/* ---- connections ---------------------------------------------------------------------------- */

/* Closes the connection once it has had no call for idle_timeout_ms (keepalive PINGs and their
 * answers do not count as use). */
static void idle_fn(void *arg)
{
	struct server_connection *connection = arg;
	uint64_t now = h2_now_ms(), last = connection->idle_since;
	uint64_t idle = connection->server->o.idle_timeout_ms;

	if (connection->n_calls > 0)
		last = now;
	if (connection->n_calls == 0 && now - last >= idle) {
		nghttp2_session *ng = h2_conn_session(connection->h2);
		nghttp2_submit_goaway(ng, NGHTTP2_FLAG_NONE,
		                      nghttp2_session_get_last_proc_stream_id(ng), NGHTTP2_NO_ERROR,
		                      (const uint8_t *)"idle", 4);
		h2_conn_flush(connection->h2);
		h2_conn_close(connection->h2, 0, "idle");
		return;
	}
	h2_timer_arm(connection->server->loop, &connection->idle, (last > now ? last : now) + idle,
	             idle_fn, connection);
}

static void connection_open(void *arg, struct h2_conn *h)
{
	struct server_connection *connection = arg;
	struct grpc_server *s = connection->server;
	nghttp2_session_callbacks *cb;
	nghttp2_option *opt;
	nghttp2_session *ng = NULL;
	nghttp2_settings_entry iv[] = {
	    {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, s->o.max_streams},
	    {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20},
	    {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, s->o.max_header_list},
	};

	if (nghttp2_session_callbacks_new(&cb) != 0)
		goto fail;
	server_stream_callbacks(cb);
	if (nghttp2_option_new(&opt) != 0) {
		nghttp2_session_callbacks_del(cb);
		goto fail;
	}
	nghttp2_option_set_max_send_header_block_length(opt, 65536);
	if (nghttp2_session_server_new3(&ng, cb, connection, opt, h2_nghttp2_mem()) != 0)
		ng = NULL;
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	if (!ng)
		goto fail;
	h2_conn_set_session(h, ng);
	if (nghttp2_submit_settings(ng, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0)
		goto fail; /* the preface's SETTINGS is not optional */
	nghttp2_session_set_local_window_size(ng, NGHTTP2_FLAG_NONE, 0, 16 << 20);
	if (s->draining)
		nghttp2_submit_goaway(ng, NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR, NULL, 0);
	connection->idle_since = h2_now_ms();
	if (s->o.idle_timeout_ms)
		h2_timer_arm(s->loop, &connection->idle,
		             connection->idle_since + s->o.idle_timeout_ms, idle_fn, connection);
	return;
fail:
	h2_conn_close(h, -ENOMEM, "out of memory");
}

/* After a flood of connections has drained, the heap pages they held go back to the kernel
 * (their structs are small and scattered, so malloc would keep the pages resident). */
static void conns_trim(struct grpc_server *s, int now)
{
	if (now > s->conns_peak)
		s->conns_peak = now;
	else if (s->conns_peak >= 128 && now <= s->conns_peak / 8) {
		mem_release();
		s->conns_peak = now;
	}
}

struct pending_meter *meter_new(void)
{
	struct pending_meter *m = calloc(1, sizeof(*m));

	if (m)
		atomic_init(&m->refs, 1);
	return m;
}

void meter_unref(struct pending_meter *m)
{
	if (atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) == 1)
		free(m);
}

static void connection_close(void *arg, struct h2_conn *h, int err, const char *why)
{
	struct server_connection *connection = arg;
	struct grpc_server *s = connection->server;

	if (err == -ETIMEDOUT)
		h2_connlog_event(&s->connlog, LOG_TIMEOUT, connection->peer.text, why);
	else if (err && !h2_conn_was_open(h) && s->tls && err != -ECONNRESET)
		h2_connlog_event(&s->connlog, LOG_TLS, connection->peer.text, why);
	else if (err && err != -ECONNRESET)
		log_v(2, "gRPC connection closed", "peer", connection->peer.text, "reason", why);
	while (connection->calls)
		server_call_detach(connection, connection->calls);
	server_orphans_disown(connection);
	meter_unref(connection->meter); /* its orphans' calls may still count what they decode */
	connection->meter = NULL;
	h2_timer_cancel(s->loop, &connection->idle);
	if (connection->prev)
		connection->prev->next = connection->next;
	else
		s->conns = connection->next;
	if (connection->next)
		connection->next->prev = connection->prev;
	server_connection_free(connection);
	conns_trim(s, atomic_fetch_sub(&s->n_conns, 1) - 1);
}

static const struct h2_conn_ops server_connection_ops = {.on_open = connection_open,
                                                         .on_close = connection_close};

static int add_conn(struct grpc_server *s, int fd, const struct peer_address *peer,
                    struct h2_conn **out, struct err *e)
{
	struct server_connection *connection = calloc(1, sizeof(*connection));
	int rc;

	if (!connection || !(connection->meter = meter_new())) {
		free(connection);
		if (fd >= 0)
			close(fd);
		return err_set(e, -ENOMEM, "out of memory");
	}
	connection->server = s;
	if (peer)
		connection->peer = *peer;
	else
		snprintf(connection->peer.text, sizeof(connection->peer.text), "memory");
	connection->next = s->conns;
	if (s->conns)
		s->conns->prev = connection;
	s->conns = connection;
	conns_trim(s, atomic_fetch_add(&s->n_conns, 1) + 1);
	if (fd >= 0) {
		struct h2_conn_limits lim = {.handshake_ms = s->o.handshake_timeout_ms,
		                             .keepalive_ms = s->o.keepalive_ms,
		                             .keepalive_timeout_ms = s->o.keepalive_timeout_ms};
		rc = h2_conn_new_server(&connection->h2, s->loop, fd, s->tls, &lim,
		                        &server_connection_ops, connection, e);
	} else
		rc = h2_conn_new(&connection->h2, s->loop, fd, false, s->tls, NULL,
		                 &server_connection_ops, connection, e);
	if (rc < 0) {
		s->conns = connection->next;
		if (connection->next)
			connection->next->prev = NULL;
		atomic_fetch_sub(&s->n_conns, 1);
		meter_unref(connection->meter);
		free(connection);
		return rc;
	}
	if (fd < 0)
		connection_open(connection, connection->h2);
	if (out)
		*out = connection->h2;
	return 0;
}

int grpc_server_mem_conn(struct grpc_server *s, struct h2_conn **out, struct err *e)
{
	return add_conn(s, -1, NULL, out, e);
}

/* The peer of an accepted socket. */
static void peer_of(int fd, const struct sockaddr_storage *sa, struct peer_address *p)
{
	char host[INET6_ADDRSTRLEN] = "?";

	memset(p, 0, sizeof(*p));
	if (sa->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		memcpy(p->ip, &in->sin_addr, 4);
		p->ip_len = 4;
	} else if (sa->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			memcpy(p->ip, in6->sin6_addr.s6_addr + 12, 4);
			p->ip_len = 4;
		} else {
			memcpy(p->ip, &in6->sin6_addr, 16);
			p->ip_len = 16;
		}
	} else {
		struct ucred cred;
		socklen_t len = sizeof(cred);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
			snprintf(p->text, sizeof(p->text), "unix:pid=%ld", (long)cred.pid);
		else
			snprintf(p->text, sizeof(p->text), "unix");
		return;
	}
	inet_ntop(p->ip_len == 4 ? AF_INET : AF_INET6, p->ip, host, sizeof(host));
	snprintf(p->text, sizeof(p->text), "%s", host);
}

/* Connections from the same IP address (a unix socket's peers have none and count only
 * against max_conns). */
static unsigned peer_conns(const struct grpc_server *s, const struct peer_address *p)
{
	unsigned n = 0;

	for (const struct server_connection *connection = s->conns; connection;
	     connection = connection->next)
		n += connection->peer.ip_len == p->ip_len &&
		     memcmp(connection->peer.ip, p->ip, p->ip_len) == 0;
	return n;
}

/* Why an accepted connection is refused, or NULL to take it. */
static const char *refusal(const struct grpc_server *s, const struct peer_address *p, char *buf,
                           size_t cap)
{
	if ((unsigned)atomic_load(&s->n_conns) >= s->o.max_conns) {
		snprintf(buf, cap, "too many connections (limit %u)", s->o.max_conns);
		return buf;
	}
	size_t held = meter_total(&s->pending);

	if (held > s->o.max_pending - s->pending_room) {
		snprintf(buf, cap,
		         "requests in progress hold %zu bytes, near the server's limit of %zu", held,
		         s->o.max_pending);
		return buf;
	}
	if (p->ip_len && s->o.max_conns_per_peer && peer_conns(s, p) >= s->o.max_conns_per_peer) {
		snprintf(buf, cap, "too many connections from this peer (limit %u)",
		         s->o.max_conns_per_peer);
		return buf;
	}
	return NULL;
}

static void accept_io(void *arg, uint32_t ev);

static void accept_resume(void *arg)
{
	struct grpc_server *s = arg;

	for (size_t i = 0; i < s->n_listen && !s->draining; i++)
		if (s->lfds[i] >= 0)
			h2_loop_mod_fd(s->loop, s->lfds[i], EPOLLIN, accept_io, s);
}

/* Out of descriptors (or kernel memory): the pending connection stays in the backlog and the
 * listeners rest for a moment instead of waking the loop at once again. */
static void accept_pause(struct grpc_server *s, int err)
{
	char why[128];

	for (size_t i = 0; i < s->n_listen; i++)
		if (s->lfds[i] >= 0)
			h2_loop_mod_fd(s->loop, s->lfds[i], 0, accept_io, s);
	h2_timer_arm(s->loop, &s->accept_pause, h2_now_ms() + 100, accept_resume, s);
	snprintf(why, sizeof(why), "accept: %s", strerror(err));
	h2_connlog_event(&s->connlog, LOG_REFUSED, "any", why);
}

static void accept_one(struct grpc_server *s, int fd, const struct sockaddr_storage *sa)
{
	struct peer_address p;
	char buf[96];
	const char *why;
	int one = 1;

	if (s->draining) {
		close(fd);
		return;
	}
	peer_of(fd, sa, &p);
	why = refusal(s, &p, buf, sizeof(buf));
	if (why) {
		h2_connlog_event(&s->connlog, LOG_REFUSED, p.text, why);
		close(fd);
		return;
	}
	if (p.ip_len)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	add_conn(s, fd, &p, NULL, NULL);
}

static void accept_io(void *arg, uint32_t ev)
{
	struct grpc_server *s = arg;
	(void)ev;

	/* find which listener fired: the registration arg is the server, so try them all */
	for (size_t i = 0; i < s->n_listen; i++) {
		for (int k = 0; k < 64 && s->lfds[i] >= 0; k++) {
			struct sockaddr_storage sa;
			socklen_t len = sizeof(sa);
			int fd = accept4(s->lfds[i], (struct sockaddr *)&sa, &len,
			                 SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (fd < 0) {
				if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
				    errno == ENOMEM) {
					accept_pause(s, errno);
					return;
				}
				break;
			}
			accept_one(s, fd, &sa);
		}
	}
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

int grpc_server_new(struct grpc_server **out, const struct grpc_server_opts *o, struct err *e)
{
	struct grpc_server *s = calloc(1, sizeof(*s));
	size_t n = 0;
	int rc;

	if (!s)
		return err_set(e, -ENOMEM, "gRPC server: out of memory");
	s->o = *o;
	if (!s->o.max_msg)
		s->o.max_msg = GRPC_DEFAULT_MAX_MSG;
	if (!s->o.max_streams)
		s->o.max_streams = 100;
	if (!s->o.max_conn_pending)
		s->o.max_conn_pending = 4 * s->o.max_msg > (1u << 20) ? 4 * s->o.max_msg : 1u << 20;
	if (!s->o.max_pending)
		s->o.max_pending =
		    2 * s->o.max_conn_pending > (16u << 20) ? 2 * s->o.max_conn_pending : 16u << 20;
	s->pending_room =
	    2 * s->o.max_msg < s->o.max_pending / 2 ? 2 * s->o.max_msg : s->o.max_pending / 2;
	if (!s->o.max_conns)
		s->o.max_conns = 1024;
	if (!s->o.max_header_list)
		s->o.max_header_list = 16384;
	s->o.listen = NULL;
	pthread_mutex_init(&s->health_mu, NULL);
	s->loop = o->loop ? o->loop : h2_loop_default();
	if (!s->loop) {
		rc = err_set(e, -ENOMEM, "gRPC server: no event loop");
		goto fail;
	}
	h2_connlog_init(&s->connlog, s->loop,
	                s->o.conn_log_interval_ms ? s->o.conn_log_interval_ms : 10000);
	while (o->listen && o->listen[n])
		n++;
	s->lfds = calloc(n + 1, sizeof(int));
	s->ports = calloc(n + 1, sizeof(int));
	s->listen_addrs = calloc(n + 1, sizeof(struct h2_addr));
	if (!s->lfds || !s->ports || !s->listen_addrs) {
		rc = err_set(e, -ENOMEM, "gRPC server: out of memory");
		goto fail;
	}
	for (s->n_listen = 0; s->n_listen < n; s->n_listen++) {
		s->lfds[s->n_listen] = -1;
		s->ports[s->n_listen] = -1;
		rc = h2_addr_parse(o->listen[s->n_listen], true, &s->listen_addrs[s->n_listen], e);
		if (rc < 0)
			goto fail;
	}
	if (o->tls_cert || o->tls_key) {
		rc = h2_tls_server_cfg_new(&s->tls, o->tls_cert, o->tls_key, o->tls_ca, e);
		if (rc < 0)
			goto fail;
	} else if (o->tls_ca) {
		rc = err_set(e, -EINVAL, "a client CA needs a server certificate and key");
		goto fail;
	}
	rc = h2_jobs_new(&s->jobs, s->loop, o->workers, e);
	if (rc < 0)
		goto fail;
	grpc_server_set_serving(s, "", true);
	*out = s;
	return 0;
fail:
	grpc_server_free(s);
	return rc;
}

static void free_method_metrics(struct grpc_method_metrics **mm, size_t n)
{
	for (size_t i = 0; mm && i < n; i++)
		grpc_metrics_method_free(mm[i]);
	free(mm);
}

struct grpc_method_metrics *server_method_metrics(const struct grpc_call *c)
{
	const struct grpc_server *s = c->server;
	for (size_t i = 0; i < s->n_svcs; i++)
		if (s->svcs[i] == c->svc && c->method >= c->svc->methods &&
		    c->method < c->svc->methods + c->svc->n_methods)
			return s->metrics[i][c->method - c->svc->methods];
	return NULL;
}

/* Per method of svc: listed in svc->nonblocking.  A name that is no unary method of svc is
 * refused (a streaming handler may wait for flow control). */
static int nonblocking_flags(const struct grpc_service *svc, bool **out, struct err *e)
{
	bool *flags = calloc(svc->n_methods ? svc->n_methods : 1, sizeof(*flags));

	if (!flags)
		return err_set(e, -ENOMEM, "out of memory");
	for (const char *const *name = svc->nonblocking; name && *name; name++) {
		size_t i = 0;
		while (i < svc->n_methods && strcmp(svc->methods[i].name, *name) != 0)
			i++;
		if (i == svc->n_methods || !svc->methods[i].unary) {
			free(flags);
			return err_set(e, -EINVAL,
			               i == svc->n_methods
			                   ? "service %s: nonblocking method %s does not exist"
			                   : "service %s: method %s: only a unary method can be "
			                     "nonblocking",
			               svc->name, *name);
		}
		flags[i] = true;
	}
	*out = flags;
	return 0;
}

int grpc_server_add_service(struct grpc_server *s, const struct grpc_service *svc, struct err *e)
{
	const struct grpc_service **ns;
	size_t i;

	if (s->started)
		return err_set(e, -EBUSY, "add service %s before starting the server", svc->name);
	for (i = 0; i < svc->n_methods; i++) {
		const struct grpc_method *m = &svc->methods[i];
		if (!m->name || !m->req || !m->resp || !m->unary == !m->server_stream)
			return err_set(e, -EINVAL, "service %s: method %zu is incomplete",
			               svc->name, i);
	}
	bool *flags = NULL, **nf;
	int rc = nonblocking_flags(svc, &flags, e);
	if (rc < 0)
		return rc;
	if (!(nf = realloc(s->nonblocking, (s->n_svcs + 1) * sizeof(*nf))))
		goto oom;
	s->nonblocking = nf;
	struct grpc_method_metrics ***nm = realloc(s->metrics, (s->n_svcs + 1) * sizeof(*nm));
	if (!nm)
		goto oom;
	s->metrics = nm;
	if (!(nm[s->n_svcs] = calloc(svc->n_methods ? svc->n_methods : 1, sizeof(**nm))))
		goto oom;
	for (i = 0; i < svc->n_methods; i++)
		nm[s->n_svcs][i] = grpc_metrics_server_method(
		    svc->name, svc->methods[i].name, svc->methods[i].server_stream != NULL);
	ns = realloc(s->svcs, (s->n_svcs + 1) * sizeof(*ns));
	if (!ns) {
		free_method_metrics(nm[s->n_svcs], svc->n_methods);
		goto oom;
	}
	s->svcs = ns;
	s->nonblocking[s->n_svcs] = flags;
	s->svcs[s->n_svcs++] = svc;
	grpc_server_set_serving(s, svc->name, true);
	return 0;
oom:
	free(flags);
	return err_set(e, -ENOMEM, "out of memory");
}

struct start_arg {
	struct grpc_server *s;
	int rc;
};

static void start_fn(void *arg)
{
	struct start_arg *a = arg;
	size_t i;

	for (i = 0; i < a->s->n_listen && a->rc == 0; i++)
		a->rc = h2_loop_add_fd(a->s->loop, a->s->lfds[i], EPOLLIN, accept_io, a->s);
}

int grpc_server_start(struct grpc_server *s, struct err *e)
{
	struct start_arg a = {.s = s};
	size_t i;

	for (i = 0; i < s->n_listen; i++) {
		struct h2_addr *ad = &s->listen_addrs[i];
		int fd = h2_listen(ad, s->o.unix_mode, e);
		if (fd < 0)
			return fd;
		s->lfds[i] = fd;
		if (ad->family != AF_UNIX) {
			struct sockaddr_storage ss;
			socklen_t l = sizeof(ss);
			if (getsockname(fd, (struct sockaddr *)&ss, &l) == 0)
				s->ports[i] = ntohs(ss.ss_family == AF_INET
				                        ? ((struct sockaddr_in *)&ss)->sin_port
				                        : ((struct sockaddr_in6 *)&ss)->sin6_port);
		}
	}
	s->started = true;
	grpc_metrics_server_watch(s);
	if (h2_loop_in_thread(s->loop))
		start_fn(&a);
	else
		h2_loop_run_sync(s->loop, start_fn, &a);
	if (a.rc < 0)
		return err_set(e, a.rc, "cannot watch listening sockets: %s", strerror(-a.rc));
	return 0;
}

int grpc_server_port(const struct grpc_server *s, size_t i)
{
	return i < s->n_listen ? s->ports[i] : -1;
}

size_t grpc_server_pending_bytes(const struct grpc_server *s)
{
	return meter_total(&s->pending);
}

size_t grpc_server_pending_limit(const struct grpc_server *s)
{
	return s->o.max_pending;
}

static void drain_fn(void *arg)
{
	struct grpc_server *s = arg;
	struct server_connection *connection;
	size_t i;

	s->draining = true;
	h2_timer_cancel(s->loop, &s->accept_pause);
	for (i = 0; i < s->n_listen; i++) {
		if (s->lfds[i] >= 0) {
			h2_loop_del_fd(s->loop, s->lfds[i]);
			close(s->lfds[i]);
			s->lfds[i] = -1;
			if (s->listen_addrs[i].family == AF_UNIX)
				unlink(((struct sockaddr_un *)&s->listen_addrs[i].sa)->sun_path);
		}
	}
	for (connection = s->conns; connection; connection = connection->next) {
		nghttp2_session *ng = h2_conn_session(connection->h2);
		if (!ng)
			continue;
		nghttp2_submit_goaway(ng, NGHTTP2_FLAG_NONE,
		                      nghttp2_session_get_last_proc_stream_id(ng), NGHTTP2_NO_ERROR,
		                      (const uint8_t *)"shutdown", 8);
		h2_conn_flush(connection->h2);
	}
}

static void kill_fn(void *arg)
{
	struct grpc_server *s = arg;
	struct server_connection *connection;

	for (connection = s->conns; connection; connection = connection->next)
		h2_conn_close(connection->h2, 0, "server shut down");
}

static void nothing_fn(void *arg)
{
	(void)arg;
}

static void connlog_stop_fn(void *arg)
{
	struct grpc_server *s = arg;
	h2_connlog_stop(&s->connlog);
}

static void wait_conns(struct grpc_server *s, uint64_t until)
{
	while (atomic_load(&s->n_conns) > 0 && h2_now_ms() < until)
		usleep(5000);
}

void grpc_server_shutdown(struct grpc_server *s, uint64_t grace_ms)
{
	if (!s || s->shut)
		return;
	s->shut = true;
	grpc_server_set_serving(s, "", false);
	h2_loop_run_sync(s->loop, drain_fn, s);
	wait_conns(s, h2_now_ms() + grace_ms);
	h2_loop_run_sync(s->loop, kill_fn, s);
	wait_conns(s, h2_now_ms() + 10000);
	h2_loop_run_sync(s->loop, connlog_stop_fn, s);
}

void grpc_server_free(struct grpc_server *s)
{
	size_t i;

	if (!s)
		return;
	grpc_metrics_server_unwatch(s);
	if (s->started)
		grpc_server_shutdown(s, 0);
	else if (s->loop)
		h2_loop_run_sync(s->loop, connlog_stop_fn, s);
	h2_jobs_free(s->jobs); /* waits for running handlers */
	/* and for their last kicks, which give back what their calls held */
	if (s->loop)
		h2_loop_run_sync(s->loop, nothing_fn, NULL);
	for (i = 0; i < s->n_listen; i++)
		if (s->lfds[i] >= 0)
			close(s->lfds[i]);
	h2_tls_cfg_free(s->tls);
	server_health_free(s);
	pthread_mutex_destroy(&s->health_mu);
	for (i = 0; i < s->n_svcs; i++)
		free_method_metrics(s->metrics[i], s->svcs[i]->n_methods);
	for (i = 0; i < s->n_svcs; i++)
		free(s->nonblocking[i]);
	free(s->nonblocking);
	free(s->metrics);
	free(s->svcs);
	free(s->lfds);
	free(s->ports);
	free(s->listen_addrs);
	free(s);
}
