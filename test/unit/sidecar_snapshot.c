/* sidecar_snapshot — csi-snapshotter's CSI requests (see sidecar.h for the facts). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/base64.h>

#include "sidecar.h"

#define CSI_PREFIX  "csi.storage.k8s.io/"
#define MAX_ENTRIES 32
#define SECRET_NAME CSI_PREFIX "snapshotter-secret-name"
#define SECRET_NS   CSI_PREFIX "snapshotter-secret-namespace"

/* The reserved keys RemovePrefixedParameters strips (csi-snapshotter v8 pkg/utils). */
static const char *const known[] = {"snapshotter-secret-name",
                                    "snapshotter-secret-namespace",
                                    "snapshotter-list-secret-name",
                                    "snapshotter-list-secret-namespace",
                                    "group-snapshotter-secret-name",
                                    "group-snapshotter-secret-namespace",
                                    NULL};

/* key/value entries of one CSI map type (same layout for every map entry message). */
struct entries {
	Csi__V1__CreateSnapshotRequest__ParametersEntry e[MAX_ENTRIES];
	Csi__V1__CreateSnapshotRequest__ParametersEntry *p[MAX_ENTRIES];
	size_t n;
	char *own[MAX_ENTRIES]; /* decoded Secret values */
	size_t n_own;
};

static void entries_free(struct entries *m)
{
	for (size_t i = 0; i < m->n_own; i++)
		free(m->own[i]);
}

static void put(struct entries *m, const ProtobufCMessageDescriptor *d, const char *k,
                const char *v)
{
	if (m->n == MAX_ENTRIES)
		abort();
	d->message_init(&m->e[m->n].base);
	m->e[m->n].key = (char *)k;
	m->e[m->n].value = (char *)v;
	m->p[m->n] = &m->e[m->n];
	m->n++;
}

/* The Secret's data, base64-decoded, as the sidecar's getCredentials sends it. */
static void secrets(struct entries *m, const ProtobufCMessageDescriptor *d, const cJSON *secret)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, sidecar_get(secret, "data"))
	{
		size_t len = strlen(it->valuestring), n = 0;
		unsigned char *v = malloc(len + 1);
		if (!v || mbedtls_base64_decode(v, len + 1, &n,
		                                (const unsigned char *)it->valuestring, len) != 0)
			abort(); /* bad test data */
		v[n] = 0;
		m->own[m->n_own++] = (char *)v;
		put(m, d, it->string, (char *)v);
	}
}

Csi__V1__CreateSnapshotRequest *sidecar_create_snapshot(const char *class_json,
                                                        const char *content_json,
                                                        const char *secret_json,
                                                        bool extra_metadata, char *err, size_t cap)
{
	cJSON *cls = sidecar_parse(class_json), *content = sidecar_parse(content_json),
	      *secret = NULL;
	Csi__V1__CreateSnapshotRequest q = CSI__V1__CREATE_SNAPSHOT_REQUEST__INIT, *out = NULL;
	struct entries params = {0}, sec = {0};
	char name[300];
	const char *uid = sidecar_get_str(content, "spec.volumeSnapshotRef.uid");
	const char *handle = sidecar_get_str(content, "spec.source.volumeHandle");
	const cJSON *it;
	if (!uid || !*uid) {
		snprintf(err, cap,
		         "cannot create snapshot. Snapshot content %s not bound to a snapshot",
		         sidecar_get_str(content, "metadata.name") ?: "");
		goto done;
	}
	if (!handle) {
		snprintf(err, cap,
		         "cannot create snapshot. Volume handle not found in snapshot content %s",
		         sidecar_get_str(content, "metadata.name") ?: "");
		goto done;
	}
	cJSON_ArrayForEach(it, sidecar_get(cls, "parameters"))
	{
		if (strncmp(it->string, CSI_PREFIX, strlen(CSI_PREFIX))) {
			put(&params,
			    &csi__v1__create_snapshot_request__parameters_entry__descriptor,
			    it->string, it->valuestring);
			continue;
		}
		bool ok = false;
		for (int i = 0; known[i]; i++)
			ok |= !strcmp(it->string + strlen(CSI_PREFIX), known[i]);
		if (!ok) {
			snprintf(err, cap,
			         "failed to remove CSI Parameters of prefixed keys: found unknown "
			         "parameter key \"%s\" with reserved namespace %s",
			         it->string, CSI_PREFIX);
			goto done;
		}
	}
	if (extra_metadata) {
		const ProtobufCMessageDescriptor *d =
		    &csi__v1__create_snapshot_request__parameters_entry__descriptor;
		put(&params, d, CSI_PREFIX "volumesnapshot/name",
		    sidecar_get_str(content, "spec.volumeSnapshotRef.name") ?: "");
		put(&params, d, CSI_PREFIX "volumesnapshot/namespace",
		    sidecar_get_str(content, "spec.volumeSnapshotRef.namespace") ?: "");
		put(&params, d, CSI_PREFIX "volumesnapshotcontent/name",
		    sidecar_get_str(content, "metadata.name") ?: "");
	}
	if (secret_json) {
		secret = sidecar_parse(secret_json);
		secrets(&sec, &csi__v1__create_snapshot_request__secrets_entry__descriptor, secret);
	}
	snprintf(name, sizeof(name), "snapshot-%s", uid);
	q.name = name;
	q.source_volume_id = (char *)handle;
	q.n_parameters = params.n;
	q.parameters = params.p;
	q.n_secrets = sec.n;
	q.secrets = (Csi__V1__CreateSnapshotRequest__SecretsEntry **)sec.p;
	out = sidecar_roundtrip(&q.base, &csi__v1__create_snapshot_request__descriptor);
done:
	entries_free(&sec);
	cJSON_Delete(cls);
	cJSON_Delete(content);
	cJSON_Delete(secret);
	return out;
}

/* status.snapshotHandle, else spec.source.snapshotHandle (a pre-provisioned content). */
static const char *handle_of(const cJSON *content)
{
	return sidecar_get_str(content, "status.snapshotHandle")
	           ?: sidecar_get_str(content, "spec.source.snapshotHandle");
}

Csi__V1__DeleteSnapshotRequest *
sidecar_delete_snapshot(const char *content_json, const char *secret_json, char *err, size_t cap)
{
	cJSON *content = sidecar_parse(content_json),
	      *secret = secret_json ? sidecar_parse(secret_json) : NULL;
	Csi__V1__DeleteSnapshotRequest q = CSI__V1__DELETE_SNAPSHOT_REQUEST__INIT, *out = NULL;
	struct entries sec = {0};
	const char *h = handle_of(content);
	if (!h)
		snprintf(err, cap,
		         "failed to delete snapshot content %s: snapshotHandle is missing",
		         sidecar_get_str(content, "metadata.name") ?: "");
	else {
		secrets(&sec, &csi__v1__delete_snapshot_request__secrets_entry__descriptor, secret);
		q.snapshot_id = (char *)h;
		q.n_secrets = sec.n;
		q.secrets = (Csi__V1__DeleteSnapshotRequest__SecretsEntry **)sec.p;
		out = sidecar_roundtrip(&q.base, &csi__v1__delete_snapshot_request__descriptor);
	}
	entries_free(&sec);
	cJSON_Delete(content);
	cJSON_Delete(secret);
	return out;
}

Csi__V1__ListSnapshotsRequest *sidecar_snapshot_status(const char *content_json, char *err,
                                                       size_t cap)
{
	cJSON *content = sidecar_parse(content_json);
	Csi__V1__ListSnapshotsRequest q = CSI__V1__LIST_SNAPSHOTS_REQUEST__INIT, *out = NULL;
	const char *h = handle_of(content);
	if (!h)
		snprintf(err, cap,
		         "failed to list snapshot for content %s: snapshotHandle is missing",
		         sidecar_get_str(content, "metadata.name") ?: "");
	else {
		q.snapshot_id = (char *)h;
		out = sidecar_roundtrip(&q.base, &csi__v1__list_snapshots_request__descriptor);
	}
	cJSON_Delete(content);
	return out;
}

/* csi-provisioner's dataSource (controller.go getVolumeContentSource / getSnapshotSource /
 * getPVCSource): a VolumeSnapshot must be bound to a content with a snapshotHandle and
 * readyToUse, and its restoreSize must not exceed the claim's request; a PVC source must be
 * bound to a PV of this driver with a capacity not above the request.  Sets
 * req->volume_content_source (snapshot_id = the content's snapshotHandle, or volume_id = the
 * PV's volumeHandle); -1 with err when the provisioner would refuse before calling. */
int sidecar_content_source(Csi__V1__CreateVolumeRequest *req, const char *pvc_json,
                           const char *source_json, const char *content_json, char *err, size_t cap)
{
	cJSON *pvc = sidecar_parse(pvc_json), *src = sidecar_parse(source_json),
	      *content = sidecar_parse(content_json);
	const char *kind = sidecar_get_str(pvc, "spec.dataSource.kind") ?: "";
	long long want = req->capacity_range ? req->capacity_range->required_bytes : 0;
	int r = -1;
	Csi__V1__VolumeContentSource *cs = malloc(sizeof(*cs));
	if (!cs)
		abort();
	csi__v1__volume_content_source__init(cs);
	if (!strcmp(kind, "VolumeSnapshot")) {
		const char *h = sidecar_get_str(content, "status.snapshotHandle");
		const cJSON *ready = sidecar_get(src, "status.readyToUse");
		const cJSON *size = sidecar_get(src, "status.restoreSize");
		long long rs = cJSON_IsString(size) ? sidecar_quantity(size->valuestring) : 0;
		if (!sidecar_get_str(src, "status.boundVolumeSnapshotContentName") || !h)
			snprintf(err, cap, "snapshot %s not bound",
			         sidecar_get_str(src, "metadata.name") ?: "");
		else if (!cJSON_IsTrue(ready))
			snprintf(err, cap, "snapshot %s is not Ready",
			         sidecar_get_str(src, "metadata.name") ?: "");
		else if (rs > want)
			snprintf(
			    err, cap,
			    "requested volume size %lld is less than the size %lld for the source "
			    "snapshot %s",
			    want, rs, sidecar_get_str(src, "metadata.name") ?: "");
		else {
			Csi__V1__VolumeContentSource__SnapshotSource *s = malloc(sizeof(*s));
			if (!s)
				abort();
			csi__v1__volume_content_source__snapshot_source__init(s);
			s->snapshot_id = strdup(h);
			cs->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
			cs->snapshot = s;
			r = 0;
		}
	} else if (!strcmp(kind, "PersistentVolumeClaim")) {
		const char *h = sidecar_get_str(content, "spec.csi.volumeHandle");
		const cJSON *size = sidecar_get(content, "spec.capacity.storage");
		long long ss = cJSON_IsString(size) ? sidecar_quantity(size->valuestring) : 0;
		if (!h || strcmp(sidecar_get_str(content, "spec.csi.driver") ?: "", SIDECAR_DRIVER))
			snprintf(err, cap, "the source PVC %s is not bound to a PV of this driver",
			         sidecar_get_str(src, "metadata.name") ?: "");
		else if (ss > want)
			snprintf(err, cap,
			         "error getting handle for DataSource Type PersistentVolumeClaim "
			         "by Name "
			         "%s: requested PV size %lld is less than source PVC size %lld",
			         sidecar_get_str(src, "metadata.name") ?: "", want, ss);
		else {
			Csi__V1__VolumeContentSource__VolumeSource *v = malloc(sizeof(*v));
			if (!v)
				abort();
			csi__v1__volume_content_source__volume_source__init(v);
			v->volume_id = strdup(h);
			cs->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
			cs->volume = v;
			r = 0;
		}
	} else {
		snprintf(err, cap, "unsupported dataSource kind \"%s\"", kind);
	}
	if (r == 0)
		req->volume_content_source = cs;
	else
		free(cs);
	cJSON_Delete(pvc);
	cJSON_Delete(src);
	cJSON_Delete(content);
	return r;
}
