#include "controller/agentclient_grpc.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/client.h"

#define AGENT_MAX_MSG (16u << 20)

struct chan {
	struct chan *next;
	char *address;
	struct grpc_channel *ch;
};

struct grpc_agent_client {
	agentclient base;
	struct agentclient_grpc_opts o;
	pthread_mutex_t mu;
	struct chan *chans;
};

static struct grpc_channel *channel_for(struct grpc_agent_client *g, const char *address,
                                        struct grpc_status *st)
{
	struct grpc_channel *ch = NULL;
	struct err e = {0};
	pthread_mutex_lock(&g->mu);
	for (struct chan *c = g->chans; c; c = c->next)
		if (strcmp(c->address, address) == 0)
			ch = c->ch;
	if (!ch) {
		struct grpc_channel_opts co;
		struct chan *c = calloc(1, sizeof(*c));
		grpc_channel_opts_init(&co);
		co.max_msg = AGENT_MAX_MSG;
		co.initial_backoff_ms = g->o.initial_backoff_ms;
		if (g->o.tls_ca && *g->o.tls_ca) {
			co.tls_ca = g->o.tls_ca;
			co.tls_cert = g->o.tls_cert;
			co.tls_key = g->o.tls_key;
			co.server_name =
			    g->o.server_name && *g->o.server_name ? g->o.server_name : NULL;
		}
		if (c && (c->address = strdup(address)) &&
		    grpc_channel_new(&c->ch, address, &co, &e) == 0) {
			c->next = g->chans;
			g->chans = c;
			ch = c->ch;
		} else {
			if (c)
				free(c->address);
			free(c);
			st->code = GRPC_UNAVAILABLE;
			snprintf(st->msg, sizeof(st->msg), "agent %.60s: %.400s", address,
			         e.msg[0] ? e.msg : "out of memory");
		}
	}
	pthread_mutex_unlock(&g->mu);
	return ch;
}

static int invoke(agentclient *c, const char *address, const char *method,
                  const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
                  ProtobufCMessage **resp, int deadline_ms, struct grpc_status *st)
{
	struct grpc_agent_client *g = (struct grpc_agent_client *)c;
	char path[128];
	struct grpc_channel *ch;

	*resp = NULL;
	st->code = 0;
	st->msg[0] = '\0';
	ch = channel_for(g, address, st);
	if (!ch)
		return st->code;
	snprintf(path, sizeof(path), "/pillar_csi.agent.v1.AgentService/%s", method);
	int r = grpc_channel_call(ch, path, req, resp_desc, resp, deadline_ms, NULL, st);
	/* The channel words a call refused during its reconnect backoff as "<last error>
	 * (retrying in N ms)".  The countdown is a timer, not a state: without it every failed
	 * call of one outage carries the same message, so statuses built from it stay put. */
	char *cd = r != GRPC_OK ? strstr(st->msg, " (retrying in ") : NULL;
	if (cd)
		*cd = '\0';
	return r;
}

static void gclose(agentclient *c)
{
	struct grpc_agent_client *g = (struct grpc_agent_client *)c;
	while (g->chans) {
		struct chan *n = g->chans->next;
		grpc_channel_free(g->chans->ch);
		free(g->chans->address);
		free(g->chans);
		g->chans = n;
	}
	pthread_mutex_destroy(&g->mu);
	free(g);
}

static void greset_backoff(agentclient *c, const char *address)
{
	struct grpc_agent_client *g = (struct grpc_agent_client *)c;
	struct grpc_status st = {0};
	struct grpc_channel *ch = channel_for(g, address, &st);
	if (ch) /* channels live until gclose: safe to use outside the lock */
		grpc_channel_reset_backoff(ch);
}

static bool gmtls(agentclient *c)
{
	struct grpc_agent_client *g = (struct grpc_agent_client *)c;
	return g->o.tls_ca && *g->o.tls_ca;
}

static uint64_t gconn_id(agentclient *c, const char *address)
{
	struct grpc_agent_client *g = (struct grpc_agent_client *)c;
	struct grpc_status st = {0};
	struct grpc_channel *ch = channel_for(g, address, &st);
	return ch ? grpc_channel_conn_id(ch) : 0;
}

static const struct agentclient_ops gops = {.invoke = invoke,
                                            .close = gclose,
                                            .reset_backoff = greset_backoff,
                                            .mtls = gmtls,
                                            .conn_id = gconn_id};

int agentclient_grpc_new(const struct agentclient_grpc_opts *o, agentclient **out, struct err *e)
{
	struct grpc_agent_client *g = calloc(1, sizeof(*g));
	if (!g)
		return err_set(e, -ENOMEM, "agent client: out of memory");
	g->base.ops = &gops;
	if (o)
		g->o = *o;
	pthread_mutex_init(&g->mu, NULL);
	*out = &g->base;
	return 0;
}
