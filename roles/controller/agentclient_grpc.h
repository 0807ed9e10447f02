/* agentclient_grpc — the agent client over our gRPC channel: one channel (one HTTP/2
 * connection) per agent address, created on first use and shared by every call to it. */
#ifndef PILLAR_ROLES_CONTROLLER_AGENTCLIENT_GRPC_H
#define PILLAR_ROLES_CONTROLLER_AGENTCLIENT_GRPC_H

#include "base/err.h"
#include "controller/agentclient.h"

struct agentclient_grpc_opts {
	const char *tls_cert, *tls_key, *tls_ca; /* all three or none (mTLS) */
	const char *server_name;                 /* name expected in agent certificates */
	/* each channel's initial reconnect backoff (grpc_channel_opts); 0: the channel's default */
	uint64_t initial_backoff_ms;
};

/* 0 or a negative errno; close with agentclient_close(). */
int agentclient_grpc_new(const struct agentclient_grpc_opts *o, agentclient **out, struct err *e);

#endif
