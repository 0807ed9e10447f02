/* fake_agent — a scripted in-memory agentclient for the controller unit tests.
 *
 * Every call is recorded in order (method, address, deadline, a copy of the request and an
 * optional snapshot string taken by a test hook at call time, so a test can assert what the
 * store looked like when the agent was called).  Results: one-shot scripted failures per method
 * (fake_agent_fail), else a default success answer derived from the request (CreateVolume echoes
 * the size with a device path, ExportVolume echoes the endpoint with NQN
 * nqn.2026-01.com.bhyoo.pillar-csi:<pool>.<name>, CreateSnapshot echoes the IDs with
 * size_bytes (1 GiB unless set), creation_time FAKE_SNAPSHOT_TIME.250 and ready_to_use,
 * ReconcileState reports every item successful
 * unless fake_agent_item_error names it).  Self-contained: links into every unit test.
 */
#ifndef PILLAR_TEST_UNIT_FAKE_AGENT_H
#define PILLAR_TEST_UNIT_FAKE_AGENT_H

#include <stdbool.h>
#include <stddef.h>

#include "controller/agentclient.h"

struct fake_call {
	char method[32];
	char address[64];
	int deadline_ms;
	ProtobufCMessage *req; /* unpacked copy */
	char *snapshot;        /* from the hook, or NULL */
};

typedef struct fake_agent fake_agent;

fake_agent *fake_agent_new(void);
void fake_agent_free(fake_agent *f); /* NULL is a no-op */
agentclient *fake_agent_client(fake_agent *f);

/* The next call of method fails with code and msg (queued, one per call). */
void fake_agent_fail(fake_agent *f, const char *method, int code, const char *msg);
/* CreateSnapshot's size_bytes from now on. */
void fake_agent_set_snapshot_size(fake_agent *f, long long bytes);
#define FAKE_SNAPSHOT_TIME 1796572800LL /* 2026-12-06T16:00:00Z */
/* Whether the transport the fake stands for is mutual TLS (agentclient_mtls). */
void fake_agent_set_mtls(fake_agent *f, bool on);
/* HealthCheck answer. */
void fake_agent_set_health(fake_agent *f, bool healthy, bool restore_pending, const char *sub_name,
                           const char *sub_msg);
/* GetCapabilities answer: backends/protocols tokens as enums; one pool. */
void fake_agent_set_caps(fake_agent *f, const char *version, bool zfs, bool lvm, bool nvmeof,
                         const char *pool, int backend_type, const char *parent_dataset,
                         const char *thin_pool, long long total, long long avail);
/* Appends a backend type to the GetCapabilities answer set by fake_agent_set_caps (e.g.
 * BACKEND_TYPE_FILE). */
void fake_agent_add_backend(fake_agent *f, int backend_type);
/* The gate as the fake sees it (a successful complete ReconcileState clears it). */
bool fake_agent_restore_pending(fake_agent *f);
/* ReconcileState item for this agent volume ID fails with this error_message (NULL: succeeds
 * again). */
void fake_agent_item_error(fake_agent *f, const char *volume_id, const char *msg);
/* A successful complete ReconcileState closes the gate (restore_pending becomes false). */

/* Hook called at every call before the answer is chosen; returns a malloc'd snapshot or NULL. */
void fake_agent_set_hook(fake_agent *f, char *(*hook)(void *arg, const char *method), void *arg);

size_t fake_agent_ncalls(const fake_agent *f);
const struct fake_call *fake_agent_call(const fake_agent *f, size_t i);
/* Number of recorded calls of method. */
size_t fake_agent_count(const fake_agent *f, const char *method);
/* "A,B,C": the methods called so far, comma-separated (static buffer). */
const char *fake_agent_log(const fake_agent *f);
void fake_agent_reset_log(fake_agent *f);

#endif
