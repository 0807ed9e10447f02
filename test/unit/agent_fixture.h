/* Fixture of the agent service's component tests (test_agent_service, test_agent_snapshot,
 * test_agent_durable, test_agent_auth): the service on one `file` backend (pool "fpool" in
 * <root>/files, tu_agent_layout), a plain directory standing in for configfs (<root>/cfs) and a
 * real state directory (<root>/state), all below a temporary directory, with the service's waits
 * short.  Header-only (static): one fixture per test program. */
#ifndef PILLAR_TEST_UNIT_AGENT_FIXTURE_H
#define PILLAR_TEST_UNIT_AGENT_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "agent/config.h"
#include "agent/service.h"
#include "nvmet/nvmet.h"
#include "rules/nqn.h"
#include "testutil.h"

#define PB(x)  PillarCsi__Agent__V1__##x
#define FILE_T ((PB(BackendType))6)
#define TCP    PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP
#define NQN(v) RULES_NQN_PREFIX "fpool." v

static char root[400], cfs[480], state[480], files[480];
static agent_service *svc;
static struct agent_config cfg;
static unsigned port_id; /* preferred port ID of 127.0.0.1:4420 */

/* The service's options on the fixture's directories; a test changes what it needs and passes
 * them to af_start. */
static inline struct agent_service_opts af_opts(void)
{
	return (struct agent_service_opts){.state_dir = state,
	                                   .configfs_root = cfs,
	                                   .host_root = root, /* never the machine's /dev, /sys */
	                                   .version = "0.1.0-test",
	                                   .device_wait_ms = 300,
	                                   .create_wait_ms = 300,
	                                   .addr_wait_ms = 600,
	                                   .busy_retry_ms = 10,
	                                   .drain_wait_ms = 500};
}

/* svc made with o; fails the test on error. */
static inline void af_start(const struct agent_service_opts *o)
{
	struct err e = {0};
	ck_assert_msg(agent_service_new(&cfg, o, &svc, &e) == 0, "%s", e.msg);
}

/* The directories and the configuration; the test's setup starts the service. */
static inline void af_setup(void)
{
	snprintf(root, sizeof(root), "%s", tu_mkdtemp());
	snprintf(cfs, sizeof(cfs), "%s/cfs", root);
	snprintf(state, sizeof(state), "%s/state", root);
	snprintf(files, sizeof(files), "%s/files", root);
	tu_agent_layout(root, &cfg);
	port_id = nvmet_port_preferred_id("127.0.0.1", 4420);
}

static inline void af_teardown(void)
{
	agent_service_free(svc);
	svc = NULL;
	agent_config_clear(&cfg);
	tu_rmtree(root);
}

/* A fencing token of lifecycle uid (borrowed) at generation gen. */
static inline PB(FencingToken) af_token(const char *uid, uint64_t gen)
{
	PB(FencingToken) t = PILLAR_CSI__AGENT__V1__FENCING_TOKEN__INIT;
	t.volume_uid = (char *)uid;
	t.generation = gen;
	return t;
}

/* Whether <cfs>/nvmet/<rel> exists (a symlink counts as itself). */
static inline bool af_exists(const char *rel)
{
	char p[1200];
	struct stat st;
	snprintf(p, sizeof(p), "%s/nvmet/%s", cfs, rel);
	return lstat(p, &st) == 0;
}

/* Whether subsystem nqn is linked to the port of 127.0.0.1:4420. */
static inline bool af_linked(const char *nqn)
{
	char rel[400];
	snprintf(rel, sizeof(rel), "ports/%u/subsystems/%s", port_id, nqn);
	return af_exists(rel);
}

#endif
