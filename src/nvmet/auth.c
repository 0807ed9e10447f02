/* In-band authentication attributes of nvmet host entries (nvmet.h). */
#include <errno.h>
#include <string.h>

#include "nvme/dhchap.h"
#include "nvmet/fs.h"
#include "nvmet/nvmet.h"

static const char *const hashes[] = {"hmac(sha256)", "hmac(sha384)", "hmac(sha512)", NULL};
static const char *const groups[] = {"null",      "ffdhe2048", "ffdhe3072", "ffdhe4096",
                                     "ffdhe6144", "ffdhe8192", NULL};

static bool one_of(const char *v, const char *const *set)
{
	for (; v && *set; set++)
		if (strcmp(v, *set) == 0)
			return true;
	return false;
}

/* Makes hosts/<hostnqn> when missing; rel receives "hosts/<hostnqn>". */
static int host_entry(nvmet *nv, const char *hostnqn, char rel[NVMET_PATH_MAX], struct err *e)
{
	int r = rules_hostnqn_check(hostnqn, e);
	if (r < 0)
		return r;
	if (nvmet_fs_rel(rel, "hosts/%s", hostnqn) < 0)
		return err_set(e, -ENAMETOOLONG, "nvmet hosts/%s: path too long", hostnqn);
	return nvmet_fs_mkdir(nv, rel, NULL, e);
}

int nvmet_host_auth_supported(nvmet *nv, const char *hostnqn, struct err *e)
{
	char rel[NVMET_PATH_MAX], attr[NVMET_PATH_MAX];
	int r = host_entry(nv, hostnqn, rel, e);
	if (r < 0)
		return r;
	if (nvmet_fs_rel(attr, "%s/dhchap_key", rel) < 0)
		return err_set(e, -ENAMETOOLONG, "nvmet %s: path too long", rel);
	return nvmet_fs_exists(nv, attr) ? 1 : 0;
}

int nvmet_host_auth_probe(nvmet *nv, struct err *e)
{
	char rel[NVMET_PATH_MAX];
	struct err ignored = {0};
	if (nvmet_fs_rel(rel, "hosts/%s", NVMET_AUTH_PROBE_NQN) < 0)
		return err_set(e, -ENAMETOOLONG, "nvmet hosts/%s: path too long",
		               NVMET_AUTH_PROBE_NQN);
	bool existed = nvmet_fs_exists(nv, rel);
	int r = nvmet_host_auth_supported(nv, NVMET_AUTH_PROBE_NQN, e);
	if (!existed)
		nvmet_fs_rmdir(nv, rel, &ignored); /* best effort: an idle entry admits no one */
	return r;
}

static int write_attr(nvmet *nv, const char *host, const char *name, const char *value, bool secret,
                      struct err *e)
{
	char rel[NVMET_PATH_MAX];
	if (nvmet_fs_rel(rel, "%s/%s", host, name) < 0)
		return err_set(e, -ENAMETOOLONG, "nvmet %s/%s: path too long", host, name);
	return secret ? nvmet_fs_write_secret(nv, rel, value, e)
	              : nvmet_attr_write(nv, rel, value, e);
}

int nvmet_host_auth_set(nvmet *nv, const char *hostnqn, const struct nvmet_host_auth *a,
                        struct err *e)
{
	char rel[NVMET_PATH_MAX];
	int r;
	if (!one_of(a->hash, hashes))
		return err_set(e, -EINVAL,
		               "DH-HMAC-CHAP hash must be hmac(sha256), hmac(sha384) or "
		               "hmac(sha512)");
	if (!one_of(a->dh_group, groups))
		return err_set(e, -EINVAL,
		               "DH-HMAC-CHAP group must be null or ffdhe2048 ... ffdhe8192");
	if (nvme_dhchap_secret_check(a->key, e) < 0 ||
	    (a->ctrl_key && nvme_dhchap_secret_check(a->ctrl_key, e) < 0)) {
		err_prefix(e, "host %s", hostnqn);
		return -EINVAL;
	}
	if ((r = nvmet_host_auth_supported(nv, hostnqn, e)) < 0)
		return r;
	if (r == 0)
		return err_set(e, -EOPNOTSUPP, NVMET_AUTH_MISSING_MSG);
	if (nvmet_fs_rel(rel, "hosts/%s", hostnqn) < 0)
		return err_set(e, -ENAMETOOLONG, "nvmet hosts/%s: path too long", hostnqn);
	if ((r = write_attr(nv, rel, "dhchap_hash", a->hash, false, e)) < 0 ||
	    (r = write_attr(nv, rel, "dhchap_dhgroup", a->dh_group, false, e)) < 0 ||
	    (r = write_attr(nv, rel, "dhchap_key", a->key, true, e)) < 0)
		return r;
	if (a->ctrl_key)
		r = write_attr(nv, rel, "dhchap_ctrl_key", a->ctrl_key, true, e);
	return r;
}
