/* fake_agent — scripted agentclient for the controller unit tests (see fake_agent.h). */
#include "fake_agent.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_MAX_FAIL  64
#define FAKE_MAX_ITEMS 32

struct fake_fail {
	char method[32];
	int code;
	char msg[256];
	bool used;
};

struct fake_agent {
	agentclient base;
	pthread_mutex_t mu;
	struct fake_call *calls;
	size_t n, cap;
	struct fake_fail fails[FAKE_MAX_FAIL];
	size_t nfails;
	struct {
		char id[160], msg[256];
	} items[FAKE_MAX_ITEMS];
	size_t nitems;
	bool healthy, pending, mtls;
	long long snapshot_size; /* CreateSnapshot's size_bytes */
	char sub_name[64], sub_msg[256];
	ProtobufCMessage *caps;
	char *(*hook)(void *, const char *);
	void *hook_arg;
	char logbuf[8192];
};

static ProtobufCMessage *clone_msg(const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(n ? n : 1);
	if (!buf)
		return NULL;
	protobuf_c_message_pack(m, buf);
	ProtobufCMessage *out = protobuf_c_message_unpack(m->descriptor, NULL, n, buf);
	free(buf);
	return out;
}

static void nqn_of(const char *vid, char *out, size_t cap)
{
	char tmp[256];
	snprintf(tmp, sizeof(tmp), "%s", vid);
	char *s = strchr(tmp, '/');
	if (s)
		*s = '.';
	snprintf(out, cap, "nqn.2026-01.com.bhyoo.pillar-csi:%s", tmp);
}

static ProtobufCMessage *answer(struct fake_agent *f, const char *method,
                                const ProtobufCMessage *req)
{
	if (!strcmp(method, "CreateVolume")) {
		const PillarCsi__Agent__V1__CreateVolumeRequest *r = (const void *)req;
		PillarCsi__Agent__V1__CreateVolumeResponse o =
		    PILLAR_CSI__AGENT__V1__CREATE_VOLUME_RESPONSE__INIT;
		char dev[300];
		snprintf(dev, sizeof(dev), "/dev/zvol/%s", r->volume_id);
		o.device_path = dev;
		o.capacity_bytes = r->capacity_bytes;
		return clone_msg(&o.base);
	}
	if (!strcmp(method, "CreateSnapshot")) {
		const PillarCsi__Agent__V1__CreateSnapshotRequest *r = (const void *)req;
		PillarCsi__Agent__V1__CreateSnapshotResponse o =
		    PILLAR_CSI__AGENT__V1__CREATE_SNAPSHOT_RESPONSE__INIT;
		PillarCsi__Agent__V1__SnapshotInfo si = PILLAR_CSI__AGENT__V1__SNAPSHOT_INFO__INIT;
		Google__Protobuf__Timestamp ts = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
		ts.seconds = FAKE_SNAPSHOT_TIME;
		ts.nanos = 250000000;
		si.snapshot_id = r->snapshot_id;
		si.source_volume_id = r->source_volume_id;
		si.size_bytes = f->snapshot_size;
		si.creation_time = &ts;
		si.ready_to_use = true;
		o.snapshot = &si;
		return clone_msg(&o.base);
	}
	if (!strcmp(method, "ExpandVolume")) {
		const PillarCsi__Agent__V1__ExpandVolumeRequest *r = (const void *)req;
		PillarCsi__Agent__V1__ExpandVolumeResponse o =
		    PILLAR_CSI__AGENT__V1__EXPAND_VOLUME_RESPONSE__INIT;
		o.capacity_bytes = r->requested_bytes;
		return clone_msg(&o.base);
	}
	if (!strcmp(method, "ExportVolume")) {
		const PillarCsi__Agent__V1__ExportVolumeRequest *r = (const void *)req;
		PillarCsi__Agent__V1__ExportVolumeResponse o =
		    PILLAR_CSI__AGENT__V1__EXPORT_VOLUME_RESPONSE__INIT;
		PillarCsi__Agent__V1__ExportInfo ei = PILLAR_CSI__AGENT__V1__EXPORT_INFO__INIT;
		char nqn[300];
		nqn_of(r->volume_id, nqn, sizeof(nqn));
		ei.target_id = nqn;
		if (r->export_params && r->export_params->nvmeof_tcp) {
			ei.address = r->export_params->nvmeof_tcp->bind_address;
			ei.port = r->export_params->nvmeof_tcp->port ?: 4420;
		}
		ei.volume_ref = "1";
		o.export_info = &ei;
		return clone_msg(&o.base);
	}
	if (!strcmp(method, "HealthCheck")) {
		PillarCsi__Agent__V1__HealthCheckResponse o =
		    PILLAR_CSI__AGENT__V1__HEALTH_CHECK_RESPONSE__INIT;
		PillarCsi__Agent__V1__SubsystemHealth sh =
		    PILLAR_CSI__AGENT__V1__SUBSYSTEM_HEALTH__INIT;
		PillarCsi__Agent__V1__SubsystemHealth *shp = &sh;
		o.healthy = f->healthy;
		o.export_restore_pending = f->pending;
		o.agent_version = "0.1.0";
		if (f->sub_name[0]) {
			sh.name = f->sub_name;
			sh.healthy = f->healthy;
			sh.message = f->sub_msg;
			o.n_subsystems = 1;
			o.subsystems = &shp;
		}
		return clone_msg(&o.base);
	}
	if (!strcmp(method, "GetCapabilities")) {
		if (f->caps)
			return clone_msg(f->caps);
		PillarCsi__Agent__V1__GetCapabilitiesResponse o =
		    PILLAR_CSI__AGENT__V1__GET_CAPABILITIES_RESPONSE__INIT;
		return clone_msg(&o.base);
	}
	if (!strcmp(method, "GetCapacity")) {
		PillarCsi__Agent__V1__GetCapacityResponse o =
		    PILLAR_CSI__AGENT__V1__GET_CAPACITY_RESPONSE__INIT;
		o.total_bytes = 100LL << 30;
		o.available_bytes = 60LL << 30;
		o.used_bytes = 40LL << 30;
		return clone_msg(&o.base);
	}
	if (!strcmp(method, "ReconcileState")) {
		const PillarCsi__Agent__V1__ReconcileStateRequest *r = (const void *)req;
		PillarCsi__Agent__V1__ReconcileStateResponse o =
		    PILLAR_CSI__AGENT__V1__RECONCILE_STATE_RESPONSE__INIT;
		PillarCsi__Agent__V1__VolumeReconcileResult *res =
		    calloc(r->n_volumes ? r->n_volumes : 1, sizeof(*res));
		PillarCsi__Agent__V1__VolumeReconcileResult **pp =
		    calloc(r->n_volumes ? r->n_volumes : 1, sizeof(*pp));
		for (size_t i = 0; i < r->n_volumes; i++) {
			PillarCsi__Agent__V1__VolumeReconcileResult x =
			    PILLAR_CSI__AGENT__V1__VOLUME_RECONCILE_RESULT__INIT;
			res[i] = x;
			res[i].volume_id = r->volumes[i]->volume_id;
			res[i].success = true;
			for (size_t j = 0; j < f->nitems; j++)
				if (!strcmp(f->items[j].id, r->volumes[i]->volume_id)) {
					res[i].success = false;
					res[i].error_message = f->items[j].msg;
				}
			pp[i] = &res[i];
		}
		o.n_results = r->n_volumes;
		o.results = pp;
		ProtobufCMessage *out = clone_msg(&o.base);
		free(res);
		free(pp);
		if (r->complete)
			f->pending = false;
		return out;
	}
	if (!strcmp(method, "ListExports")) {
		PillarCsi__Agent__V1__ListExportsResponse o =
		    PILLAR_CSI__AGENT__V1__LIST_EXPORTS_RESPONSE__INIT;
		return clone_msg(&o.base);
	}
	/* DeleteVolume, UnexportVolume, AllowInitiator, DenyInitiator: empty responses */
	return NULL;
}

static int f_invoke(agentclient *c, const char *address, const char *method,
                    const ProtobufCMessage *req, const ProtobufCMessageDescriptor *rd,
                    ProtobufCMessage **resp, int deadline_ms, struct grpc_status *st)
{
	struct fake_agent *f = (struct fake_agent *)c;
	*resp = NULL;
	pthread_mutex_lock(&f->mu);
	if (f->n == f->cap) {
		size_t nc = f->cap ? f->cap * 2 : 32;
		struct fake_call *nv = realloc(f->calls, nc * sizeof(*nv));
		if (!nv) {
			pthread_mutex_unlock(&f->mu);
			st->code = GRPC_INTERNAL;
			snprintf(st->msg, sizeof(st->msg), "fake: out of memory");
			return GRPC_INTERNAL;
		}
		f->calls = nv;
		f->cap = nc;
	}
	struct fake_call *rec = &f->calls[f->n++];
	memset(rec, 0, sizeof(*rec));
	snprintf(rec->method, sizeof(rec->method), "%s", method);
	snprintf(rec->address, sizeof(rec->address), "%s", address ? address : "");
	rec->deadline_ms = deadline_ms;
	rec->req = clone_msg(req);
	char *(*hook)(void *, const char *) = f->hook;
	void *harg = f->hook_arg;
	size_t idx = f->n - 1;
	pthread_mutex_unlock(&f->mu);
	char *snap = hook ? hook(harg, method) : NULL;
	pthread_mutex_lock(&f->mu);
	f->calls[idx].snapshot = snap;
	for (size_t i = 0; i < f->nfails; i++) {
		struct fake_fail *x = &f->fails[i];
		if (!x->used && !strcmp(x->method, method)) {
			x->used = true;
			st->code = x->code;
			snprintf(st->msg, sizeof(st->msg), "%s", x->msg);
			pthread_mutex_unlock(&f->mu);
			return x->code;
		}
	}
	ProtobufCMessage *out = answer(f, method, req);
	pthread_mutex_unlock(&f->mu);
	if (!out) {
		/* empty message of the response type */
		uint8_t none = 0;
		out = protobuf_c_message_unpack(rd, NULL, 0, &none);
	}
	*resp = out;
	st->code = GRPC_OK;
	st->msg[0] = 0;
	return GRPC_OK;
}

static void f_close(agentclient *c)
{
	(void)c;
}

static bool f_mtls(agentclient *c)
{
	return ((struct fake_agent *)c)->mtls;
}

static const struct agentclient_ops fake_ops = {
    .invoke = f_invoke, .close = f_close, .mtls = f_mtls};

void fake_agent_set_mtls(fake_agent *f, bool on)
{
	f->mtls = on;
}

fake_agent *fake_agent_new(void)
{
	struct fake_agent *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->base.ops = &fake_ops;
	pthread_mutex_init(&f->mu, NULL);
	f->healthy = true;
	f->snapshot_size = 1LL << 30;
	return f;
}

void fake_agent_reset_log(fake_agent *f)
{
	for (size_t i = 0; i < f->n; i++) {
		if (f->calls[i].req)
			protobuf_c_message_free_unpacked(f->calls[i].req, NULL);
		free(f->calls[i].snapshot);
	}
	f->n = 0;
}

void fake_agent_free(fake_agent *f)
{
	if (!f)
		return;
	fake_agent_reset_log(f);
	free(f->calls);
	if (f->caps)
		protobuf_c_message_free_unpacked(f->caps, NULL);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

agentclient *fake_agent_client(fake_agent *f)
{
	return &f->base;
}

void fake_agent_fail(fake_agent *f, const char *method, int code, const char *msg)
{
	if (f->nfails >= FAKE_MAX_FAIL)
		return;
	struct fake_fail *x = &f->fails[f->nfails++];
	snprintf(x->method, sizeof(x->method), "%s", method);
	x->code = code;
	snprintf(x->msg, sizeof(x->msg), "%s", msg);
	x->used = false;
}

void fake_agent_set_health(fake_agent *f, bool healthy, bool restore_pending, const char *sub_name,
                           const char *sub_msg)
{
	pthread_mutex_lock(&f->mu);
	f->healthy = healthy;
	f->pending = restore_pending;
	snprintf(f->sub_name, sizeof(f->sub_name), "%s", sub_name ? sub_name : "");
	snprintf(f->sub_msg, sizeof(f->sub_msg), "%s", sub_msg ? sub_msg : "");
	pthread_mutex_unlock(&f->mu);
}

bool fake_agent_restore_pending(fake_agent *f)
{
	pthread_mutex_lock(&f->mu);
	bool p = f->pending;
	pthread_mutex_unlock(&f->mu);
	return p;
}

void fake_agent_add_backend(fake_agent *f, int backend_type)
{
	pthread_mutex_lock(&f->mu);
	PillarCsi__Agent__V1__GetCapabilitiesResponse *c = (void *)f->caps;
	if (c) {
		PillarCsi__Agent__V1__BackendType *nb =
		    realloc(c->supported_backends, (c->n_supported_backends + 1) * sizeof(*nb));
		if (nb) {
			nb[c->n_supported_backends++] = backend_type;
			c->supported_backends = nb;
		}
	}
	pthread_mutex_unlock(&f->mu);
}

void fake_agent_set_caps(fake_agent *f, const char *version, bool zfs, bool lvm, bool nvmeof,
                         const char *pool, int backend_type, const char *parent_dataset,
                         const char *thin_pool, long long total, long long avail)
{
	PillarCsi__Agent__V1__GetCapabilitiesResponse o =
	    PILLAR_CSI__AGENT__V1__GET_CAPABILITIES_RESPONSE__INIT;
	PillarCsi__Agent__V1__BackendType bt[2];
	PillarCsi__Agent__V1__ProtocolType pt[1] = {
	    PILLAR_CSI__AGENT__V1__PROTOCOL_TYPE__PROTOCOL_TYPE_NVMEOF_TCP};
	PillarCsi__Agent__V1__PoolInfo pi = PILLAR_CSI__AGENT__V1__POOL_INFO__INIT, *pip = &pi;
	size_t nb = 0;
	if (zfs)
		bt[nb++] = PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_ZFS_ZVOL;
	if (lvm)
		bt[nb++] = PILLAR_CSI__AGENT__V1__BACKEND_TYPE__BACKEND_TYPE_LVM;
	o.agent_version = (char *)version;
	o.n_supported_backends = nb;
	o.supported_backends = bt;
	o.n_supported_protocols = nvmeof ? 1 : 0;
	o.supported_protocols = pt;
	if (pool) {
		pi.name = (char *)pool;
		pi.backend_type = backend_type;
		pi.parent_dataset = (char *)(parent_dataset ? parent_dataset : "");
		pi.thin_pool = (char *)(thin_pool ? thin_pool : "");
		pi.total_bytes = total;
		pi.available_bytes = avail;
		o.n_discovered_pools = 1;
		o.discovered_pools = &pip;
	}
	if (f->caps)
		protobuf_c_message_free_unpacked(f->caps, NULL);
	f->caps = clone_msg(&o.base);
}

void fake_agent_item_error(fake_agent *f, const char *volume_id, const char *msg)
{
	if (!msg) { /* the volume's items succeed again */
		size_t w = 0;
		for (size_t i = 0; i < f->nitems; i++)
			if (strcmp(f->items[i].id, volume_id))
				f->items[w++] = f->items[i];
		f->nitems = w;
		return;
	}
	if (f->nitems >= FAKE_MAX_ITEMS)
		return;
	snprintf(f->items[f->nitems].id, sizeof(f->items[0].id), "%s", volume_id);
	snprintf(f->items[f->nitems].msg, sizeof(f->items[0].msg), "%s", msg);
	f->nitems++;
}

void fake_agent_set_hook(fake_agent *f, char *(*hook)(void *arg, const char *method), void *arg)
{
	f->hook = hook;
	f->hook_arg = arg;
}

size_t fake_agent_ncalls(const fake_agent *f)
{
	struct fake_agent *m = (struct fake_agent *)f;
	pthread_mutex_lock(&m->mu);
	size_t n = f->n;
	pthread_mutex_unlock(&m->mu);
	return n;
}

const struct fake_call *fake_agent_call(const fake_agent *f, size_t i)
{
	return i < f->n ? &f->calls[i] : NULL;
}

size_t fake_agent_count(const fake_agent *f, const char *method)
{
	struct fake_agent *m = (struct fake_agent *)f;
	size_t c = 0;
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < f->n; i++)
		c += !strcmp(f->calls[i].method, method);
	pthread_mutex_unlock(&m->mu);
	return c;
}

const char *fake_agent_log(const fake_agent *f)
{
	struct fake_agent *m = (struct fake_agent *)f;
	size_t o = 0;
	pthread_mutex_lock(&m->mu);
	m->logbuf[0] = 0;
	for (size_t i = 0; i < f->n && o < sizeof(m->logbuf) - 40; i++)
		o += (size_t)snprintf(m->logbuf + o, sizeof(m->logbuf) - o, "%s%s", i ? "," : "",
		                      f->calls[i].method);
	pthread_mutex_unlock(&m->mu);
	return m->logbuf;
}

void fake_agent_set_snapshot_size(fake_agent *f, long long bytes)
{
	pthread_mutex_lock(&f->mu);
	f->snapshot_size = bytes;
	pthread_mutex_unlock(&f->mu);
}
