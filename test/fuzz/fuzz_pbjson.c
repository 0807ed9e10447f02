/* libFuzzer target: pbjson (src/pbjson), the proto3 JSON mapping `pillar-csi call` reads and
 * every call log prints.  data[0] picks a message type of the CSI and agent APIs; bit 7 of
 * data[1] picks the input: JSON text for pbjson_to_message, or protobuf bytes that protobuf-c
 * unpacks (as the server does) before pbjson_log_text and pbjson_from_message print them.
 * Whatever converts must convert back: JSON we print must read again (abort otherwise). */
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "csi.pb-c.h"
#include "harness.h"
#include "pbjson/pbjson.h"
#include "pillar_csi/agent/v1/agent.pb-c.h"

static const ProtobufCMessageDescriptor *const types[] = {
    &csi__v1__create_volume_request__descriptor,
    &csi__v1__create_volume_response__descriptor,
    &csi__v1__delete_volume_request__descriptor,
    &csi__v1__controller_publish_volume_request__descriptor,
    &csi__v1__controller_expand_volume_request__descriptor,
    &csi__v1__get_capacity_response__descriptor,
    &csi__v1__node_stage_volume_request__descriptor,
    &csi__v1__node_publish_volume_request__descriptor,
    &csi__v1__node_get_volume_stats_response__descriptor,
    &csi__v1__validate_volume_capabilities_response__descriptor,
    &pillar_csi__agent__v1__create_volume_request__descriptor,
    &pillar_csi__agent__v1__export_volume_request__descriptor,
    &pillar_csi__agent__v1__reconcile_state_request__descriptor,
    &pillar_csi__agent__v1__get_capabilities_response__descriptor,
    &pillar_csi__agent__v1__list_volumes_response__descriptor,
    &pillar_csi__agent__v1__health_check_response__descriptor,
};

static void back_again(const ProtobufCMessage *m)
{
	char *log = pbjson_log_text(m);
	ProtobufCMessage *again = NULL;
	struct err e = {0};
	for (unsigned flags = 0; flags < 2; flags++) {
		cJSON *j = pbjson_from_message(m, flags);
		if (!j)
			abort();
		if (pbjson_to_message(m->descriptor, j, &again, &e) < 0)
			abort(); /* what we print must read back */
		protobuf_c_message_free_unpacked(again, NULL);
		cJSON_Delete(j);
	}
	free(log);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const ProtobufCMessageDescriptor *d;
	ProtobufCMessage *m = NULL;
	struct err e = {0};
	if (size < 2)
		return 0;
	d = types[data[0] % (sizeof(types) / sizeof(types[0]))];
	if (data[1] & 0x80) {
		m = protobuf_c_message_unpack(d, NULL, size - 2, data + 2);
	} else {
		cJSON *j = NULL;
		if (json_parse_strict((const char *)data + 2, size - 2, &j, &e) < 0)
			return 0;
		if (pbjson_to_message(d, j, &m, &e) < 0)
			m = NULL;
		cJSON_Delete(j);
	}
	if (m) {
		back_again(m);
		protobuf_c_message_free_unpacked(m, NULL);
	}
	return 0;
}
