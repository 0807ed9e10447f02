/* model/dhchap_file — the worker's own DH-HMAC-CHAP key file (docs/authentication.md, "Keys"):
 * <state-dir>/dhchap.key, mode 0600, owned by the node plugin's user, written durably (temp,
 * fsync, rename, fsync of the directory); JSON, one object:
 *
 *   {"node": "<node>", "hostNQN": "<host NQN the keys were made for>",
 *    "current": {"generation": N, "key": "DHHC-1:03:…:", "ctrlKey": "DHHC-1:03:…:"},
 *    "next":    {"generation": M, "key": "DHHC-1:03:…:", "ctrlKey": "DHHC-1:03:…:"},
 *    "rotateRequest": "<last value of the rotation annotation acted on>",
 *    "ctrlKeyDue": true}
 *
 * `current` is the generation the controller confirmed, `next` one made but not yet confirmed
 * (at least one of them is present; M > N).  A rotation is two generations that each change one
 * secret: the host secret first, then the controller secret; `ctrlKeyDue` (present only when
 * true) says that the second is still to be made, so that a restart between the two finishes
 * the rotation instead of starting another.  A file of another mode or owner, or anything else
 * (an unknown member, a missing one, a malformed secret, a generation that is not a positive
 * integer) is refused with a message that names the file and the defect, never its content.
 *
 * The file is read and written here rather than through the described codec (model.h) because
 * every buffer that held a key is wiped before it is freed (nvme_dhchap_wipe), which the
 * codec's allocations are not.  Keys are never logged.
 */
#ifndef PILLAR_MODEL_DHCHAP_FILE_H
#define PILLAR_MODEL_DHCHAP_FILE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "nvme/dhchap.h"

#define MODEL_DHCHAP_FILE         "dhchap.key"
#define MODEL_DHCHAP_FILE_NQN_MAX 224 /* 223 bytes and the NUL (NVMe Base Specification) */
#define MODEL_DHCHAP_FILE_REQ_MAX 256 /* an annotation value kept for comparison */

/* One generation of a worker's keys. */
struct model_dhchap_generation {
	uint64_t generation; /* the Unix time the keys were made, or the previous + 1 */
	char key[NVME_DHCHAP_SECRET_MAX];
	char ctrl_key[NVME_DHCHAP_SECRET_MAX];
};

struct model_dhchap_file {
	char node[254];
	char hostnqn[MODEL_DHCHAP_FILE_NQN_MAX];
	bool has_current, has_next;
	struct model_dhchap_generation current, next;
	char rotate_request[MODEL_DHCHAP_FILE_REQ_MAX]; /* "" when none was acted on */
	bool ctrl_key_due; /* a rotation's new controller secret is still to be made */
};

/* Reads <state_dir>/dhchap.key: 0, -ENOENT (no keys yet), -EBADMSG (corrupt, or of another mode
 * or owner: the message names the file and the defect and says to delete it to make new keys),
 * or another negative errno. */
int model_dhchap_file_read(const char *state_dir, struct model_dhchap_file *k, struct err *e);

/* Writes k durably (mode 0600), creating state_dir (0700) when missing.  0 or a negative errno
 * (-ENOSPC … with the file named). */
int model_dhchap_file_write(const char *state_dir, const struct model_dhchap_file *k,
                            struct err *e);

/* Clears every byte of k. */
void model_dhchap_file_wipe(struct model_dhchap_file *k);

#endif
