/* rules/volid — CSI volume IDs, volume names and the PillarVolumeState name of a volume
 * (csi.md §2), and Kubernetes object names (crds.md §1): the one definition controller, node
 * and agent share.
 *
 * A volume ID is `<agent>/<protocol>/<backend>/<pool>/<name>`: exactly five non-empty segments;
 * <agent> a Kubernetes object name (rules_objname_check), <protocol> `nvmeof-tcp`, <backend>
 * `zfs-zvol`, `lvm-lv` or `file`, <pool> made of [A-Za-z0-9._:-] and not "." or "..", <name> a
 * CSI volume name (rules_volname_valid).  Every accepted ID is therefore safe as one path
 * component once its `/` are replaced.  The functions are pure and thread-safe.
 */
#ifndef PILLAR_RULES_VOLID_H
#define PILLAR_RULES_VOLID_H

#include <stdbool.h>
#include <stddef.h>

#define RULES_PROTOCOL_NVMEOF_TCP "nvmeof-tcp"
#define RULES_VOLNAME_MAX         128
#define RULES_OBJNAME_MAX         253
/* "pillar-" + 32 hex digits, or the CSI name itself: at most 128 characters plus NUL. */
#define RULES_PVST_NAME_CAP 130

struct rules_volid {
	char agent[RULES_OBJNAME_MAX + 1], protocol[32], backend[32], pool[254];
	char name[RULES_VOLNAME_MAX + 2];
	char agent_volume_id[390]; /* <pool>/<name> */
};

/* Parses id into v (zeroed first).  Returns 0; -EPROTONOSUPPORT when the ID is well-formed but
 * names another protocol than nvmeof-tcp (v is filled: the caller may report the protocol);
 * -EINVAL when malformed (NULL, wrong segment count, bad characters, unknown backend, bad
 * agent or volume name). */
int rules_volid_parse(const char *id, struct rules_volid *v);

/* The agent volume ID `<pool>/<name>` alone (agent-api.md: the agent sees only this part), with
 * the same pool and name rules.  0 with pool and name copied out (pool_cap/name_cap bytes), or
 * -EINVAL. */
int rules_agent_volid_parse(const char *id, char *pool, size_t pool_cap, char *name,
                            size_t name_cap);

/* Builds the volume ID of a new volume (csi.md §2.1): `<agent>/nvmeof-tcp/<backend>/<pool>/
 * <name>` into id (cap bytes; RULES_VOLID_CAP is enough for any valid ID) and its parts into v,
 * checking each part against the grammar above.  Returns 0, or -EINVAL when a part breaks it
 * or the ID does not fit (id then holds the text, cut to cap, for a message). */
#define RULES_VOLID_CAP 800
int rules_volid_make(const char *agent, const char *backend, const char *pool, const char *name,
                     char *id, size_t cap, struct rules_volid *v);

/* Snapshot IDs (docs/snapshots.md): `<agent>/snapshot/<backend>/<pool>/<name>`, the grammar of a
 * volume ID with the literal `snapshot` in place of the protocol: a snapshot lives on its source
 * volume's agent and pool, and no snapshot ID is a volume ID or the other way round.
 * agent_volume_id holds the agent's snapshot ID `<pool>/<name>`.  0 or -EINVAL, as
 * rules_volid_parse / rules_volid_make. */
#define RULES_SNAPID_TAG "snapshot"
int rules_snapid_parse(const char *id, struct rules_volid *v);
int rules_snapid_make(const char *agent, const char *backend, const char *pool, const char *name,
                      char *id, size_t cap, struct rules_volid *v);

/* true when name matches ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$ (csi.md §2.2). */
bool rules_volname_valid(const char *name);

/* The PillarVolumeState name of a CSI volume name (csi.md §2.2): the name itself when it
 * matches ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ (and fits 253), else `pillar-` + the lowercase hex
 * of the first 16 bytes of SHA-256 of the name.  out has cap bytes (RULES_PVST_NAME_CAP is
 * enough for every valid CSI name); the result is cut to fit a smaller buffer. */
void rules_pvst_name(const char *csi_name, char *out, size_t cap);

/* Kubernetes object names (DNS subdomain, crds.md §1).  Returns RULES_OBJNAME_OK or the first
 * reason the name is refused, in the order: empty, longer than 253, a character outside
 * [a-z0-9.-] or '-'/'.' first or last, "..". */
enum rules_objname {
	RULES_OBJNAME_OK = 0,
	RULES_OBJNAME_EMPTY,
	RULES_OBJNAME_TOO_LONG,
	RULES_OBJNAME_BAD_CHAR,
	RULES_OBJNAME_DOT_DOT,
};
enum rules_objname rules_objname_check(const char *name);

#endif
