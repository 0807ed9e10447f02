#include "call/call.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "applets.h"
#include "base/json.h"
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

int call_main(int argc, char **argv)
{
	const char *ca = "", *cert = "", *key = "", *server_name = "";
	int64_t timeout_ms = 30000;
	bool pretty = false, proto_names = false;
	const struct flag_def defs[] = {
	    {"timeout", FLAG_DURATION, &timeout_ms, "deadline of the call", false},
	    {"tls-ca", FLAG_STRING, &ca, "CA (PEM) to verify the server: enables TLS", false},
	    {"tls-cert", FLAG_STRING, &cert, "client certificate (PEM) for mutual TLS", false},
	    {"tls-key", FLAG_STRING, &key, "client private key (PEM) for mutual TLS", false},
	    {"server-name", FLAG_STRING, &server_name, "name expected in the server certificate",
	     false},
	    {"pretty", FLAG_BOOL, &pretty, "indent the JSON response", false},
	    {"proto-names", FLAG_BOOL, &proto_names,
	     "name the response's fields as the .proto does (snake_case) instead of lowerCamelCase",
	     false},
	};
	const size_t ndefs = sizeof(defs) / sizeof(defs[0]);
	char **pos = calloc((size_t)argc + 1, sizeof(char *));
	int npos = 0, r, rc = 1;
	struct err e = {0};
	cJSON *req_json = NULL;
	ProtobufCMessage *req = NULL, *resp = NULL;
	struct grpc_channel *ch = NULL;

	if (!pos)
		return 1;
	r = flags_parse_mixed("pillar-csi call", defs, ndefs, argc, argv, pos, &npos, &e);
	if (r == FLAGS_HELP) {
		flags_usage(
		    stdout, "pillar-csi call",
		    "One gRPC call: pillar-csi call ADDRESS /package.Service/Method [JSON|-]\n"
		    "ADDRESS is unix:///path or host:port; the request is a JSON object (default "
		    "{})\n"
		    "whose fields are named as in the .proto (volume_id) or in lowerCamelCase\n"
		    "(volumeId); the response is printed as proto3 JSON, fields in lowerCamelCase.",
		    defs, ndefs);
		free(pos);
		return 0;
	}
	if (r < 0 || r == FLAGS_VERSION || npos < 2 || npos > 3) {
		fprintf(stderr, "%s\n",
		        r < 0 ? e.msg
		              : "usage: pillar-csi call [flags] ADDRESS "
		                "/package.Service/Method [JSON|-]");
		free(pos);
		return 2;
	}
	const ProtobufCMethodDescriptor *m = find_method(pos[1]);
	if (!m) {
		fprintf(stderr,
		        "pillar-csi call: unknown method %s (known services: "
		        "pillar_csi.agent.v1.AgentService, csi.v1.Identity, csi.v1.Controller, "
		        "csi.v1.Node, grpc.health.v1.Health)\n",
		        pos[1]);
		free(pos);
		return 2;
	}
	{
		char *text = NULL;
		size_t len = 0;
		if (npos == 3 && strcmp(pos[2], "-") == 0)
			text = read_stdin(&len);
		else if (npos == 3)
			text = strdup(pos[2]), len = strlen(pos[2]);
		else
			text = strdup("{}"), len = 2;
		r = text ? json_parse_strict(text, len, &req_json, &e) : -1;
		free(text);
		if (r < 0 || pbjson_to_message(m->input, req_json, &req, &e) < 0) {
			fprintf(stderr, "pillar-csi call: bad request: %s\n", e.msg);
			rc = 2;
			goto out;
		}
	}
	struct grpc_channel_opts co;
	grpc_channel_opts_init(&co);
	co.max_msg = 16u << 20;
	if (*ca) {
		co.tls_ca = ca;
		co.tls_cert = *cert ? cert : NULL;
		co.tls_key = *key ? key : NULL;
		co.server_name = *server_name ? server_name : NULL;
	}
	if (grpc_channel_new(&ch, pos[0], &co, &e) < 0) {
		fprintf(stderr, "UNAVAILABLE: %s\n", e.msg);
		goto out;
	}
	struct grpc_status st = {0};
	if (grpc_channel_call(ch, pos[1], req, m->output, &resp, timeout_ms, NULL, &st) !=
	    GRPC_OK) {
		fprintf(stderr, "%s: %s\n", grpc_code_name(st.code), st.msg);
		goto out;
	}
	cJSON *out = pbjson_from_message(resp, proto_names ? PBJSON_PROTO_NAMES : 0);
	char *s = out ? (pretty ? cJSON_Print(out) : cJSON_PrintUnformatted(out)) : NULL;
	if (s) {
		printf("%s\n", s);
		rc = 0;
	}
	cJSON_free(s);
	cJSON_Delete(out);
out:
	if (resp)
		protobuf_c_message_free_unpacked(resp, NULL);
	if (req)
		protobuf_c_message_free_unpacked(req, NULL);
	grpc_channel_free(ch);
	cJSON_Delete(req_json);
	free(pos);
	return rc;
}
