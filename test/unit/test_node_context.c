/* Unit tests of the volume_context checks that run before the node writes the connect line to
 * the kernel's fabrics device (csi.md §7.1 step 4, §7.2): a value holding the line's separators
 * would add kernel options.  The real connect (nvme_kernel_ops_sys) writes to a fake fabrics
 * file, which must stay empty for every refused value. */
#include <stdio.h>
#include <string.h>

#include "fakes/node/fakemount.h"
#include "fakes/node/fakesys.h"
#include "node/service.h"
#include "node_fixture.h"
#include "nvme/initiator.h"
#include "testutil.h"

/* Nothing reaches the fabrics device for a value that would add kernel options. */
START_TEST(test_context_injection_writes_nothing)
{
	static const char *const bad[][2] = {
	    {"address", "1.2.3.4,nr_io_queues=1"},
	    {"address", "10.0.0.5\nnqn=x"},
	    {"address", "host_name"},
	    {"address", "-a.example"},
	    {"address", "[fd00::1]"},
	    {"target_id", "nqn.2026-01.com.bhyoo.pillar-csi:tank.x,hostnqn=evil"},
	    {"target_id", "nqn.2026-01.com.bhyoo.pillar-csi:tank.x=1"},
	    {"target_id", "nqn.2026 01"},
	    {"target_id", "iqn.2026-01.com.example:x"},
	    {"port", "4420,queue_size=1"},
	    {"port", "0"},
	    {"port", "65536"},
	    {"port", "-1"},
	    {"port", " 4420"},
	    {"pillar-csi.bhyoo.com/nvmeof-ctrl-loss-tmo", "5,nr_io_queues=1"},
	    {"pillar-csi.bhyoo.com/nvmeof-reconnect-delay", " 5"},
	    {"pillar-csi.bhyoo.com/nvmeof-max-queue-size", "+64"},
	    {"pillar-csi.bhyoo.com/nvmeof-ctrl-loss-tmo", "99999999999"},
	};
	static const char *const good[][2] = {
	    {"address", "fd00::5"}, {"address", "storage-1.example.com"}, {"port", "65535"}};
	struct env v;
	struct sreq s;
	struct grpc_status st;
	char fabrics[4400];
	env_init(&v, 0);
	snprintf(fabrics, sizeof(fabrics), "%s/nvme-fabrics", v.dev);
	v.kops = nvme_kernel_ops_sys; /* the real connect, writing to the fake fabrics file */
	v.kops.ctx = fabrics;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *extra[] = {bad[i][0], bad[i][1], NULL};
		sreq_init(&s, &v, 0, extra);
		for (size_t j = 0; j + 1 < s.r.n_volume_context; j++) /* the base entry takes it */
			if (!strcmp(s.ents[j]->key, bad[i][0]))
				s.ents[j]->value = (char *)bad[i][1];
		ck_assert_int_eq(stage(&v, &s, &st), GRPC_INVALID_ARGUMENT);
		ck_assert_msg(strstr(st.msg, fmt("volume_context \"%s\"", bad[i][0])) != NULL,
		              "%s=%s: %s", bad[i][0], bad[i][1], st.msg);
		ck_assert_str_eq(tu_read(v.dev, "nvme-fabrics"), "");
	}
	ck_assert_str_eq(st.msg,
	                 "volume_context \"pillar-csi.bhyoo.com/nvmeof-ctrl-loss-tmo\" must be an "
	                 "integer of at least -1, not \"99999999999\"");
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		const char *extra[] = {good[i][0], good[i][1], NULL};
		sreq_init(&s, &v, 0, extra);
		for (size_t j = 0; j + 1 < s.r.n_volume_context; j++)
			if (!strcmp(s.ents[j]->key, good[i][0]))
				s.ents[j]->value = (char *)good[i][1];
		/* accepted: the line is written (the fake device then gives no answer) */
		ck_assert_int_ne(stage(&v, &s, &st), GRPC_INVALID_ARGUMENT);
		ck_assert_ptr_nonnull(
		    strstr(tu_read(v.dev, "nvme-fabrics"),
		           fmt("transport=tcp,traddr=%s,trsvcid=%s,nqn=" NQN,
		               !strcmp(good[i][0], "address") ? good[i][1] : "10.0.0.5",
		               !strcmp(good[i][0], "port") ? good[i][1] : "4420")));
		tu_write(v.dev, "nvme-fabrics", "");
	}
	env_done(&v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("node_context");
	TCase *t = tcase_create("context");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_context_injection_writes_nothing);
	suite_add_tcase(s, t);
	return tu_run(s);
}
