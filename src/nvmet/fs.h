/* Internal to src/nvmet: tree operations under <root>/nvmet with the fake-root emulation.
 * Every function takes a path relative to <root>/nvmet and returns 0 or a negative errno with a
 * message naming that path and the errno name. */
#ifndef PILLAR_NVMET_FS_H
#define PILLAR_NVMET_FS_H

#include <stdbool.h>
#include <stddef.h>

#include "nvmet/nvmet.h"

/* Absolute path of rel; -ENAMETOOLONG. */
int nvmet_fs_path(const nvmet *nv, const char *rel, char *out, size_t cap);
/* Formats rel from fmt into out (NVMET_PATH_MAX); -ENAMETOOLONG. */
int nvmet_fs_rel(char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool nvmet_fs_exists(const nvmet *nv, const char *rel);
/* EEXIST is success; *created (optional) tells whether this call made it. */
int nvmet_fs_mkdir(nvmet *nv, const char *rel, bool *created, struct err *e);
/* Resolve a relative symlink TARGET against the directory of the link REL (both relative to
 * the nvmet root): ("ports/1/subsystems/x", "../../../subsystems/x") -> "subsystems/x".
 * Returns 0, -EINVAL (absolute target, or one that leaves the root) or -ENAMETOOLONG. */
int nvmet_fs_link_target(const char *rel, const char *target, char *out, size_t cap);
/* EEXIST is success; *created (optional) tells whether this call made it.  On real configfs a
 * relative TARGET is passed to symlink(2) as an absolute path (configfs resolves targets from the
 * working directory); a fake root keeps it as given. */
int nvmet_fs_symlink(nvmet *nv, const char *target, const char *rel, bool *created, struct err *e);
/* ENOENT is success. */
int nvmet_fs_unlink(nvmet *nv, const char *rel, struct err *e);
/* ENOENT is success; in fake mode the emulated attribute files go first. */
int nvmet_fs_rmdir(nvmet *nv, const char *rel, struct err *e);
/* Entries of a directory except "." and "..", sorted; a missing directory is an empty list.
 * Free with nvmet_fs_names_free. */
int nvmet_fs_list(const nvmet *nv, const char *rel, char ***names, size_t *n, struct err *e);
void nvmet_fs_names_free(char **names, size_t n);
/* Whether rel_a and rel_b name the same object once symlinks are followed (stat of each). */
bool nvmet_fs_same(nvmet *nv, const char *rel_a, const char *rel_b);
/* 1 when the directory has no entry besides "." and ".." (or does not exist), 0 when it has
 * one, a negative errno when it cannot be read.  Reads one directory block, whatever the size. */
int nvmet_fs_empty(const nvmet *nv, const char *rel, struct err *e);

/* ---- host references (hostref.c) ------------------------------------------------------------
 * Which subsystems link hosts/<host> from their allowed_hosts, remembered by the handle so that
 * pruning a host (nvmet.md §7 step 5) does not scan every subsystem each time.  What is
 * remembered is only a hint: nvmet_hostref_used checks the remembered links on the tree (lstat)
 * and scans the allowed_hosts/ of every subsystem before answering "unused", so a
 * host directory is removed exactly when the full scan of the specification finds no link. */
struct nvmet_hostrefs;
struct nvmet_hostrefs *nvmet_fs_hostrefs(nvmet *nv);
struct nvmet_hostrefs *nvmet_hostrefs_new(void); /* NULL: out of memory */
void nvmet_hostrefs_free(struct nvmet_hostrefs *h);
/* Records that subsystems/<nqn>/allowed_hosts/<host> was made.  Out of memory only loses the
 * hint (the next check scans). */
void nvmet_hostref_add(nvmet *nv, const char *host, const char *nqn);
/* 1 when some subsystem links host, 0 when none does, a negative errno (listing failed). */
int nvmet_hostref_used(nvmet *nv, const char *host, struct err *e);
/* nvmet_attr_write for an attribute of an object this call just made (mkdir said created): its
 * value is the kernel's default, known to differ from the wanted one (a random serial or UUID,
 * an empty device path, enable 0), so the read that would skip a satisfied write is saved; the
 * fresh open(O_WRONLY), the write and the read-back are unchanged (nvmet.md §3).  Returns as
 * nvmet_attr_write. */
int nvmet_attr_write_new(nvmet *nv, const char *rel, const char *value, struct err *e);
/* Write without read-back, for write-only attributes (revalidate_size). */
int nvmet_fs_write_only(nvmet *nv, const char *rel, const char *value, struct err *e);
/* nvmet_attr_write for key material: skipped when satisfied, read back and compared, and the
 * value never appears in a message or the trace ("(secret)"); a fake root's file is 0600. */
int nvmet_fs_write_secret(nvmet *nv, const char *rel, const char *value, struct err *e);
/* errno name ("EINVAL") for messages. */
const char *nvmet_fs_errname(int err);

#endif
