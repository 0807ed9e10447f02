/* connflags — the gRPC servers' connection flags (connflags.h). */
#include "connflags.h"

#include <errno.h>

int conn_flags_opts(const struct conn_flags *f, struct grpc_server_opts *o, struct err *e)
{
	const struct {
		const char *name;
		int64_t v;
	} durations[] = {{"--handshake-timeout", f->handshake_ms},
	                 {"--idle-timeout", f->idle_ms},
	                 {"--keepalive-time", f->keepalive_ms},
	                 {"--keepalive-timeout", f->keepalive_timeout_ms}};

	for (size_t i = 0; i < sizeof(durations) / sizeof(durations[0]); i++)
		if (durations[i].v < 0)
			return err_set(e, -EINVAL, "%s must not be negative", durations[i].name);
	if (f->keepalive_ms > 0 && f->keepalive_timeout_ms == 0)
		return err_set(e, -EINVAL,
		               "--keepalive-timeout must be positive when --keepalive-time is set");
	if (f->max_conns < 1 || f->max_conns > 1000000)
		return err_set(e, -EINVAL,
		               "--max-connections must be between 1 and 1000000, not %lld",
		               (long long)f->max_conns);
	if (f->max_per_peer < 0 || f->max_per_peer > f->max_conns)
		return err_set(e, -EINVAL,
		               "--max-connections-per-peer must be between 0 and --max-connections "
		               "(%lld), not %lld",
		               (long long)f->max_conns, (long long)f->max_per_peer);
	grpc_server_opts_init(o);
	o->handshake_timeout_ms = (uint64_t)f->handshake_ms;
	o->idle_timeout_ms = (uint64_t)f->idle_ms;
	o->keepalive_ms = (uint64_t)f->keepalive_ms;
	o->keepalive_timeout_ms = (uint64_t)f->keepalive_timeout_ms;
	o->max_conns = (unsigned)f->max_conns;
	o->max_conns_per_peer = (unsigned)f->max_per_peer;
	return 0;
}
