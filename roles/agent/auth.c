/* auth — the agent API's HostAuth (docs/authentication.md "Keys"): the DH-HMAC-CHAP settings of
 * a host entry, checked before anything is touched and written before the host is admitted.
 *
 * Keys are secrets: no message here quotes one, and the agent keeps none on disk (the controller
 * sends them again in every ReconcileState). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/service_int.h"
#include "nvme/dhchap.h"

#define PB(x) PillarCsi__Agent__V1__##x

static const char *const groups[] = {"null",      "ffdhe2048", "ffdhe3072", "ffdhe4096",
                                     "ffdhe6144", "ffdhe8192", NULL};

static bool one_of(const char *v, const char *const *set)
{
	for (; *set; set++)
		if (strcmp(v, *set) == 0)
			return true;
	return false;
}

static int key_check(const char *field, const char *name, const char *key, struct grpc_status *st)
{
	struct err e = {0};
	if (nvme_dhchap_secret_check(key, &e) < 0)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "%s.%s: %s", field, name, e.msg);
	return GRPC_OK;
}

int svc_auth_check(const PB(HostAuth) * h, const char *field, struct grpc_status *st)
{
	struct err e = {0};
	enum nvme_dhchap_hash hash;
	if (rules_hostnqn_check(h->host_nqn ? h->host_nqn : "", &e) < 0)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "%s.host_nqn: %s", field, e.msg);
	if (nvme_dhchap_hash_parse(h->hash ? h->hash : "", &hash) < 0)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
		                       "%s.hash must be one of sha256, sha384, sha512", field);
	if (!one_of(h->dh_group ? h->dh_group : "", groups))
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
		                       "%s.dh_group must be one of null, ffdhe2048, ffdhe3072, "
		                       "ffdhe4096, ffdhe6144, ffdhe8192",
		                       field);
	if (!h->dhchap_key || !*h->dhchap_key)
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT, "%s.dhchap_key is required",
		                       field);
	int code = key_check(field, "dhchap_key", h->dhchap_key, st);
	if (code == GRPC_OK && h->dhchap_ctrl_key && *h->dhchap_ctrl_key)
		code = key_check(field, "dhchap_ctrl_key", h->dhchap_ctrl_key, st);
	return code;
}

static int group_index(const char *g)
{
	for (int i = 0; groups[i]; i++)
		if (strcmp(g, groups[i]) == 0)
			return i;
	return 0;
}

static struct svc_auth_use *find_use(agent_service *a, const char *volume, const char *host)
{
	for (size_t i = 0; i < a->n_auth_uses; i++)
		if (strcmp(a->auth_uses[i].volume, volume) == 0 &&
		    strcmp(a->auth_uses[i].host, host) == 0)
			return &a->auth_uses[i];
	return NULL;
}

int svc_auth_note(agent_service *a, const char *volume, const PB(HostAuth) * h)
{
	enum nvme_dhchap_hash hash = NVME_DHCHAP_SHA256;
	struct svc_auth_use *u = find_use(a, volume, h->host_nqn);
	if (!u) {
		if (a->n_auth_uses == a->cap_auth_uses) {
			size_t cap = a->cap_auth_uses ? 2 * a->cap_auth_uses : 8;
			void *v = realloc(a->auth_uses, cap * sizeof(*a->auth_uses));
			if (!v)
				return -ENOMEM;
			a->auth_uses = v;
			a->cap_auth_uses = cap;
		}
		u = &a->auth_uses[a->n_auth_uses];
		u->host = strdup(h->host_nqn);
		u->volume = strdup(volume);
		if (!u->host || !u->volume) {
			free(u->host);
			free(u->volume);
			return -ENOMEM;
		}
		a->n_auth_uses++;
	}
	nvme_dhchap_hash_parse(h->hash, &hash); /* checked: svc_auth_check */
	u->hash = (int)hash;
	u->group = group_index(h->dh_group);
	u->bidir = h->dhchap_ctrl_key && *h->dhchap_ctrl_key;
	return 0;
}

void svc_auth_forget(agent_service *a, const char *volume, const char *host)
{
	size_t k = 0;
	for (size_t i = 0; i < a->n_auth_uses; i++) {
		struct svc_auth_use *u = &a->auth_uses[i];
		if (!volume ||
		    (strcmp(u->volume, volume) == 0 && (!host || !strcmp(u->host, host)))) {
			free(u->host);
			free(u->volume);
		} else
			a->auth_uses[k++] = *u;
	}
	a->n_auth_uses = k;
}

void svc_auth_uses_free(agent_service *a)
{
	svc_auth_forget(a, NULL, NULL);
	free(a->auth_uses);
	a->auth_uses = NULL;
	a->cap_auth_uses = 0;
}

/* The strongest hash and group the recorded volumes of host ask for. */
static void strongest(const agent_service *a, const char *host, int *hash, int *group)
{
	for (size_t i = 0; i < a->n_auth_uses; i++)
		if (strcmp(a->auth_uses[i].host, host) == 0) {
			if (a->auth_uses[i].hash > *hash)
				*hash = a->auth_uses[i].hash;
			if (a->auth_uses[i].group > *group)
				*group = a->auth_uses[i].group;
		}
}

int svc_auth_write(agent_service *a, const char *volume, const PB(HostAuth) * h,
                   struct grpc_status *st)
{
	struct err e = {0};
	int hash = 0, group = 0;
	pthread_mutex_lock(&a->nv_mu);
	if (svc_auth_note(a, volume, h) < 0) {
		pthread_mutex_unlock(&a->nv_mu);
		return grpc_status_oom(st);
	}
	strongest(a, h->host_nqn, &hash, &group);
	struct nvmet_host_auth na = {
	    .hash = nvme_dhchap_hash_kernel((enum nvme_dhchap_hash)hash),
	    .dh_group = groups[group],
	    .key = h->dhchap_key,
	    .ctrl_key = h->dhchap_ctrl_key && *h->dhchap_ctrl_key ? h->dhchap_ctrl_key : NULL};
	int r = nvmet_host_auth_set(a->nv, h->host_nqn, &na, &e);
	pthread_mutex_unlock(&a->nv_mu);
	if (r < 0)
		return grpc_status_from_err(st, &e);
	return GRPC_OK;
}

bool svc_auth_supported(agent_service *a)
{
	struct err e = {0};
	pthread_mutex_lock(&a->nv_mu);
	if (a->target_auth == 0 && nvmet_available(a->nv)) {
		int r = nvmet_host_auth_probe(a->nv, &e);
		if (r >= 0) /* an error is asked again next time */
			a->target_auth = r ? 1 : -1;
	}
	bool yes = a->target_auth > 0;
	pthread_mutex_unlock(&a->nv_mu);
	return yes;
}
