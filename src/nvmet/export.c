/* Exports: prepare, link, remove, host grants and revocations, online resize, listing
 * (nvmet.md §5–§8).  Every attribute change goes through nvmet_attr_write. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nvmet/fs.h"

#define REL(buf, ...)                                                                      \
	do {                                                                               \
		if (nvmet_fs_rel(buf, __VA_ARGS__) < 0)                                    \
			return err_set(e, -ENAMETOOLONG, "nvmet: configfs path too long"); \
	} while (0)

static int need_tree(nvmet *nv, struct err *e)
{
	if (!nvmet_available(nv))
		return err_set(e, -ENOENT, "nvmet configfs not available at %s", nvmet_dir(nv));
	return 0;
}

/* An NQN becomes a directory name: refuse anything that could escape it. */
static int check_nqn(const char *nqn, struct err *e)
{
	size_t n = strlen(nqn);
	if (n == 0 || n > RULES_NQN_MAX || strchr(nqn, '/') || strcmp(nqn, ".") == 0 ||
	    strcmp(nqn, "..") == 0)
		return err_set(e, -EINVAL, "invalid NQN \"%s\"", nqn);
	return 0;
}

bool nvmet_subsys_exists(nvmet *nv, const char *nqn)
{
	char rel[NVMET_PATH_MAX];
	return check_nqn(nqn, NULL) == 0 && nvmet_fs_rel(rel, "subsystems/%s", nqn) == 0 &&
	       nvmet_fs_exists(nv, rel);
}

/* Port IDs (numerically sorted) whose subsystems/ links nqn.  Caller frees *ids. */
static int ports_linking(nvmet *nv, const char *nqn, unsigned **ids, size_t *n, struct err *e)
{
	char **names;
	size_t cnt, k = 0;
	char rel[NVMET_PATH_MAX];
	int r = nvmet_fs_list(nv, "ports", &names, &cnt, e);
	*ids = NULL;
	*n = 0;
	if (r < 0)
		return r;
	unsigned *v = calloc(cnt ? cnt : 1, sizeof(*v));
	if (!v) {
		nvmet_fs_names_free(names, cnt);
		return err_set(e, -ENOMEM, "nvmet: out of memory");
	}
	for (size_t i = 0; i < cnt; i++) {
		if (nvmet_fs_rel(rel, "ports/%s/subsystems/%s", names[i], nqn) == 0 &&
		    nvmet_fs_exists(nv, rel))
			v[k++] = (unsigned)strtoul(names[i], NULL, 10);
	}
	nvmet_fs_names_free(names, cnt);
	for (size_t i = 1; i < k; i++) /* insertion sort: a handful of ports */
		for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
			unsigned t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	*ids = v;
	*n = k;
	return 0;
}

int nvmet_port_names(nvmet *nv, char ***names, size_t *n, struct err *e)
{
	return nvmet_fs_list(nv, "ports", names, n, e);
}

void nvmet_names_free(char **names, size_t n)
{
	nvmet_fs_names_free(names, n);
}

/* Whether one of the listed ports links nqn: one lstat per port. */
static bool linked_in(nvmet *nv, const char *nqn, char *const *ports, size_t n)
{
	char rel[NVMET_PATH_MAX];
	for (size_t i = 0; i < n; i++)
		if (nvmet_fs_rel(rel, "ports/%s/subsystems/%s", ports[i], nqn) == 0 &&
		    nvmet_fs_exists(nv, rel))
			return true;
	return false;
}

int nvmet_subsys_linked(nvmet *nv, const char *nqn, struct err *e)
{
	unsigned *ids;
	size_t n;
	int r = ports_linking(nv, nqn, &ids, &n, e);
	if (r < 0)
		return r;
	free(ids);
	return n > 0;
}

/* §7 step 5: rmdir hosts/<h> when no subsystem (ours or not) links it; EBUSY keeps it.  The
 * handle's host references (hostref.c) answer "still linked" without scanning every subsystem;
 * "unused" always comes from the full scan. */
static int prune_host(nvmet *nv, const char *host, struct err *e)
{
	char rel[NVMET_PATH_MAX];
	int r = nvmet_hostref_used(nv, host, e);
	if (r != 0)
		return r < 0 ? r : 0;
	REL(rel, "hosts/%s", host);
	r = nvmet_fs_rmdir(nv, rel, e);
	return r == -EBUSY ? 0 : r;
}

static int grant_host(nvmet *nv, const char *nqn, const char *host, struct err *e)
{
	char rel[NVMET_PATH_MAX], target[NVMET_PATH_MAX];
	int r = rules_hostnqn_check(host, e);
	if (r < 0)
		return r;
	REL(rel, "hosts/%s", host);
	if ((r = nvmet_fs_mkdir(nv, rel, NULL, e)) < 0)
		return r;
	REL(target, "../../../hosts/%s", host);
	REL(rel, "subsystems/%s/allowed_hosts/%s", nqn, host);
	bool created;
	if ((r = nvmet_fs_symlink(nv, target, rel, &created, e)) == 0 && created)
		nvmet_hostref_add(nv, host, nqn);
	return r;
}

static bool in_list(const char *s, const char *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(s, v[i]) == 0)
			return true;
	return false;
}

/* Unlinks allowed_hosts entries (all, or those not in keep) and prunes their host dirs.
 * *removed counts the links removed. */
static int revoke_hosts(nvmet *nv, const char *nqn, const char *const *keep, size_t n_keep,
                        bool all, size_t *removed, struct err *e)
{
	char **names;
	size_t n;
	char rel[NVMET_PATH_MAX];
	int r;
	*removed = 0;
	REL(rel, "subsystems/%s/allowed_hosts", nqn);
	if ((r = nvmet_fs_list(nv, rel, &names, &n, e)) < 0)
		return r;
	for (size_t i = 0; i < n && r == 0; i++) {
		if (!all && in_list(names[i], keep, n_keep))
			continue;
		if (nvmet_fs_rel(rel, "subsystems/%s/allowed_hosts/%s", nqn, names[i]) < 0) {
			r = err_set(e, -ENAMETOOLONG, "nvmet: configfs path too long");
			break;
		}
		r = nvmet_fs_unlink(nv, rel, e);
		if (r == 0) {
			(*removed)++;
			r = prune_host(nv, names[i], e);
		}
	}
	nvmet_fs_names_free(names, n);
	return r;
}

/* new_subsys: the subsystem was just made, so its namespace is new and disabled. */
static int prepare_namespace(nvmet *nv, const struct nvmet_export_spec *s, bool new_subsys,
                             struct nvmet_prepared *out, struct err *e)
{
	char rel[NVMET_PATH_MAX], ns[NVMET_PATH_MAX], en[16], cur[NVMET_PATH_MAX];
	int r;
	REL(ns, "subsystems/%s/namespaces/1", s->nqn);
	if ((r = nvmet_fs_mkdir(nv, ns, NULL, e)) < 0)
		return r;
	REL(rel, "%s/enable", ns);
	if (!new_subsys && nvmet_attr_read(nv, rel, en, sizeof(en), NULL) == 0 &&
	    strcmp(en, "1") == 0) {
		REL(rel, "%s/device_path", ns);
		if ((r = nvmet_attr_read(nv, rel, cur, sizeof(cur), e)) < 0)
			return r;
		if (strcmp(cur, s->device_path) != 0)
			return err_set(
			    e, -EBUSY,
			    "namespace 1 of %s is enabled with device %s; refusing to switch "
			    "it to %s",
			    s->nqn, cur, s->device_path);
		/* Live identity wins (agent-api.md §8.3 rule 2). */
		REL(rel, "%s/device_uuid", ns);
		if ((r = nvmet_attr_read(nv, rel, out->identity.uuid, sizeof(out->identity.uuid),
		                         e)) < 0)
			return r;
		REL(rel, "%s/device_nguid", ns);
		return nvmet_attr_read(nv, rel, out->identity.nguid, sizeof(out->identity.nguid),
		                       e);
	}
	/* Disabled: device and identity first (K3), enable last.  A new namespace holds the
	 * kernel's defaults (no device, random UUID, zero NGUID, disabled): no read first. */
	int (*set)(nvmet *, const char *, const char *, struct err *) =
	    new_subsys ? nvmet_attr_write_new : nvmet_attr_write;
	REL(rel, "%s/device_path", ns);
	if ((r = set(nv, rel, s->device_path, e)) < 0)
		return r;
	REL(rel, "%s/device_uuid", ns);
	if ((r = set(nv, rel, s->identity.uuid, e)) < 0)
		return r;
	REL(rel, "%s/device_nguid", ns);
	if ((r = set(nv, rel, s->identity.nguid, e)) < 0)
		return r;
	memcpy(out->identity.uuid, s->identity.uuid, sizeof(out->identity.uuid));
	memcpy(out->identity.nguid, s->identity.nguid, sizeof(out->identity.nguid));
	REL(rel, "%s/enable", ns);
	return set(nv, rel, "1", e);
}

int nvmet_export_prepare(nvmet *nv, const struct nvmet_export_spec *s, struct nvmet_prepared *out,
                         struct err *e)
{
	char sub[NVMET_PATH_MAX], rel[NVMET_PATH_MAX];
	size_t removed = 0;
	int r;
	memset(out, 0, sizeof(*out));
	if ((r = check_nqn(s->nqn, e)) < 0)
		return r;
	for (size_t i = 0; s->acl && i < s->n_hosts; i++)
		if ((r = rules_hostnqn_check(s->hosts[i], e)) < 0)
			return r;
	REL(sub, "subsystems/%s", s->nqn);
	bool created;
	/* no tree: the mkdir fails (ENOENT), and only then is the tree looked at */
	if ((r = nvmet_fs_mkdir(nv, sub, &created, e)) < 0)
		return r == -ENOENT && need_tree(nv, e) < 0 ? -ENOENT : r;
	/* A subsystem this call made has no port link, allowed host or namespace yet: what a
	 * restore on an empty configfs does for every export, without scanning for them.  Not
	 * knowing (out of memory) would rewrite a live subsystem's serial (K4). */
	if (!created) {
		if (!s->ports_listed && (r = nvmet_subsys_linked(nv, s->nqn, e)) < 0)
			return r;
		out->linked = s->ports_listed ? linked_in(nv, s->nqn, s->ports, s->n_ports) : r;
	}

	/* ACL mode, final value first (K1, K2). */
	REL(rel, "%s/attr_allow_any_host", sub);
	if (s->acl) {
		if ((r = nvmet_attr_write(nv, rel, "0", e)) < 0)
			return r;
	} else {
		if ((r = revoke_hosts(nv, s->nqn, NULL, 0, true, &removed, e)) < 0)
			return r;
		if ((r = nvmet_attr_write(nv, rel, "1", e)) < 0)
			return r;
	}

	/* Serial before any link (K4); a linked subsystem keeps its live serial. */
	REL(rel, "%s/attr_serial", sub);
	if (!out->linked) {
		/* a new subsystem's serial is the kernel's random one (K11) */
		if ((r = (created ? nvmet_attr_write_new
		                  : nvmet_attr_write)(nv, rel, s->identity.serial, e)) < 0)
			return r;
		memcpy(out->identity.serial, s->identity.serial, sizeof(out->identity.serial));
	} else if ((r = nvmet_attr_read(nv, rel, out->identity.serial, sizeof(out->identity.serial),
	                                e)) < 0) {
		return r;
	}

	if (s->acl) {
		for (size_t i = 0; i < s->n_hosts; i++)
			if ((r = grant_host(nv, s->nqn, s->hosts[i], e)) < 0)
				return r;
		if (s->exact_hosts && !created) {
			if ((r = revoke_hosts(nv, s->nqn, s->hosts, s->n_hosts, false, &removed,
			                      e)) < 0)
				return r;
			out->relink = out->linked && removed > 0 && s->n_hosts == 0;
		}
	}

	/* Verify (step 7): every value above was read (a satisfied write) or read back (a
	 * write) after it was set, with the subsystem's lock held; nothing reads them again. */
	return prepare_namespace(nv, s, created, out, e);
}

/* ---- phase 2 -------------------------------------------------------------------------------- */

struct port_want {
	const char *adrfam, *traddr;
	char trsvcid[12];
};

static int port_matches(nvmet *nv, const char *id, const struct port_want *w)
{
	static const char *const keys[] = {"addr_trtype", "addr_adrfam", "addr_traddr",
	                                   "addr_trsvcid"};
	const char *vals[] = {"tcp", w->adrfam, w->traddr, w->trsvcid};
	char rel[NVMET_PATH_MAX], v[128];
	for (int i = 0; i < 4; i++) {
		if (nvmet_fs_rel(rel, "ports/%s/%s", id, keys[i]) < 0 ||
		    nvmet_attr_read(nv, rel, v, sizeof(v), NULL) < 0 || strcmp(v, vals[i]) != 0)
			return 0;
	}
	return 1;
}

/* A port directory left unconfigured (no address, nothing linked): what a process killed right
 * after the mkdir leaves behind.  It is nobody's port, so selection may take it. */
static bool port_unconfigured(nvmet *nv, unsigned id)
{
	char rel[NVMET_PATH_MAX], v[128];
	static const char *const keys[] = {"addr_trtype", "addr_trsvcid"};
	for (int i = 0; i < 2; i++)
		if (nvmet_fs_rel(rel, "ports/%u/%s", id, keys[i]) < 0 ||
		    nvmet_attr_read(nv, rel, v, sizeof(v), NULL) < 0 || *v)
			return false;
	return nvmet_fs_rel(rel, "ports/%u/subsystems", id) == 0 &&
	       nvmet_fs_empty(nv, rel, NULL) == 1;
}

static int select_port(nvmet *nv, const struct nvmet_export_spec *s, const struct port_want *w,
                       unsigned *id, struct err *e)
{
	char **names;
	size_t n;
	char rel[NVMET_PATH_MAX];
	int r = nvmet_fs_list(nv, "ports", &names, &n, e);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		if (port_matches(nv, names[i], w)) {
			*id = (unsigned)strtoul(names[i], NULL, 10);
			nvmet_fs_names_free(names, n);
			return 0;
		}
	}
	nvmet_fs_names_free(names, n);
	unsigned cand = nvmet_port_preferred_id(s->bind_address, s->port);
	for (unsigned tries = 0; tries < 65535; tries++) {
		REL(rel, "ports/%u", cand);
		if (!nvmet_fs_exists(nv, rel) || port_unconfigured(nv, cand)) {
			*id = cand;
			return 0;
		}
		cand = cand == 65535 ? 1 : cand + 1;
	}
	return err_set(e, -ENOSPC, "nvmet: no free port ID");
}

static int write_port_attrs(nvmet *nv, unsigned id, const struct port_want *w, int32_t icds,
                            struct err *e)
{
	static const char *const keys[] = {"addr_trtype", "addr_adrfam", "addr_traddr",
	                                   "addr_trsvcid", "param_inline_data_size"};
	char rel[NVMET_PATH_MAX], size[16];
	snprintf(size, sizeof(size), "%d", icds > 0 ? (int)icds : -1);
	const char *vals[] = {"tcp", w->adrfam, w->traddr, w->trsvcid, size};
	for (int i = 0; i < 5; i++) {
		REL(rel, "ports/%u/%s", id, keys[i]);
		int r = nvmet_attr_write(nv, rel, vals[i], e);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Links nqn to port id and checks that the link leads to the subsystem: stat through the link
 * and of the subsystem name the same directory (two stats, not a realpath of each side). */
static int link_one(nvmet *nv, unsigned id, const char *nqn, struct err *e)
{
	char rel[NVMET_PATH_MAX], target[NVMET_PATH_MAX];
	REL(target, "../../../subsystems/%s", nqn);
	REL(rel, "ports/%u/subsystems/%s", id, nqn);
	int r = nvmet_fs_symlink(nv, target, rel, NULL, e);
	if (r < 0) {
		err_set(e, r, "nvmet link subsystem %s to port %u: %s", nqn, id,
		        nvmet_fs_errname(r));
		return r;
	}
	if (nvmet_fs_rel(target, "subsystems/%s", nqn) < 0 || !nvmet_fs_same(nv, rel, target))
		return err_set(e, -EIO, "nvmet %s: link does not resolve to subsystems/%s", rel,
		               nqn);
	return 0;
}

/* Steps 5-7 of §5.2 on port id: the in-capsule rule when the port was already linked (live),
 * the relink, the link and its read-back. */
static int link_live(nvmet *nv, const struct nvmet_export_spec *s, const char *adrfam, unsigned id,
                     bool live, bool relink, struct err *e)
{
	char rel[NVMET_PATH_MAX], cur[32];
	int r;
	if (live && s->icds > 0) {
		REL(rel, "ports/%u/param_inline_data_size", id);
		if ((r = nvmet_attr_read(nv, rel, cur, sizeof(cur), e)) < 0)
			return r;
		if (strtol(cur, NULL, 10) != s->icds || !*cur)
			return err_set(
			    e, -EBUSY,
			    "param_inline_data_size is %s but the export requires %d (port %u, "
			    "%s %u)",
			    cur, (int)s->icds, id, adrfam, s->port);
	}
	if (relink) {
		REL(rel, "ports/%u/subsystems/%s", id, s->nqn);
		if ((r = nvmet_fs_unlink(nv, rel, e)) < 0)
			return r;
	}
	return link_one(nv, id, s->nqn, e);
}

int nvmet_export_link(nvmet *nv, const struct nvmet_export_spec *s, bool relink, unsigned *port_id,
                      struct err *e)
{
	struct port_want w;
	unsigned char buf[sizeof(struct in6_addr)];
	char rel[NVMET_PATH_MAX];
	bool created;
	unsigned id = 0;
	int r;
	if ((r = need_tree(nv, e)) < 0 || (r = check_nqn(s->nqn, e)) < 0)
		return r;
	if (inet_pton(AF_INET, s->bind_address, buf) == 1) {
		w.adrfam = "ipv4";
		w.traddr = "0.0.0.0";
	} else if (inet_pton(AF_INET6, s->bind_address, buf) == 1) {
		w.adrfam = "ipv6";
		w.traddr = "::";
	} else {
		return err_set(e, -EINVAL, "bind address \"%s\" is not an IP literal",
		               s->bind_address);
	}
	snprintf(w.trsvcid, sizeof(w.trsvcid), "%u", s->port);
	if ((r = select_port(nv, s, &w, &id, e)) < 0)
		return r;
	REL(rel, "ports/%u", id);
	if ((r = nvmet_fs_mkdir(nv, rel, &created, e)) < 0)
		return r;
	REL(rel, "ports/%u/subsystems", id);
	if ((r = nvmet_fs_empty(nv, rel, e)) < 0) /* one directory block, not every link */
		return r;
	bool live = !created && r == 0;
	/* Disabled port: every attribute may be (re)written (K5). */
	if (!live && (r = write_port_attrs(nv, id, &w, s->icds, e)) < 0)
		return r;
	if ((r = link_live(nv, s, w.adrfam, id, live, relink, e)) < 0)
		return r;
	if (port_id)
		*port_id = id;
	return 0;
}

int nvmet_export_link_known(nvmet *nv, const struct nvmet_export_spec *s, bool relink,
                            unsigned port_id, const char *linked_nqn, struct err *e)
{
	char rel[NVMET_PATH_MAX];
	unsigned char buf[sizeof(struct in6_addr)];
	int r;
	if ((r = check_nqn(s->nqn, e)) < 0 || (r = check_nqn(linked_nqn, e)) < 0)
		return r;
	/* the earlier export's link (one lstat, not a read of the port's links) */
	REL(rel, "ports/%u/subsystems/%s", port_id, linked_nqn);
	if (!nvmet_fs_exists(nv, rel)) /* not the live port the caller saw: as usual */
		return nvmet_export_link(nv, s, relink, NULL, e);
	const char *fam = inet_pton(AF_INET, s->bind_address, buf) == 1 ? "ipv4" : "ipv6";
	return link_live(nv, s, fam, port_id, true, relink, e);
}

/* ---- removal, hosts, resize, listing ----------------------------------------------------------- */

int nvmet_export_remove(nvmet *nv, const char *nqn, struct err *e)
{
	char rel[NVMET_PATH_MAX];
	unsigned *ids;
	size_t n, removed;
	int r;
	if ((r = check_nqn(nqn, e)) < 0)
		return r;
	if (!nvmet_subsys_exists(nv, nqn))
		return 0;
	if ((r = ports_linking(nv, nqn, &ids, &n, e)) < 0)
		return r;
	for (size_t i = 0; i < n && r == 0; i++) {
		if (nvmet_fs_rel(rel, "ports/%u/subsystems/%s", ids[i], nqn) < 0 ||
		    (r = nvmet_fs_unlink(nv, rel, e)) < 0)
			break;
		snprintf(rel, sizeof(rel), "ports/%u/subsystems", ids[i]);
		if ((r = nvmet_fs_empty(nv, rel, e)) < 0)
			break;
		snprintf(rel, sizeof(rel), "ports/%u", ids[i]);
		r = r == 1 ? nvmet_fs_rmdir(nv, rel, e) : 0;
	}
	free(ids);
	if (r < 0)
		return r;
	REL(rel, "subsystems/%s/namespaces/1", nqn);
	if (nvmet_fs_exists(nv, rel)) {
		REL(rel, "subsystems/%s/namespaces/1/enable", nqn);
		if ((r = nvmet_attr_write(nv, rel, "0", e)) < 0)
			return r;
		REL(rel, "subsystems/%s/namespaces/1", nqn);
		if ((r = nvmet_fs_rmdir(nv, rel, e)) < 0)
			return r;
	}
	if ((r = revoke_hosts(nv, nqn, NULL, 0, true, &removed, e)) < 0)
		return r;
	REL(rel, "subsystems/%s", nqn);
	return nvmet_fs_rmdir(nv, rel, e);
}

int nvmet_host_allow(nvmet *nv, const char *nqn, const char *hostnqn, struct err *e)
{
	char rel[NVMET_PATH_MAX], v[16];
	int r;
	if ((r = check_nqn(nqn, e)) < 0 || (r = rules_hostnqn_check(hostnqn, e)) < 0)
		return r;
	if (!nvmet_subsys_exists(nv, nqn))
		return err_set(e, -ENOENT, "subsystem %s does not exist", nqn);
	REL(rel, "subsystems/%s/attr_allow_any_host", nqn);
	if ((r = nvmet_attr_read(nv, rel, v, sizeof(v), e)) < 0)
		return r;
	if (strcmp(v, "1") == 0)
		return 0; /* ACL off: already admitted */
	return grant_host(nv, nqn, hostnqn, e);
}

static int relink_all(nvmet *nv, const char *nqn, struct err *e)
{
	unsigned *ids;
	size_t n;
	int r = ports_linking(nv, nqn, &ids, &n, e);
	for (size_t i = 0; r == 0 && i < n; i++) {
		char rel[NVMET_PATH_MAX];
		snprintf(rel, sizeof(rel), "ports/%u/subsystems/%s", ids[i], nqn);
		if ((r = nvmet_fs_unlink(nv, rel, e)) == 0)
			r = link_one(nv, ids[i], nqn, e);
	}
	free(ids);
	return r;
}

int nvmet_host_deny(nvmet *nv, const char *nqn, const char *hostnqn, struct err *e)
{
	char rel[NVMET_PATH_MAX], v[16];
	int r;
	if ((r = check_nqn(nqn, e)) < 0 || (r = rules_hostnqn_check(hostnqn, e)) < 0)
		return r;
	if (!nvmet_subsys_exists(nv, nqn))
		return 0;
	REL(rel, "subsystems/%s/allowed_hosts/%s", nqn, hostnqn);
	if ((r = nvmet_fs_unlink(nv, rel, e)) < 0)
		return r;
	if ((r = prune_host(nv, hostnqn, e)) < 0)
		return r;
	REL(rel, "subsystems/%s/attr_allow_any_host", nqn);
	if ((r = nvmet_attr_read(nv, rel, v, sizeof(v), e)) < 0)
		return r;
	if (strcmp(v, "0") != 0)
		return 0;
	REL(rel, "subsystems/%s/allowed_hosts", nqn);
	if ((r = nvmet_fs_empty(nv, rel, e)) < 0)
		return r;
	/* Beyond the reference (§6.3 step 3): no admitted host left → drop live associations. */
	return r == 1 ? relink_all(nv, nqn, e) : 0;
}

int nvmet_ns_revalidate(nvmet *nv, const char *nqn, struct err *e)
{
	char rel[NVMET_PATH_MAX], v[16];
	int r;
	if ((r = check_nqn(nqn, e)) < 0)
		return r;
	REL(rel, "subsystems/%s/namespaces/1/enable", nqn);
	if (nvmet_attr_read(nv, rel, v, sizeof(v), NULL) < 0 || strcmp(v, "1") != 0)
		return 0;
	REL(rel, "subsystems/%s/namespaces/1/revalidate_size", nqn);
	if (!nvmet_fs_exists(nv, rel))
		return err_set(
		    e, -EOPNOTSUPP,
		    "kernel nvmet has no revalidate_size; online resize is not supported on "
		    "this storage node");
	return nvmet_fs_write_only(nv, rel, "1", e);
}

int nvmet_export_list(nvmet *nv, struct nvmet_export_entry **out, size_t *n_out, struct err *e)
{
	char **subs, rel[NVMET_PATH_MAX], v[16];
	size_t n, k = 0;
	*out = NULL;
	*n_out = 0;
	int r = nvmet_fs_list(nv, "subsystems", &subs, &n, e);
	if (r < 0)
		return r;
	struct nvmet_export_entry *v_out = calloc(n ? n : 1, sizeof(*v_out));
	if (!v_out) {
		nvmet_fs_names_free(subs, n);
		return err_set(e, -ENOMEM, "nvmet: out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		struct nvmet_export_entry *x = &v_out[k];
		unsigned *ids = NULL;
		size_t nid = 0;
		if (strlen(subs[i]) > RULES_NQN_MAX ||
		    rules_volume_of_nqn(subs[i], x->volume_id, sizeof(x->volume_id)) < 0)
			continue;
		snprintf(x->nqn, sizeof(x->nqn), "%s", subs[i]);
		if (ports_linking(nv, subs[i], &ids, &nid, NULL) == 0 && nid > 0) {
			snprintf(rel, sizeof(rel), "ports/%u/addr_trsvcid", ids[0]);
			if (nvmet_attr_read(nv, rel, v, sizeof(v), NULL) == 0)
				x->port = (int32_t)strtol(v, NULL, 10);
		}
		free(ids);
		k++;
	}
	nvmet_fs_names_free(subs, n);
	*out = v_out;
	*n_out = k;
	return 0;
}
