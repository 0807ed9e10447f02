/* libFuzzer target: the gRPC client's response path (src/grpc/client.c over src/h2).  Each input
 * is what a server sends after its SETTINGS frame — HEADERS with HPACK, DATA with the gRPC
 * message framing, trailers, RST_STREAM, GOAWAY, anything — answering one unary call
 * (/pillar_csi.agent.v1.AgentService/GetCapabilities) on a fresh channel to a socket peer
 * (harness.h: fuzz_peer_*).  The call must end with a status (OK with a message that unpacked,
 * or an error code), never crash, hang past its deadline or leak. */
#include <stdio.h>
#include <stdlib.h>

#include "grpc/client.h"
#include "harness.h"
#include "pillar_csi/agent/v1/agent.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	PillarCsi__Agent__V1__GetCapabilitiesRequest rq =
	    PILLAR_CSI__AGENT__V1__GET_CAPABILITIES_REQUEST__INIT;
	struct grpc_channel_opts o;
	struct grpc_channel *ch;
	struct grpc_status st = {0};
	ProtobufCMessage *resp = NULL;
	char target[64];
	int port, code;

	fuzz_peer_start(&port);
	snprintf(target, sizeof(target), "127.0.0.1:%d", port);
	grpc_channel_opts_init(&o);
	o.max_msg = 65536;
	if (grpc_channel_new(&ch, target, &o, NULL) < 0)
		abort();
	fuzz_peer_answer(data, size);
	code = grpc_channel_call(ch, "/pillar_csi.agent.v1.AgentService/GetCapabilities", &rq.base,
	                         &pillar_csi__agent__v1__get_capabilities_response__descriptor,
	                         &resp, 2000, NULL, &st);
	if ((code == GRPC_OK) != (resp != NULL))
		abort(); /* OK comes with a message, an error never does */
	protobuf_c_message_free_unpacked(resp, NULL);
	grpc_channel_free(ch);
	fuzz_peer_wait();
	return 0;
}
