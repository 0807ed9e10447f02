/* AgentService: CreateSnapshot, DeleteSnapshot, ListSnapshots (docs/snapshots.md "Agent API").
 * Until the backends implement them every call answers UNIMPLEMENTED. */
#include "agent/service_int.h"

#define PB(x) PillarCsi__Agent__V1__##x

static int not_built(struct grpc_status *st)
{
	return grpc_status_set(st, GRPC_UNIMPLEMENTED, "snapshots: not built yet");
}

int agent_create_snapshot(agent_service *a, const PB(CreateSnapshotRequest) * req,
                          PB(CreateSnapshotResponse) * resp, struct grpc_status *st)
{
	(void)a;
	(void)req;
	(void)resp;
	return not_built(st);
}

int agent_delete_snapshot(agent_service *a, const PB(DeleteSnapshotRequest) * req,
                          PB(DeleteSnapshotResponse) * resp, struct grpc_status *st)
{
	(void)a;
	(void)req;
	(void)resp;
	return not_built(st);
}

int agent_list_snapshots(agent_service *a, const PB(ListSnapshotsRequest) * req,
                         PB(ListSnapshotsResponse) * resp, struct grpc_status *st)
{
	(void)a;
	(void)req;
	(void)resp;
	return not_built(st);
}
