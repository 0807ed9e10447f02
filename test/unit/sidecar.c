/* sidecar — see sidecar.h for the facts each builder follows. */
#include "sidecar.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const struct sidecar_caps sidecar_deployed = {
    .snmw = true,
    .publish_ro = false,
    .topology = true,
    .default_fstype = "",
    .extra_metadata = true,
    .immediate_topology = true,
};

/* ---- an arena for the message under construction; the result is decoded from its bytes ---- */

struct arena {
	void *p[256];
	size_t n;
};

static void *a_alloc(struct arena *a, size_t sz)
{
	void *p = calloc(1, sz ? sz : 1);
	if (!p || a->n == sizeof(a->p) / sizeof(a->p[0]))
		abort(); /* a test helper: running out is a bug in the test */
	a->p[a->n++] = p;
	return p;
}

static char *a_str(struct arena *a, const char *s)
{
	size_t n = strlen(s ? s : "");
	char *d = a_alloc(a, n + 1);
	memcpy(d, s ? s : "", n);
	return d;
}

static void a_free(struct arena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->p[i]);
	a->n = 0;
}

void *sidecar_roundtrip(const ProtobufCMessage *m, const ProtobufCMessageDescriptor *d)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(n ? n : 1);
	if (!buf)
		abort();
	protobuf_c_message_pack(m, buf);
	ProtobufCMessage *out = protobuf_c_message_unpack(d, NULL, n, buf);
	free(buf);
	if (!out)
		abort();
	return out;
}

static void *fail(char *err, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void *fail(char *err, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, cap, fmt, ap);
	va_end(ap);
	return NULL;
}

cJSON *sidecar_parse(const char *json)
{
	cJSON *o = json ? cJSON_Parse(json) : cJSON_CreateObject();
	if (!o)
		abort(); /* bad JSON in a test */
	return o;
}

const cJSON *sidecar_get(const cJSON *o, const char *path)
{
	char key[128];
	while (o && *path) {
		const char *dot = strchr(path, '.');
		size_t n = dot ? (size_t)(dot - path) : strlen(path);
		snprintf(key, sizeof(key), "%.*s", (int)n, path);
		o = cJSON_GetObjectItemCaseSensitive(o, key);
		path += n + (dot ? 1 : 0);
	}
	return o;
}

const char *sidecar_get_str(const cJSON *o, const char *path)
{
	const cJSON *v = sidecar_get(o, path);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- access modes (csi-lib-utils accessmodes.ToCSIAccessMode) ------------------------------ */

static int access_mode(const cJSON *modes, bool snmw, char *err, size_t cap)
{
	bool rwo = false, rox = false, rwx = false, rwop = false;
	int distinct = 0;
	const cJSON *m;
	cJSON_ArrayForEach(m, modes)
	{
		const char *s = cJSON_IsString(m) ? m->valuestring : "";
		bool *f = !strcmp(s, "ReadWriteOnce")      ? &rwo
		          : !strcmp(s, "ReadOnlyMany")     ? &rox
		          : !strcmp(s, "ReadWriteMany")    ? &rwx
		          : !strcmp(s, "ReadWriteOncePod") ? &rwop
		                                           : NULL;
		if (f && !*f) {
			*f = true;
			distinct++;
		}
	}
	if (rwop) {
		if (distinct > 1)
			return fail(
			           err, cap,
			           "Kubernetes does not support use of ReadWriteOncePod with other "
			           "access modes on the same PersistentVolume"),
			       -1;
		return snmw
		           ? CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER
		           : CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	}
	if (rwx)
		return CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER;
	if (rox && rwo)
		return fail(err, cap,
		            "CSI does not support ReadOnlyMany and ReadWriteOnce on the same "
		            "PersistentVolume"),
		       -1;
	if (rox)
		return CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY;
	if (rwo)
		return snmw
		           ? CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER
		           : CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	return fail(err, cap, "unsupported AccessMode combination"), -1;
}

/* A capability: block, or mount{fs_type, mount_flags}. */
static Csi__V1__VolumeCapability *capability(struct arena *a, int mode, bool block,
                                             const char *fstype, const cJSON *flags)
{
	Csi__V1__VolumeCapability *c = a_alloc(a, sizeof(*c));
	Csi__V1__VolumeCapability__AccessMode *am = a_alloc(a, sizeof(*am));
	csi__v1__volume_capability__init(c);
	csi__v1__volume_capability__access_mode__init(am);
	am->mode = mode;
	c->access_mode = am;
	if (block) {
		c->block = a_alloc(a, sizeof(*c->block));
		csi__v1__volume_capability__block_volume__init(c->block);
		c->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
		return c;
	}
	Csi__V1__VolumeCapability__MountVolume *mv = a_alloc(a, sizeof(*mv));
	csi__v1__volume_capability__mount_volume__init(mv);
	mv->fs_type = a_str(a, fstype);
	int n = cJSON_GetArraySize(flags);
	mv->mount_flags = a_alloc(a, sizeof(char *) * (size_t)(n > 0 ? n : 1));
	const cJSON *f;
	cJSON_ArrayForEach(f, flags) mv->mount_flags[mv->n_mount_flags++] =
	    a_str(a, cJSON_IsString(f) ? f->valuestring : "");
	c->mount = mv;
	c->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	return c;
}

/* The capability the attacher and the resizer derive from a PV (GetVolumeCapabilities). */
static Csi__V1__VolumeCapability *pv_capability(struct arena *a, const struct sidecar_caps *c,
                                                const cJSON *pv, char *err, size_t cap)
{
	int mode = access_mode(sidecar_get(pv, "spec.accessModes"), c->snmw, err, cap);
	if (mode < 0)
		return NULL;
	const char *vm = sidecar_get_str(pv, "spec.volumeMode");
	const char *fs = sidecar_get_str(pv, "spec.csi.fsType");
	return capability(a, mode, vm && !strcmp(vm, "Block"), fs && *fs ? fs : c->default_fstype,
	                  sidecar_get(pv, "spec.mountOptions"));
}

/* ---- csi-provisioner ------------------------------------------------------------------------- */

static const char *const known_prefixed[] = {"fstype",
                                             "provisioner-secret-name",
                                             "provisioner-secret-namespace",
                                             "controller-publish-secret-name",
                                             "controller-publish-secret-namespace",
                                             "node-stage-secret-name",
                                             "node-stage-secret-namespace",
                                             "node-publish-secret-name",
                                             "node-publish-secret-namespace",
                                             "controller-expand-secret-name",
                                             "controller-expand-secret-namespace",
                                             "secret-name",
                                             "secret-namespace",
                                             "node-expand-secret-name",
                                             "node-expand-secret-namespace",
                                             NULL};

#define CSI_PREFIX "csi.storage.k8s.io/"

static bool known_prefixed_key(const char *k)
{
	for (int i = 0; known_prefixed[i]; i++)
		if (!strcmp(k + strlen(CSI_PREFIX), known_prefixed[i]))
			return true;
	return false;
}

/* The StorageClass fstype as prepareProvision reads it; NULL + err on both keys. */
static const char *sc_fstype(const cJSON *sc, const struct sidecar_caps *c, char *err, size_t cap)
{
	const char *fs = "";
	int found = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, sidecar_get(sc, "parameters"))
	{
		if (!strcasecmp(it->string, "fstype") || !strcmp(it->string, CSI_PREFIX "fstype")) {
			fs = cJSON_IsString(it) ? it->valuestring : "";
			found++;
		}
	}
	if (found > 1)
		return fail(err, cap,
		            "fstype specified in parameters with both \"fstype\" and \"%sfstype\" "
		            "keys",
		            CSI_PREFIX);
	return *fs ? fs : c->default_fstype;
}

struct term {
	char v[8][128]; /* values in key order (keys sorted) */
	int n;
};

static int term_cmp(const void *x, const void *y)
{
	const struct term *a = x, *b = y;
	if (a->n != b->n)
		return a->n - b->n;
	for (int i = 0; i < a->n; i++) {
		int r = strcmp(a->v[i], b->v[i]);
		if (r)
			return r;
	}
	return 0;
}

static int str_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

static const cJSON *csinode_keys(const cJSON *csinode)
{
	const cJSON *d;
	cJSON_ArrayForEach(d, sidecar_get(csinode, "spec.drivers"))
	{
		const char *n = sidecar_get_str(d, "name");
		if (n && !strcmp(n, SIDECAR_DRIVER))
			return sidecar_get(d, "topologyKeys");
	}
	return NULL;
}

static const cJSON *find_named(const cJSON *list, const char *name)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, list)
	{
		const char *n = sidecar_get_str(it, "metadata.name");
		if (n && !strcmp(n, name))
			return it;
	}
	return NULL;
}

/* Fills t from a Node's labels for the sorted keys; false when a key is missing. */
static bool node_term(const cJSON *node, char **keys, int nk, struct term *t)
{
	t->n = 0;
	for (int i = 0; i < nk; i++) {
		const cJSON *v =
		    cJSON_GetObjectItemCaseSensitive(sidecar_get(node, "metadata.labels"), keys[i]);
		if (!cJSON_IsString(v))
			return false;
		snprintf(t->v[t->n++], sizeof(t->v[0]), "%s", v->valuestring);
	}
	return true;
}

/* FNV-1 32-bit (Go hash/fnv New32), as getPVCNameHashAndIndexOffset uses it. */
static uint32_t fnv1(const char *s, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++) {
		h *= 16777619u;
		h ^= (uint8_t)s[i];
	}
	return h;
}

static uint32_t name_offset(const char *pvc)
{
	const char *dash = strrchr(pvc, '-');
	size_t n = strlen(pvc);
	const char *base = pvc;
	uint32_t index = 0;
	if (dash && dash[1] && strspn(dash + 1, "0123456789") == strlen(dash + 1) &&
	    strlen(dash + 1) <= 9) {
		index = (uint32_t)strtoul(dash + 1, NULL, 10);
		n = (size_t)(dash - pvc);
		const char *d2 = memrchr(pvc, '-', n);
		if (d2) {
			base = d2 + 1;
			n = (size_t)(dash - base);
		}
	}
	return fnv1(base, n) + index;
}

static Csi__V1__Topology **topologies(struct arena *a, char **keys, int nk, const struct term *t,
                                      int n, int rot)
{
	Csi__V1__Topology **out = a_alloc(a, sizeof(*out) * (size_t)(n ? n : 1));
	for (int i = 0; i < n; i++) {
		const struct term *s = &t[(i + rot) % n];
		Csi__V1__Topology *tp = a_alloc(a, sizeof(*tp));
		csi__v1__topology__init(tp);
		tp->segments = a_alloc(a, sizeof(*tp->segments) * (size_t)nk);
		for (int k = 0; k < nk; k++) {
			Csi__V1__Topology__SegmentsEntry *e = a_alloc(a, sizeof(*e));
			csi__v1__topology__segments_entry__init(e);
			e->key = a_str(a, keys[k]);
			e->value = a_str(a, s->v[k]);
			tp->segments[tp->n_segments++] = e;
		}
		out[i] = tp;
	}
	return out;
}

/* GenerateAccessibilityRequirements without allowedTopologies and without --strict-topology. */
static int requirements(struct arena *a, const struct sidecar_caps *c, const cJSON *cluster,
                        const char *pvc_name, const char *selected,
                        Csi__V1__TopologyRequirement **out, char *err, size_t cap)
{
	const cJSON *csinodes = sidecar_get(cluster, "csinodes"),
	            *nodes = sidecar_get(cluster, "nodes");
	const cJSON *keyl = NULL, *it;
	*out = NULL;
	if (selected) {
		keyl = csinode_keys(find_named(csinodes, selected));
		if (cJSON_GetArraySize(keyl) == 0)
			return fail(err, cap, "no topology key found for node %s", selected), -1;
	} else {
		if (!c->immediate_topology)
			return 0;
		cJSON_ArrayForEach(it, csinodes) if (!keyl && cJSON_GetArraySize(csinode_keys(it)) >
		                                                  0) keyl = csinode_keys(it);
		if (!keyl)
			return fail(err, cap, "no available topology found"), -1;
	}
	char *keys[8];
	int nk = 0;
	cJSON_ArrayForEach(it, keyl) if (nk < 8 && cJSON_IsString(it)) keys[nk++] = it->valuestring;
	qsort(keys, (size_t)nk, sizeof(keys[0]), str_cmp);
	struct term terms[32], sel;
	int n = 0;
	cJSON_ArrayForEach(it, nodes) if (n < 32 && node_term(it, keys, nk, &terms[n])) n++;
	if (n == 0)
		return fail(err, cap, "topologyKeys were not found on any nodes"), -1;
	qsort(terms, (size_t)n, sizeof(terms[0]), term_cmp);
	int u = 1;
	for (int i = 1; i < n; i++)
		if (term_cmp(&terms[i], &terms[u - 1]))
			terms[u++] = terms[i];
	int rot = 0;
	if (selected) {
		if (!node_term(find_named(nodes, selected), keys, nk, &sel))
			return fail(err, cap,
			            "topology labels from selected node do not match topology keys "
			            "from CSINode"),
			       -1;
		while (rot < u && term_cmp(&terms[rot], &sel))
			rot++;
	} else {
		rot = (int)(name_offset(pvc_name) % (uint32_t)u);
	}
	Csi__V1__TopologyRequirement *r = a_alloc(a, sizeof(*r));
	csi__v1__topology_requirement__init(r);
	r->requisite = topologies(a, keys, nk, terms, u, 0);
	r->n_requisite = (size_t)u;
	r->preferred = topologies(a, keys, nk, terms, u, rot);
	r->n_preferred = (size_t)u;
	*out = r;
	return 0;
}

static Csi__V1__CreateVolumeRequest__ParametersEntry *param(struct arena *a, const char *k,
                                                            const char *v)
{
	Csi__V1__CreateVolumeRequest__ParametersEntry *e = a_alloc(a, sizeof(*e));
	csi__v1__create_volume_request__parameters_entry__init(e);
	e->key = a_str(a, k);
	e->value = a_str(a, v);
	return e;
}

long long sidecar_quantity(const char *q)
{
	char *end;
	long long v = strtoll(q ? q : "0", &end, 10);
	static const char *const suf[] = {"Ki", "Mi", "Gi", "Ti", NULL};
	for (int i = 0; suf[i]; i++)
		if (!strcmp(end, suf[i]))
			return v << (10 * (i + 1));
	return v;
}

Csi__V1__CreateVolumeRequest *
sidecar_create_volume(const struct sidecar_caps *c, const char *sc_json, const char *pvc_json,
                      const char *cluster_json, const char *selected_node, char *err, size_t errcap)
{
	struct arena a = {.n = 0};
	cJSON *sc = sidecar_parse(sc_json), *pvc = sidecar_parse(pvc_json),
	      *cl = sidecar_parse(cluster_json);
	Csi__V1__CreateVolumeRequest *out = NULL, *q = a_alloc(&a, sizeof(*q));
	const char *fs, *name = sidecar_get_str(pvc, "metadata.name") ?: "";
	char pvname[300];
	csi__v1__create_volume_request__init(q);
	snprintf(pvname, sizeof(pvname), "pvc-%s", sidecar_get_str(pvc, "metadata.uid") ?: "");
	q->name = pvname;
	if (sidecar_get(sc, "allowedTopologies")) {
		fail(err, errcap, "sidecar emulation: allowedTopologies is not emulated");
		goto done;
	}
	if (!(fs = sc_fstype(sc, c, err, errcap)))
		goto done;
	const cJSON *modes = sidecar_get(pvc, "spec.accessModes");
	const char *vm = sidecar_get_str(pvc, "spec.volumeMode");
	q->volume_capabilities =
	    a_alloc(&a, sizeof(*q->volume_capabilities) * (size_t)(cJSON_GetArraySize(modes) + 1));
	const cJSON *m;
	cJSON_ArrayForEach(m, modes)
	{
		cJSON one = *m;
		one.next = one.prev = NULL;
		cJSON arr = {.type = cJSON_Array, .child = &one};
		int mode = access_mode(&arr, c->snmw, err, errcap);
		if (mode < 0)
			goto done;
		q->volume_capabilities[q->n_volume_capabilities++] = capability(
		    &a, mode, vm && !strcmp(vm, "Block"), fs, sidecar_get(sc, "mountOptions"));
	}
	q->capacity_range = a_alloc(&a, sizeof(*q->capacity_range));
	csi__v1__capacity_range__init(q->capacity_range);
	q->capacity_range->required_bytes =
	    sidecar_quantity(sidecar_get_str(pvc, "spec.resources.requests.storage"));
	if (c->topology && requirements(&a, c, cl, name, selected_node,
	                                &q->accessibility_requirements, err, errcap) < 0)
		goto done;
	const cJSON *params = sidecar_get(sc, "parameters"), *it;
	q->parameters =
	    a_alloc(&a, sizeof(*q->parameters) * (size_t)(cJSON_GetArraySize(params) + 3));
	cJSON_ArrayForEach(it, params)
	{
		if (!strncmp(it->string, CSI_PREFIX, strlen(CSI_PREFIX))) {
			if (!known_prefixed_key(it->string)) {
				fail(err, errcap,
				     "failed to strip CSI Parameters of prefixed keys: found "
				     "unknown "
				     "parameter key \"%s\" with reserved namespace %s",
				     it->string, CSI_PREFIX);
				goto done;
			}
			continue;
		}
		q->parameters[q->n_parameters++] =
		    param(&a, it->string, cJSON_IsString(it) ? it->valuestring : "");
	}
	if (c->extra_metadata) {
		q->parameters[q->n_parameters++] = param(&a, CSI_PREFIX "pvc/name", name);
		q->parameters[q->n_parameters++] =
		    param(&a, CSI_PREFIX "pvc/namespace",
		          sidecar_get_str(pvc, "metadata.namespace") ?: "");
		q->parameters[q->n_parameters++] = param(&a, CSI_PREFIX "pv/name", pvname);
	}
	out = sidecar_roundtrip(&q->base, &csi__v1__create_volume_request__descriptor);
done:
	a_free(&a);
	cJSON_Delete(sc);
	cJSON_Delete(pvc);
	cJSON_Delete(cl);
	return out;
}

cJSON *sidecar_pv(const char *sc_json, const char *pvc_json,
                  const Csi__V1__CreateVolumeRequest *req,
                  const Csi__V1__CreateVolumeResponse *resp)
{
	cJSON *sc = sidecar_parse(sc_json), *pvc = sidecar_parse(pvc_json);
	cJSON *pv = cJSON_CreateObject();
	cJSON *meta = cJSON_AddObjectToObject(pv, "metadata");
	cJSON_AddStringToObject(meta, "name", req->name);
	cJSON *spec = cJSON_AddObjectToObject(pv, "spec");
	cJSON_AddItemToObject(spec, "accessModes",
	                      cJSON_Duplicate(sidecar_get(pvc, "spec.accessModes"), true));
	if (sidecar_get(sc, "mountOptions"))
		cJSON_AddItemToObject(spec, "mountOptions",
		                      cJSON_Duplicate(sidecar_get(sc, "mountOptions"), true));
	const char *vm = sidecar_get_str(pvc, "spec.volumeMode");
	cJSON_AddStringToObject(spec, "volumeMode", vm ? vm : "Filesystem");
	char cap[32];
	snprintf(cap, sizeof(cap), "%lld", (long long)resp->volume->capacity_bytes);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(spec, "capacity"), "storage", cap);
	cJSON *csi = cJSON_AddObjectToObject(spec, "csi");
	cJSON_AddStringToObject(csi, "driver", SIDECAR_DRIVER);
	cJSON_AddStringToObject(csi, "volumeHandle", resp->volume->volume_id);
	/* FSType = the fstype the request carried (result.fsType), Filesystem volumes only */
	if (!(vm && !strcmp(vm, "Block")) && req->n_volume_capabilities &&
	    req->volume_capabilities[0]->mount && *req->volume_capabilities[0]->mount->fs_type)
		cJSON_AddStringToObject(csi, "fsType", req->volume_capabilities[0]->mount->fs_type);
	cJSON *attrs = cJSON_AddObjectToObject(csi, "volumeAttributes");
	for (size_t i = 0; i < resp->volume->n_volume_context; i++)
		cJSON_AddStringToObject(attrs, resp->volume->volume_context[i]->key,
		                        resp->volume->volume_context[i]->value);
	/* the provisioner's identity attribute (provisionerIDKey) */
	cJSON_AddStringToObject(attrs, "storage.kubernetes.io/csiProvisionerIdentity",
	                        "1700000000000-1234-" SIDECAR_DRIVER);
	cJSON_Delete(sc);
	cJSON_Delete(pvc);
	return pv;
}

Csi__V1__DeleteVolumeRequest *sidecar_delete_volume(const cJSON *pv)
{
	Csi__V1__DeleteVolumeRequest q = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
	q.volume_id = (char *)(sidecar_get_str(pv, "spec.csi.volumeHandle") ?: "");
	return sidecar_roundtrip(&q.base, &csi__v1__delete_volume_request__descriptor);
}

/* getNodeID: CSINode spec.drivers[driver].nodeID of the node. */
static const char *node_id(const char *cluster_json, const char *node, char *buf, size_t cap,
                           char *err, size_t errcap)
{
	cJSON *cl = sidecar_parse(cluster_json);
	const cJSON *cn = find_named(sidecar_get(cl, "csinodes"), node), *d;
	const char *r = NULL;
	cJSON_ArrayForEach(d, sidecar_get(cn, "spec.drivers"))
	{
		const char *n = sidecar_get_str(d, "name");
		if (n && !strcmp(n, SIDECAR_DRIVER) && sidecar_get_str(d, "nodeID")) {
			snprintf(buf, cap, "%s", sidecar_get_str(d, "nodeID"));
			r = buf;
		}
	}
	if (!r)
		fail(err, errcap,
		     cn ? "CSINode %s does not contain driver " SIDECAR_DRIVER
		        : "csinode.storage.k8s.io \"%s\" not found",
		     node);
	cJSON_Delete(cl);
	return r;
}

Csi__V1__ControllerPublishVolumeRequest *sidecar_attach(const struct sidecar_caps *c,
                                                        const cJSON *pv, const char *node,
                                                        const char *cluster_json, char *err,
                                                        size_t errcap)
{
	struct arena a = {.n = 0};
	Csi__V1__ControllerPublishVolumeRequest
	    q = CSI__V1__CONTROLLER_PUBLISH_VOLUME_REQUEST__INIT,
	    *out = NULL;
	char id[256];
	if (!(q.node_id = (char *)node_id(cluster_json, node, id, sizeof(id), err, errcap)) ||
	    !(q.volume_capability = pv_capability(&a, c, pv, err, errcap)))
		goto done;
	q.volume_id = (char *)(sidecar_get_str(pv, "spec.csi.volumeHandle") ?: "");
	q.readonly = c->publish_ro && cJSON_IsTrue(sidecar_get(pv, "spec.csi.readOnly"));
	const cJSON *attrs = sidecar_get(pv, "spec.csi.volumeAttributes"), *it;
	q.volume_context =
	    a_alloc(&a, sizeof(*q.volume_context) * (size_t)(cJSON_GetArraySize(attrs) + 1));
	cJSON_ArrayForEach(it, attrs)
	{
		Csi__V1__ControllerPublishVolumeRequest__VolumeContextEntry *e =
		    a_alloc(&a, sizeof(*e));
		csi__v1__controller_publish_volume_request__volume_context_entry__init(e);
		e->key = a_str(&a, it->string);
		e->value = a_str(&a, cJSON_IsString(it) ? it->valuestring : "");
		q.volume_context[q.n_volume_context++] = e;
	}
	out = sidecar_roundtrip(&q.base, &csi__v1__controller_publish_volume_request__descriptor);
done:
	a_free(&a);
	return out;
}

Csi__V1__ControllerUnpublishVolumeRequest *sidecar_detach(const cJSON *pv, const char *node,
                                                          const char *cluster_json, char *err,
                                                          size_t errcap)
{
	Csi__V1__ControllerUnpublishVolumeRequest q =
	    CSI__V1__CONTROLLER_UNPUBLISH_VOLUME_REQUEST__INIT;
	char id[256];
	if (!(q.node_id = (char *)node_id(cluster_json, node, id, sizeof(id), err, errcap)))
		return NULL;
	q.volume_id = (char *)(sidecar_get_str(pv, "spec.csi.volumeHandle") ?: "");
	return sidecar_roundtrip(&q.base,
	                         &csi__v1__controller_unpublish_volume_request__descriptor);
}

Csi__V1__ControllerExpandVolumeRequest *sidecar_expand(const struct sidecar_caps *c,
                                                       const cJSON *pv, long long bytes, char *err,
                                                       size_t errcap)
{
	struct arena a = {.n = 0};
	Csi__V1__ControllerExpandVolumeRequest q = CSI__V1__CONTROLLER_EXPAND_VOLUME_REQUEST__INIT,
	                                       *out = NULL;
	Csi__V1__CapacityRange cr = CSI__V1__CAPACITY_RANGE__INIT;
	if (!(q.volume_capability = pv_capability(&a, c, pv, err, errcap)))
		goto done;
	q.volume_id = (char *)(sidecar_get_str(pv, "spec.csi.volumeHandle") ?: "");
	cr.required_bytes = bytes;
	q.capacity_range = &cr;
	out = sidecar_roundtrip(&q.base, &csi__v1__controller_expand_volume_request__descriptor);
done:
	a_free(&a);
	return out;
}
