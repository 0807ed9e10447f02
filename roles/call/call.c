#include "call/call.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "applets.h"
#include "csi.pb-c.h"
#include "grpc/client.h"
#include "grpc/health/v1/health.pb-c.h"
#include "pbjson/pbjson.h"
#include "pillar_csi/agent/v1/agent.pb-c.h"

static const ProtobufCServiceDescriptor *const services[] = {
    &pillar_csi__agent__v1__agent_service__descriptor,
    &csi__v1__identity__descriptor,
    &csi__v1__controller__descriptor,
    &csi__v1__node__descriptor,
    &grpc__health__v1__health__descriptor,
};

static const ProtobufCMethodDescriptor *find_method(const char *path)
{
	const char *slash;
	if (path[0] != '/' || !(slash = strchr(path + 1, '/')))
		return NULL;
	for (size_t i = 0; i < sizeof(services) / sizeof(services[0]); i++) {
		const ProtobufCServiceDescriptor *s = services[i];
		size_t n = (size_t)(slash - path - 1);
		if (strlen(s->name) != n || strncmp(s->name, path + 1, n) != 0)
			continue;
		for (unsigned m = 0; m < s->n_methods; m++)
			if (strcmp(s->methods[m].name, slash + 1) == 0)
				return &s->methods[m];
	}
	return NULL;
}

static char *read_stdin(size_t *len)
{
	char *text = NULL, buf[4096];
	size_t n;
	FILE *mem = open_memstream(&text, len);
	if (!mem)
		return NULL;
	while ((n = fread(buf, 1, sizeof(buf), stdin)) > 0)
		fwrite(buf, 1, n, mem);
	fclose(mem);
	return text;
}

/* The command line of one call. */
struct call_args {
	const char *ca, *cert, *key, *server_name;
	int64_t timeout_ms;
	bool pretty, proto_names;
	char **pos; /* ADDRESS, METHOD and the optional JSON|- */
	int npos;
};

/* Parses argv into a: -1 to go on, else the exit code (0 after --help). */
static int parse_args(int argc, char **argv, struct call_args *a)
{
	const struct flag_def defs[] = {
	    {"timeout", FLAG_DURATION, &a->timeout_ms, "deadline of the call", false},
	    {"tls-ca", FLAG_STRING, &a->ca, "CA (PEM) to verify the server: enables TLS", false},
	    {"tls-cert", FLAG_STRING, &a->cert, "client certificate (PEM) for mutual TLS", false},
	    {"tls-key", FLAG_STRING, &a->key, "client private key (PEM) for mutual TLS", false},
	    {"server-name", FLAG_STRING, &a->server_name, "name expected in the server certificate",
	     false},
	    {"pretty", FLAG_BOOL, &a->pretty, "indent the JSON response", false},
	    {"proto-names", FLAG_BOOL, &a->proto_names,
	     "name the response's fields as the .proto does (snake_case) instead of lowerCamelCase",
	     false},
	};
	const size_t ndefs = sizeof(defs) / sizeof(defs[0]);
	struct err e = {0};
	int r = flags_parse_mixed("pillar-csi call", defs, ndefs, argc, argv, a->pos, &a->npos, &e);

	if (r == FLAGS_HELP) {
		flags_usage(
		    stdout, "pillar-csi call",
		    "One gRPC call: pillar-csi call ADDRESS /package.Service/Method [JSON|-]\n"
		    "ADDRESS is unix:///path or host:port; the request is a JSON object (default "
		    "{})\n"
		    "whose fields are named as in the .proto (volume_id) or in lowerCamelCase\n"
		    "(volumeId); the response is printed as proto3 JSON, fields in lowerCamelCase.",
		    defs, ndefs);
		return 0;
	}
	if (r < 0 || r == FLAGS_VERSION || a->npos < 2 || a->npos > 3) {
		fprintf(stderr, "%s\n",
		        r < 0 ? e.msg
		              : "usage: pillar-csi call [flags] ADDRESS "
		                "/package.Service/Method [JSON|-]");
		return 2;
	}
	return -1;
}

/* The request of method m from the command line's JSON (or stdin for "-", {} when none): 0 with
 * *req, or the exit code 2 after a message. */
static int read_request(const struct call_args *a, const ProtobufCMethodDescriptor *m,
                        ProtobufCMessage **req)
{
	struct err e = {0};
	char *text = NULL;
	size_t len = 0;
	int r;

	if (a->npos == 3 && strcmp(a->pos[2], "-") == 0)
		text = read_stdin(&len);
	else if (a->npos == 3)
		text = strdup(a->pos[2]), len = strlen(a->pos[2]);
	else
		text = strdup("{}"), len = 2;
	r = text ? pbjson_parse_text(m->input, text, len, req, &e)
	         : err_set(&e, -ENOMEM, "%s", "out of memory");
	free(text);
	if (r < 0) {
		fprintf(stderr, "pillar-csi call: bad request: %s\n", e.msg);
		return 2;
	}
	return 0;
}

/* Sends req and prints the response: the exit code (0, or 1 after the status on stderr). */
static int send_and_print(const struct call_args *a, const ProtobufCMethodDescriptor *m,
                          const ProtobufCMessage *req)
{
	struct grpc_channel_opts co;
	struct grpc_channel *ch = NULL;
	struct grpc_status st = {0};
	ProtobufCMessage *resp = NULL;
	struct err e = {0};
	int rc = 1;

	grpc_channel_opts_init(&co);
	co.max_msg = 16u << 20;
	if (*a->ca) {
		co.tls_ca = a->ca;
		co.tls_cert = *a->cert ? a->cert : NULL;
		co.tls_key = *a->key ? a->key : NULL;
		co.server_name = *a->server_name ? a->server_name : NULL;
	}
	if (grpc_channel_new(&ch, a->pos[0], &co, &e) < 0) {
		fprintf(stderr, "UNAVAILABLE: %s\n", e.msg);
		return 1;
	}
	if (grpc_channel_call(ch, a->pos[1], req, m->output, &resp, a->timeout_ms, NULL, &st) !=
	    GRPC_OK) {
		fprintf(stderr, "%s: %s\n", grpc_code_name(st.code), st.msg);
	} else {
		char *s = pbjson_text(resp, (a->proto_names ? PBJSON_PROTO_NAMES : 0) |
		                                (a->pretty ? PBJSON_PRETTY : 0));
		if (s) {
			printf("%s\n", s);
			rc = 0;
		}
		free(s);
	}
	if (resp)
		protobuf_c_message_free_unpacked(resp, NULL);
	grpc_channel_free(ch);
	return rc;
}

int call_main(int argc, char **argv)
{
	struct call_args a = {
	    .ca = "", .cert = "", .key = "", .server_name = "", .timeout_ms = 30000};
	const ProtobufCMethodDescriptor *m;
	ProtobufCMessage *req = NULL;
	int rc;

	a.pos = calloc((size_t)argc + 1, sizeof(char *));
	if (!a.pos)
		return 1;
	rc = parse_args(argc, argv, &a);
	if (rc >= 0)
		goto out;
	m = find_method(a.pos[1]);
	if (!m) {
		fprintf(stderr,
		        "pillar-csi call: unknown method %s (known services: "
		        "pillar_csi.agent.v1.AgentService, csi.v1.Identity, csi.v1.Controller, "
		        "csi.v1.Node, grpc.health.v1.Health)\n",
		        a.pos[1]);
		rc = 2;
		goto out;
	}
	rc = read_request(&a, m, &req);
	if (rc == 0)
		rc = send_and_print(&a, m, req);
	if (req)
		protobuf_c_message_free_unpacked(req, NULL);
out:
	free(a.pos);
	return rc;
}
