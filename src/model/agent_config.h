/* model/agent_config — the agent's configuration file (agent-api.md §11.2, §14 and
 * docs/agent-config.md), described for the codec's strict mode (model.h:
 * model_type_decode_strict).
 *
 * {"backends":[{"zfs":{"pool","parentDataset","volumeType"}} | {"lvm":{"volumeGroup","thinPool",
 * "provisioningMode"}} | {"file":{"pool","directory","preallocate"}}, ...]}
 *
 * The file's syntax and shape (JSON, NUL and UTF-8, unknown and repeated keys, JSON types) are
 * refused by the codec with messages starting "config: "; the rules here (names required and
 * valid, one kind an entry, known values, names unique across backends) with the spec's
 * messages as they are, e.g. `backends[0].zfs.pool is required`.  Rules run entry by entry, in
 * the file's order, so the first fault of the file is the one reported.
 */
#ifndef PILLAR_MODEL_AGENT_CONFIG_H
#define PILLAR_MODEL_AGENT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "model/model.h"

/* The longest pool, volume group or thin pool name, in bytes. */
#define MODEL_AGENT_NAME_MAX 128

struct model_agent_zfs {
	void *rest;
	char *pool, *parent_dataset, *volume_type;
	bool has_properties; /* given: refused (ZFS properties are set per volume) */
};

struct model_agent_lvm {
	void *rest;
	char *volume_group, *thin_pool, *provisioning_mode;
};

struct model_agent_file {
	void *rest;
	char *pool, *directory;
	bool has_preallocate, preallocate;
};

/* One entry of backends: exactly one of the three is given. */
struct model_agent_backend {
	void *rest;
	bool has_zfs;
	struct model_agent_zfs zfs;
	bool has_lvm;
	struct model_agent_lvm lvm;
	bool has_file;
	struct model_agent_file file;
};

struct model_agent_config {
	void *rest;
	size_t n_backends; /* at least 1 once decoded */
	struct model_agent_backend *backends;
};
extern const struct model_type model_agent_config_type;

/* Decodes the file's text (len bytes, NUL bytes included) into *out and checks its rules.  0;
 * -EINVAL with the message in e; -ENOMEM ("config: out of memory").  *out is cleared on error
 * (model_type_clear(&model_agent_config_type, out) after use). */
int model_agent_config_decode(const char *text, size_t len, struct model_agent_config *out,
                              struct err *e);

#endif
