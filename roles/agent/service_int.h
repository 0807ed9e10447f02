/* Internal to roles/agent/service*.c: the service state and shared helpers. */
#ifndef PILLAR_ROLES_AGENT_SERVICE_INT_H
#define PILLAR_ROLES_AGENT_SERVICE_INT_H

#include <pthread.h>
#include <stdint.h>

#include "agent/fence.h"
#include "agent/service.h"
#include "backend/backend.h"
#include "base/keylock.h"
#include "base/time.h"
#include "nvmet/nvmet.h"

#define AGENT_VOLID_MAX 260

struct agent_service {
	char *state_dir, *version, *host_root;
	int device_wait_ms, create_wait_ms, addr_wait_ms, busy_retry_ms, drain_wait_ms;
	void (*between_phases)(void *arg);
	void *hook_arg;
	backend **backends;
	size_t n_backends;
	nvmet *nv;

	pthread_mutex_t mu; /* gate, drain, inflight */
	pthread_cond_t cv;
	bool gate_open, draining;
	int inflight;
	struct keylock locks; /* per volume ID; waits (the controller retries the same volume) */

	pthread_mutex_t nv_mu; /* configfs */
	int target_auth;       /* 0 not probed, 1 the kernel has target authentication, -1 not;
	                               * under nv_mu (svc_auth_supported) */
	struct svc_auth_use *auth_uses;    /* what each volume asks of each host entry (auth.c), */
	size_t n_auth_uses, cap_auth_uses; /* under nv_mu */
	pthread_mutex_t reconcile_mu;      /* one ReconcileState at a time */

	/* HealthCheck's pool/VG checks exec zpool/lvs: their results are kept for
	 * AGENT_HEALTH_CACHE_MS (agent-api.md §9), under health_mu. */
	pthread_mutex_t health_mu;
	struct agent_health_cache {
		int64_t at_ms; /* 0: never checked */
		bool ok;
		char msg[512];
	} hc_zfs, hc_lvm;
	int health_cache_ms;
};

#define AGENT_HEALTH_CACHE_MS 10000

/* A parsed agent volume ID. */
struct volref {
	char id[AGENT_VOLID_MAX];
	char pool[AGENT_VOLID_MAX];
	char name[AGENT_VOLID_MAX];
};

/* Door for every RPC but Drain: UNAVAILABLE `agent is draining`; else counts the call in flight
 * (leave() must follow). */
int svc_enter(agent_service *a, struct grpc_status *st);
void svc_leave(agent_service *a);
/* UNAVAILABLE `export restore pending: <rpc>: …` while the gate is closed. */
int svc_gate(agent_service *a, const char *rpc, struct grpc_status *st);

/* INVALID_ARGUMENT `invalid volume id "<id>"`. */
int svc_parse_volume_id(const char *id, struct volref *v, struct grpc_status *st);
/* FAILED_PRECONDITION `pool "<p>" is not configured on this agent` (code may be overridden). */
backend *svc_find_pool(agent_service *a, const char *pool);
/* Which backend kinds the agent's configuration has pools of. */
void svc_backend_kinds(const agent_service *a, bool *zfs, bool *lvm, bool *file);
/* Backend for a request: pool configured (FAILED_PRECONDITION), type supported and matching
 * (INVALID_ARGUMENT). */
int svc_route(agent_service *a, const struct volref *v, int backend_type, backend **out,
              struct grpc_status *st);
/* Layout check of §5.1 plus the params rules; fills the create options. */
int svc_layout(agent_service *a, backend *b, const struct volref *v,
               const PillarCsi__Agent__V1__BackendParams *p, struct backend_create_opts *o,
               struct grpc_status *st);
/* The status of a failed write (or read) of the agent's own state (fencing marks, identity
 * pins, the drain mark): RESOURCE_EXHAUSTED when its file system or quota is full or memory
 * ran out (grpc_code_from_errno), else INTERNAL; e's message names the file.  Returns the
 * code. */
int svc_state_failed(struct grpc_status *st, const struct err *e);
int svc_fence(agent_service *a, const char *volume_id, const PillarCsi__Agent__V1__FencingToken *t,
              enum fence_class cls, struct grpc_status *st);
/* At start: every `file` image a power cut left empty whose live fencing mark recorded its
 * size (imageBytes) is given that size again, fsync'd (failures are logged). */
void svc_complete_images(agent_service *a);
/* The marks' journal's restore (marklog.h) at start: a `file` image a replayed live mark
 * records and a power cut took is made again, of its recorded size, fsync'd (failures are
 * logged); arg is the agent_service. */
void svc_restore_image(void *arg, const char *name);
/* svc_fence of a CreateVolume that makes a `file` image of image_bytes without fsyncing it
 * when *recorded comes back true (agent_fence_check_create). */
int svc_fence_create(agent_service *a, const char *volume_id,
                     const PillarCsi__Agent__V1__FencingToken *t, int64_t image_bytes,
                     bool *recorded, bool *written, struct grpc_status *st);
/* Bounded wait for a backing device, with one LVM activation (nvmet.md §10.1).  deadline_ms is
 * CLOCK_MONOTONIC milliseconds.  UNAVAILABLE `backing device <path> of volume "<id>" is not
 * available (pool not imported or volume group not active)`. */
int svc_wait_backing(agent_service *a, backend *b, const struct volref *v, const char *path,
                     int64_t deadline_ms, struct grpc_status *st);
/* CreateVolume's step for a request with a content source (service_snapshot.c): checks the
 * source and makes volume v from it (o: the create options of the request).  The gRPC code. */
int svc_clone_volume(agent_service *a, backend *b, const struct volref *v,
                     const PillarCsi__Agent__V1__CreateVolumeRequest *req,
                     const struct backend_create_opts *o, struct grpc_status *st);
/* Sets OK with an empty message; returns GRPC_OK. */
int svc_ok(struct grpc_status *st);
/* A copy of s ("" for NULL) for a response field; NULL when out of memory (the handler then
 * answers grpc_status_oom, grpc/status.h). */
char *svc_strdup(const char *s);

/* ---- HostAuth (roles/agent/auth.c, docs/authentication.md "Keys") ---------------------------- */

/* INVALID_ARGUMENT naming `<field>.<member>` (never a key's value) when h is malformed: host
 * NQN, hash, group, a DHHC-1 key (required) and controller key (optional). */
int svc_auth_check(const PillarCsi__Agent__V1__HostAuth *h, const char *field,
                   struct grpc_status *st);
/* One host entry serves every volume that admits the host (docs/authentication.md "One host
 * entry, many volumes"): the agent remembers, per host and volume, the hash, group and
 * direction the volume asks for, and writes the strongest of them.  Nothing secret is kept. */
struct svc_auth_use {
	char *host, *volume;
	int hash;  /* enum nvme_dhchap_hash */
	int group; /* index of null, ffdhe2048 ... ffdhe8192 */
	bool bidir;
};
/* Records what volume asks of h's host (h checked; replacing the volume's earlier record for
 * that host).  0 or -ENOMEM.  Caller holds nv_mu. */
int svc_auth_note(agent_service *a, const char *volume, const PillarCsi__Agent__V1__HostAuth *h);
/* Forgets the records of volume for host (NULL: every host), or every record (volume NULL).
 * Caller holds nv_mu. */
void svc_auth_forget(agent_service *a, const char *volume, const char *host);
void svc_auth_uses_free(agent_service *a);
/* Notes h for volume, then writes its host entry under nv_mu: the strongest hash and group any
 * recorded volume of that host asks for, h's keys, and h's controller key when it has one (an
 * entry's controller key is left in place otherwise).  The code: FAILED_PRECONDITION naming
 * CONFIG_NVME_TARGET_AUTH on a kernel without target authentication, RESOURCE_EXHAUSTED. */
int svc_auth_write(agent_service *a, const char *volume, const PillarCsi__Agent__V1__HostAuth *h,
                   struct grpc_status *st);
/* Whether the kernel has target authentication (probed once, nvmet_host_auth_probe). */
bool svc_auth_supported(agent_service *a);

#endif
