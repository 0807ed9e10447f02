/* libFuzzer target: csi.v1.Identity and csi.v1.Controller requests through the gRPC server
 * harness (harness.h) into the controller's handlers, over an embedded store in a scratch
 * directory holding a working configuration (agent, store, protocol, storage class, CSINodes,
 * a claim with annotations) and the scripted fake agent of the unit tests (test/unit/fake_agent.h).
 * The first byte picks the method, the rest is the protobuf request.  Every 256 inputs the store
 * and the fake agent are rebuilt from scratch. */
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "controller/ctl.h"
#include "controller/grpc_service.h"
#include "fake_agent.h"
#include "harness.h"
#include "store/store.h"

static const char *const objects[] = {
    "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarAgent\",\"metadata\":"
    "{\"name\":\"storage-1\"},\"spec\":{\"external\":{\"address\":\"10.0.0.5\",\"port\":9500}}}",
    "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarStore\",\"metadata\":"
    "{\"name\":\"tank\"},\"spec\":{\"agentRef\":\"storage-1\",\"backend\":{\"zfs\":{\"pool\":"
    "\"tank\"}}}}",
    "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarProtocol\",\"metadata\":"
    "{\"name\":\"tcp\"},\"spec\":{\"protocol\":{\"nvmeofTcp\":{\"port\":4420,\"acl\":true}}}}",
    "{\"apiVersion\":\"pillar-csi.bhyoo.com/v1alpha1\",\"kind\":\"PillarStorageClass\","
    "\"metadata\":{\"name\":\"fast\"},\"spec\":{\"storeRef\":\"tank\",\"protocolRef\":\"tcp\"}}",
    "{\"apiVersion\":\"storage.k8s.io/v1\",\"kind\":\"CSINode\",\"metadata\":{\"name\":\"node-a\","
    "\"annotations\":{\"pillar-csi.bhyoo.com/nvmeof-host-nqn\":"
    "\"nqn.2014-08.org.nvmexpress:uuid:aaaa\"}}}",
    "{\"apiVersion\":\"v1\",\"kind\":\"PersistentVolumeClaim\",\"metadata\":{\"name\":\"c1\","
    "\"namespace\":\"default\",\"uid\":\"1111\",\"annotations\":{\"pillar-csi.bhyoo.com/"
    "filesystem\":\"ext4: {mkfsOptions: [-E, nodiscard]}\"}},\"spec\":{\"accessModes\":"
    "[\"ReadWriteOnce\"]}}",
};

static store *st;
static fake_agent *fa;
static struct ctl c;
static struct grpc_service identity, controller;

static void ctl_start(void)
{
	struct err e = {0};
	if (store_dir_open(fuzz_dir(), true, 50, &st, &e) < 0)
		abort();
	for (size_t i = 0; i < sizeof(objects) / sizeof(objects[0]); i++) {
		cJSON *o = NULL;
		if (json_parse_strict(objects[i], strlen(objects[i]), &o, &e) < 0 ||
		    store_create(st, o, NULL, &e) < 0)
			abort();
		cJSON_Delete(o);
	}
	fa = fake_agent_new();
	ctl_init(&c, st, fake_agent_client(fa));
}

static void ctl_stop(void)
{
	ctl_fini(&c);
	fake_agent_free(fa);
	store_close(st);
	fuzz_dir_reset();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned n;
	char path[128];

	if (!st) {
		ctl_start();
		controller_grpc_identity_service(&c, &identity);
		controller_grpc_controller_service(&c, &controller);
		fuzz_rpc_add(&identity);
		fuzz_rpc_add(&controller);
	} else if (++n % 256 == 0) {
		ctl_stop(); /* the tables point at c, which is set up again in place */
		ctl_start();
	}
	if (size < 1)
		return 0;
	fuzz_rpc_call(fuzz_rpc_pick(data[0], path, sizeof(path)), data + 1, size - 1);
	return 0;
}
