/* auth — the agent API's HostAuth (docs/authentication.md "Keys"): the DH-HMAC-CHAP settings of
 * a host entry, checked before anything is touched and written before the host is admitted.
 *
 * Keys are secrets: no message here quotes one, and the agent keeps none on disk (the controller
 * sends them again in every ReconcileState). */
#include <errno.h>
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

int svc_auth_write(agent_service *a, const PB(HostAuth) * h, struct grpc_status *st)
{
	struct err e = {0};
	enum nvme_dhchap_hash hash;
	if (nvme_dhchap_hash_parse(h->hash, &hash) < 0) /* checked: svc_auth_check */
		return grpc_status_set(st, GRPC_INVALID_ARGUMENT,
		                       "hash must be one of sha256, "
		                       "sha384, sha512");
	struct nvmet_host_auth na = {
	    .hash = nvme_dhchap_hash_kernel(hash),
	    .dh_group = h->dh_group,
	    .key = h->dhchap_key,
	    .ctrl_key = h->dhchap_ctrl_key && *h->dhchap_ctrl_key ? h->dhchap_ctrl_key : NULL};
	pthread_mutex_lock(&a->nv_mu);
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
