#include "h2/conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"

/* An accepted connection goes ST_WAIT (nothing received yet) -> ST_HANDSHAKE (with TLS) ->
 * ST_PREFACE (reading the client preface) -> ST_OPEN; a dialled one ST_CONNECTING ->
 * ST_HANDSHAKE (with TLS) -> ST_OPEN. */
enum { ST_CONNECTING, ST_WAIT, ST_HANDSHAKE, ST_PREFACE, ST_OPEN, ST_DEAD };

static const uint8_t client_magic[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define MAGIC_LEN (sizeof(client_magic) - 1)

#define OUT_HIGH    (256 * 1024)
#define READ_BUDGET (1024 * 1024)

struct h2_conn {
	struct h2_loop *loop;
	int fd;
	int state;
	struct h2_tls_cfg *tls_cfg;
	struct h2_tls *tls;
	char verify_name[256];
	nghttp2_session *ng;
	const struct h2_conn_ops *ops;
	void *arg;
	uint8_t *out;
	size_t out_off, out_len, out_cap;
	uint32_t events;
	uint64_t last_activity;
	int close_err;
	char close_why[256];
	bool destroy_posted;
	struct h2_post destroy_post; /* the teardown's, so that closing never needs memory */
	bool in_io;
	int readers;    /* an external reader waits for input itself (0 or 1) */
	bool destroyed; /* torn down; the fd and this struct wait for the reader's end */
	bool server;    /* accepted: waits for the client preface before on_open */
	bool was_open;
	struct h2_conn_limits lim;
	struct h2_timer deadline;  /* handshake and preface */
	struct h2_timer keepalive; /* next keepalive check */
	bool ping_out;             /* a keepalive PING waits for an answer */
	uint64_t ping_at;
	uint8_t preface[MAGIC_LEN];
	size_t preface_len;
};

static void conn_io(void *arg, uint32_t ev);
static void do_read(struct h2_conn *c);

/* The events the loop watches: EPOLLIN is left out while an external reader waits.  The
 * socket is edge-triggered (no re-arming after each event): every event is read until the
 * socket is empty (a short read or EAGAIN), or do_read asks for the event again. */
static void set_events(struct h2_conn *c, uint32_t ev)
{
	if (c->readers)
		ev &= ~(uint32_t)EPOLLIN;
	if (c->fd < 0 || c->state == ST_DEAD || ev == c->events)
		return;
	c->events = ev;
	h2_loop_mod_fd(c->loop, c->fd, ev | EPOLLET, conn_io, c);
}

static void cancel_timers(struct h2_conn *c)
{
	h2_timer_cancel(c->loop, &c->deadline);
	h2_timer_cancel(c->loop, &c->keepalive);
}

void h2_conn_destroy(struct h2_conn *c)
{
	if (c->destroyed)
		return;
	cancel_timers(c);
	if (c->fd >= 0)
		h2_loop_del_fd(c->loop, c->fd);
	if (c->ops->on_close)
		c->ops->on_close(c->arg, c, c->close_err, c->close_why);
	nghttp2_session_del(c->ng);
	c->ng = NULL;
	h2_tls_free(c->tls);
	c->tls = NULL;
	free(c->out);
	c->out = NULL;
	c->state = ST_DEAD;
	if (c->readers) {
		c->destroyed = true; /* h2_conn_reader_end closes the fd and frees */
		return;
	}
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

int h2_conn_reader_begin(struct h2_conn *c)
{
	if (c->state != ST_OPEN || c->fd < 0 || c->readers)
		return -1;
	c->readers = 1;
	set_events(c, c->events);
	return c->fd;
}

void h2_conn_reader_read(struct h2_conn *c)
{
	if (c->state != ST_OPEN)
		return;
	do_read(c);
	h2_conn_flush(c);
}

void h2_conn_reader_end(struct h2_conn *c)
{
	if (!c->readers)
		return;
	c->readers = 0;
	if (c->destroyed) {
		close(c->fd);
		free(c);
		return;
	}
	if (c->state == ST_OPEN)
		set_events(c, c->events | EPOLLIN);
}

static void destroy_fn(void *arg)
{
	h2_conn_destroy(arg);
}

void h2_conn_close(struct h2_conn *c, int err, const char *why)
{
	if (c->state == ST_DEAD)
		return;
	c->state = ST_DEAD;
	cancel_timers(c);
	c->close_err = err;
	snprintf(c->close_why, sizeof(c->close_why), "%s", why ? why : "");
	if (c->fd >= 0) {
		if (c->tls && err == 0)
			h2_tls_close_notify(c->tls);
		h2_loop_del_fd(c->loop, c->fd);
		shutdown(c->fd, SHUT_RDWR);
		if (!c->destroy_posted) { /* embedded: a teardown that cannot fail for memory */
			c->destroy_posted = true;
			h2_loop_post_embedded(c->loop, &c->destroy_post, destroy_fn, c);
		}
	}
}

bool h2_conn_was_open(const struct h2_conn *c)
{
	return c->was_open;
}

bool h2_conn_closing(const struct h2_conn *c)
{
	return c->state == ST_DEAD;
}

uint64_t h2_conn_last_activity(const struct h2_conn *c)
{
	return c->last_activity;
}

nghttp2_session *h2_conn_session(const struct h2_conn *c)
{
	return c->ng;
}

void h2_conn_set_session(struct h2_conn *c, nghttp2_session *s)
{
	c->ng = s;
}

static int out_reserve(struct h2_conn *c, size_t more)
{
	if (c->out_off > 0 && c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (c->out_len + more > c->out_cap) {
		size_t ncap = c->out_cap ? c->out_cap : 65536;
		uint8_t *nb;
		while (ncap < c->out_len + more)
			ncap *= 2;
		nb = realloc(c->out, ncap);
		if (!nb)
			return -ENOMEM;
		c->out = nb;
		c->out_cap = ncap;
	}
	return 0;
}

/* Moves the session's queued frames into the output buffer (at most about OUT_HIGH). */
static int fill_out(struct h2_conn *c)
{
	while (c->ng && (c->fd < 0 || c->out_len - c->out_off < OUT_HIGH)) {
		const uint8_t *p;
		ssize_t n = nghttp2_session_mem_send(c->ng, &p);
		if (n < 0) {
			h2_conn_close(c, -EPROTO, nghttp2_strerror((int)n));
			return -EPROTO;
		}
		if (n == 0)
			break;
		if (out_reserve(c, (size_t)n) < 0) {
			h2_conn_close(c, -ENOMEM, "out of memory");
			return -ENOMEM;
		}
		memcpy(c->out + c->out_len, p, (size_t)n);
		c->out_len += (size_t)n;
	}
	return 0;
}

void h2_conn_flush(struct h2_conn *c)
{
	if (c->state != ST_OPEN)
		return;
	for (;;) {
		ssize_t n;
		if (c->out_off == c->out_len) {
			c->out_off = c->out_len = 0;
			if (fill_out(c) < 0)
				return;
			if (c->out_len == 0)
				break;
		}
		if (c->fd < 0)
			return; /* memory mode: h2_conn_take() drains */
		if (c->tls)
			n = h2_tls_write(c->tls, c->out + c->out_off, c->out_len - c->out_off);
		else {
			n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
			if (n < 0)
				n = (errno == EAGAIN || errno == EINTR) ? -EAGAIN : -errno;
		}
		if (n == -EAGAIN) {
			set_events(c, EPOLLIN | EPOLLOUT);
			return;
		}
		if (n < 0) {
			h2_conn_close(c, (int)n, "write failed");
			return;
		}
		c->out_off += (size_t)n;
	}
	set_events(c, EPOLLIN);
	if (c->ng && !nghttp2_session_want_read(c->ng) && !nghttp2_session_want_write(c->ng))
		h2_conn_close(c, 0, "");
}

int h2_conn_feed(struct h2_conn *c, const uint8_t *data, size_t len)
{
	ssize_t n;

	if (c->state != ST_OPEN || !c->ng)
		return NGHTTP2_ERR_EOF;
	c->last_activity = h2_now_ms();
	n = nghttp2_session_mem_recv(c->ng, data, len);
	if (n < 0) {
		/* let a GOAWAY the session queued go out first */
		fill_out(c);
		if (c->fd >= 0 && c->out_len > c->out_off && !c->tls)
			(void)!send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
			            MSG_NOSIGNAL | MSG_DONTWAIT);
		h2_conn_close(c, -EPROTO, nghttp2_strerror((int)n));
		return (int)n;
	}
	return 0;
}

const uint8_t *h2_conn_take(struct h2_conn *c, size_t *len)
{
	const uint8_t *p;
	if (c->state == ST_OPEN)
		fill_out(c);
	p = c->out + c->out_off;
	*len = c->out_len - c->out_off;
	c->out_off = c->out_len = 0;
	return p;
}

/* Bytes read (> 0), -EAGAIN, or 0 / a negative errno after closing the connection. */
static ssize_t read_some(struct h2_conn *c, uint8_t *buf, size_t len)
{
	ssize_t n;

	if (c->tls)
		n = h2_tls_read(c->tls, buf, len);
	else {
		n = recv(c->fd, buf, len, 0);
		if (n < 0)
			n = (errno == EAGAIN || errno == EINTR) ? -EAGAIN : -errno;
	}
	if (n == 0)
		h2_conn_close(c, 0, "peer closed the connection");
	else if (n < 0 && n != -EAGAIN)
		h2_conn_close(c, (int)n, "read failed");
	return n;
}

static void do_read(struct h2_conn *c)
{
	uint8_t buf[65536];
	size_t total = 0;

	while (c->state == ST_OPEN) {
		ssize_t n;
		if (total >= READ_BUDGET) {
			/* other connections' turn: watching the socket again reports what is left */
			if (c->fd >= 0 && !c->readers)
				h2_loop_mod_fd(c->loop, c->fd, c->events | EPOLLET, conn_io, c);
			break;
		}
		n = read_some(c, buf, sizeof(buf));
		if (n <= 0)
			break;
		total += (size_t)n;
		if (h2_conn_feed(c, buf, (size_t)n) < 0)
			return;
		/* a short read emptied the socket: what arrives later is a new edge, so no read
		 * just to see EAGAIN; TLS may hold decrypted bytes back */
		if (!c->tls && (size_t)n < sizeof(buf))
			break;
	}
}

static void keepalive_fn(void *arg);

/* "10s" or "250ms", as the duration flags are written. */
static const char *ms_text(uint64_t ms, char *buf, size_t cap)
{
	if (ms % 1000 == 0)
		snprintf(buf, cap, "%llus", (unsigned long long)(ms / 1000));
	else
		snprintf(buf, cap, "%llums", (unsigned long long)ms);
	return buf;
}

static void become_open(struct h2_conn *c)
{
	c->state = ST_OPEN;
	c->was_open = true;
	c->last_activity = h2_now_ms();
	h2_timer_cancel(c->loop, &c->deadline);
	if (c->lim.keepalive_ms)
		h2_timer_arm(c->loop, &c->keepalive, c->last_activity + c->lim.keepalive_ms,
		             keepalive_fn, c);
	if (c->ops->on_open)
		c->ops->on_open(c->arg, c);
	if (c->state == ST_OPEN)
		h2_conn_flush(c);
}

/* Accepted connection: collects the client preface, then opens and hands it to the session
 * with whatever followed it.  Bytes that cannot be a preface open the connection at once, so
 * that the session answers them as it answers any protocol error. */
static void read_preface(struct h2_conn *c)
{
	while (c->state == ST_PREFACE && c->preface_len < MAGIC_LEN) {
		ssize_t n = read_some(c, c->preface + c->preface_len, MAGIC_LEN - c->preface_len);
		if (n == -EAGAIN) {
			set_events(c, EPOLLIN);
			return;
		}
		if (n <= 0)
			return;
		c->preface_len += (size_t)n;
		if (memcmp(c->preface, client_magic, c->preface_len) != 0)
			break;
	}
	if (c->state != ST_PREFACE)
		return;
	become_open(c);
	if (c->state == ST_OPEN && h2_conn_feed(c, c->preface, c->preface_len) == 0) {
		do_read(c); /* TLS may hold more than the socket shows */
		h2_conn_flush(c);
	}
}

/* The keepalive timer: a PING after keepalive_ms without input, a close when nothing arrived
 * within keepalive_timeout_ms of it.  Any input answers (a PING's ACK is input). */
static void keepalive_fn(void *arg)
{
	struct h2_conn *c = arg;
	uint64_t now = h2_now_ms(), at;

	if (c->state != ST_OPEN || !c->ng)
		return;
	if (c->ping_out && c->last_activity < c->ping_at) {
		if (now >= c->ping_at + c->lim.keepalive_timeout_ms) {
			char why[96];
			snprintf(why, sizeof(why), "no answer to a keepalive PING within %s",
			         ms_text(c->lim.keepalive_timeout_ms, (char[32]){0}, 32));
			h2_conn_close(c, -ETIMEDOUT, why);
			return;
		}
		at = c->ping_at + c->lim.keepalive_timeout_ms;
	} else if (now >= c->last_activity + c->lim.keepalive_ms) {
		if (nghttp2_submit_ping(c->ng, NGHTTP2_FLAG_NONE, NULL) != 0) {
			h2_conn_close(c, -ENOMEM, "out of memory");
			return;
		}
		c->ping_out = true;
		c->ping_at = now;
		at = now + c->lim.keepalive_timeout_ms;
		h2_conn_flush(c);
		if (c->state != ST_OPEN)
			return;
	} else {
		c->ping_out = false;
		at = c->last_activity + c->lim.keepalive_ms;
	}
	h2_timer_arm(c->loop, &c->keepalive, at, keepalive_fn, c);
}

static void do_handshake(struct h2_conn *c)
{
	struct err e = {0};
	int r = h2_tls_handshake(c->tls, &e);

	if (r == H2_TLS_WANT_READ)
		set_events(c, EPOLLIN);
	else if (r == H2_TLS_WANT_WRITE)
		set_events(c, EPOLLOUT);
	else if (r < 0)
		h2_conn_close(c, r, e.msg);
	else if (c->server) {
		c->state = ST_PREFACE;
		read_preface(c);
	} else
		become_open(c);
}

static void start_tls_or_open(struct h2_conn *c)
{
	struct err e = {0};

	if (!c->tls_cfg) {
		become_open(c);
		return;
	}
	if (h2_tls_new(&c->tls, c->tls_cfg, c->fd, c->verify_name, &e) < 0) {
		h2_conn_close(c, -EPROTO, e.msg);
		return;
	}
	c->state = ST_HANDSHAKE;
	do_handshake(c);
}

/* The first input of an accepted connection: only now a TLS session or the preface.  A peer
 * that closes without a byte (a port probe) is an orderly close, not a failed handshake. */
static void first_input(struct h2_conn *c)
{
	uint8_t b;
	ssize_t n;

	if (!c->tls_cfg) {
		c->state = ST_PREFACE;
		read_preface(c);
		return;
	}
	n = recv(c->fd, &b, 1, MSG_PEEK);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		h2_conn_close(c, n < 0 ? -errno : 0,
		              n < 0 ? "read failed" : "peer closed the connection");
		return;
	}
	start_tls_or_open(c);
}

static void conn_io(void *arg, uint32_t ev)
{
	struct h2_conn *c = arg;

	switch (c->state) {
	case ST_CONNECTING: {
		int r = h2_connect_result(c->fd);
		if (r < 0) {
			char why[128];
			snprintf(why, sizeof(why), "connect: %s", strerror(-r));
			h2_conn_close(c, r, why);
			return;
		}
		start_tls_or_open(c);
		return;
	}
	case ST_WAIT: first_input(c); return;
	case ST_HANDSHAKE: do_handshake(c); return;
	case ST_PREFACE: read_preface(c); return;
	case ST_OPEN:
		/* with an external reader only it reads (this event may predate its start) */
		if ((ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->readers)
			do_read(c);
		h2_conn_flush(c);
		return;
	default: return;
	}
}

int h2_conn_new(struct h2_conn **out, struct h2_loop *l, int fd, bool connecting,
                struct h2_tls_cfg *tls, const char *verify_name, const struct h2_conn_ops *ops,
                void *arg, struct err *e)
{
	struct h2_conn *c = calloc(1, sizeof(*c));
	int rc;

	if (!c) {
		if (fd >= 0)
			close(fd);
		return err_set(e, -ENOMEM, "connection: out of memory");
	}
	c->loop = l;
	c->fd = fd;
	c->tls_cfg = tls;
	c->ops = ops;
	c->arg = arg;
	snprintf(c->verify_name, sizeof(c->verify_name), "%s", verify_name ? verify_name : "");
	*out = c;
	if (fd < 0) {
		c->state = ST_OPEN;
		c->was_open = true;
		c->last_activity = h2_now_ms();
		return 0;
	}
	c->state = connecting ? ST_CONNECTING : ST_HANDSHAKE;
	c->events = connecting ? EPOLLOUT : EPOLLIN;
	rc = h2_loop_add_fd(l, fd, c->events | EPOLLET, conn_io, c);
	if (rc < 0) {
		close(fd);
		free(c);
		*out = NULL;
		return err_set(e, rc, "event loop: cannot watch socket: %s", strerror(-rc));
	}
	if (!connecting)
		start_tls_or_open(c);
	return 0;
}

static void deadline_fn(void *arg)
{
	struct h2_conn *c = arg;
	char why[96];

	if (c->state == ST_OPEN || c->state == ST_DEAD)
		return;
	snprintf(why, sizeof(why), "%s not completed within %s",
	         c->state == ST_PREFACE || !c->tls_cfg ? "HTTP/2 client preface" : "TLS handshake",
	         ms_text(c->lim.handshake_ms, (char[32]){0}, 32));
	h2_conn_close(c, -ETIMEDOUT, why);
}

int h2_conn_new_server(struct h2_conn **out, struct h2_loop *l, int fd, struct h2_tls_cfg *tls,
                       const struct h2_conn_limits *lim, const struct h2_conn_ops *ops, void *arg,
                       struct err *e)
{
	struct h2_conn *c = calloc(1, sizeof(*c));
	int rc;

	if (!c) {
		close(fd);
		return err_set(e, -ENOMEM, "connection: out of memory");
	}
	c->loop = l;
	c->fd = fd;
	c->tls_cfg = tls;
	c->ops = ops;
	c->arg = arg;
	c->server = true;
	if (lim)
		c->lim = *lim;
	c->state = ST_WAIT;
	c->events = EPOLLIN;
	rc = h2_loop_add_fd(l, fd, c->events | EPOLLET, conn_io, c);
	if (rc < 0) {
		close(fd);
		free(c);
		*out = NULL;
		return err_set(e, rc, "event loop: cannot watch socket: %s", strerror(-rc));
	}
	if (c->lim.handshake_ms)
		h2_timer_arm(l, &c->deadline, h2_now_ms() + c->lim.handshake_ms, deadline_fn, c);
	*out = c;
	return 0;
}

int h2_conn_client_session(struct h2_conn *c, void (*set_callbacks)(nghttp2_session_callbacks *),
                           void *ud, const struct h2_client_window *w)
{
	static const struct h2_client_window def = {1u << 20, 16u << 20, false};
	nghttp2_session_callbacks *cb = NULL;
	nghttp2_option *opt = NULL;
	nghttp2_session *ng = NULL;
	nghttp2_settings_entry iv[2];

	if (!w)
		w = &def;
	iv[0] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_ENABLE_PUSH, 0};
	iv[1] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, w->stream};
	if (nghttp2_session_callbacks_new(&cb) == 0 && nghttp2_option_new(&opt) == 0) {
		set_callbacks(cb);
		nghttp2_option_set_no_auto_window_update(opt, w->manual);
		if (nghttp2_session_client_new3(&ng, cb, ud, opt, h2_nghttp2_mem()) != 0)
			ng = NULL;
	}
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	if (!ng) {
		h2_conn_close(c, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	h2_conn_set_session(c, ng);
	if (nghttp2_submit_settings(ng, NGHTTP2_FLAG_NONE, iv, 2) != 0) {
		h2_conn_close(c, -ENOMEM, "out of memory"); /* the preface's SETTINGS is required */
		return -ENOMEM;
	}
	nghttp2_session_set_local_window_size(ng, NGHTTP2_FLAG_NONE, 0, (int32_t)w->connection);
	return 0;
}

ssize_t h2_body_read(nghttp2_session *ng, int32_t sid, uint8_t *buf, size_t len, uint32_t *flags,
                     nghttp2_data_source *src, void *ud)
{
	struct h2_body *b = src->ptr;
	size_t n = b->len - b->off;
	(void)ng;
	(void)sid;
	(void)ud;

	if (n > len)
		n = len;
	memcpy(buf, b->data + b->off, n);
	b->off += n;
	if (b->off == b->len)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

static void *mem_malloc(size_t n, void *ud)
{
	(void)ud;
	return malloc(n);
}

static void mem_free(void *p, void *ud)
{
	(void)ud;
	free(p);
}

static void *mem_calloc(size_t m, size_t n, void *ud)
{
	(void)ud;
	return calloc(m, n);
}

static void *mem_realloc(void *p, size_t n, void *ud)
{
	(void)ud;
	return realloc(p, n);
}

nghttp2_mem *h2_nghttp2_mem(void)
{
	static nghttp2_mem m = {NULL, mem_malloc, mem_free, mem_calloc, mem_realloc};
	return &m;
}
