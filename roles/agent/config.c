/* The agent configuration file (agent-api.md §11.2 and the file backend of §14): read through
 * the model's codec (model/agent_config.h), which owns its shape, its rules and their
 * messages; here the backends it names become the agent's backend configurations. */
#include "agent/config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include "base/file.h"
#include "model/agent_config.h"

void agent_config_clear(struct agent_config *c)
{
	for (size_t i = 0; i < c->n; i++)
		backend_config_clear(&c->backends[i]);
	free(c->backends);
	c->backends = NULL;
	c->n = 0;
}

/* *from moved to *to; an empty name becomes NULL (not given). */
static void take(char **to, char **from)
{
	if (*from && !**from) {
		free(*from);
		*from = NULL;
	}
	*to = *from;
	*from = NULL;
}

static void take_backend(struct model_agent_backend *m, struct backend_config *b)
{
	if (m->has_zfs) {
		b->kind = BACKEND_ZFS;
		take(&b->pool, &m->zfs.pool);
		take(&b->parent_dataset, &m->zfs.parent_dataset);
	} else if (m->has_lvm) {
		const char *mode = m->lvm.provisioning_mode;
		b->kind = BACKEND_LVM;
		b->thin_default = mode && strcmp(mode, "thin") == 0;
		take(&b->pool, &m->lvm.volume_group);
		take(&b->thin_pool, &m->lvm.thin_pool);
	} else {
		b->kind = BACKEND_FILE;
		b->preallocate = m->file.preallocate;
		take(&b->pool, &m->file.pool);
		take(&b->directory, &m->file.directory);
	}
}

int agent_config_parse(const char *buf, size_t len, struct agent_config *out, struct err *e)
{
	struct model_agent_config m;
	memset(out, 0, sizeof(*out));
	int r = model_agent_config_decode(buf, len, &m, e);
	if (r < 0)
		return r;
	out->backends = calloc(m.n_backends, sizeof(*out->backends));
	if (!out->backends) {
		r = err_set(e, -ENOMEM, "config: out of memory");
	} else {
		out->n = m.n_backends;
		for (size_t i = 0; i < m.n_backends; i++)
			take_backend(&m.backends[i], &out->backends[i]);
	}
	model_type_clear(&model_agent_config_type, &m);
	return r;
}
int agent_config_load(const char *path, struct agent_config *out, struct err *e)
{
	char *buf = NULL;
	size_t len = 0;
	struct err re = {0};
	memset(out, 0, sizeof(*out));
	int r = file_read_all(path, 1u << 20, &buf, &len, &re);
	if (r < 0)
		return err_set(e, r, "config: cannot read %s: %s", path, strerror(-r));
	r = agent_config_parse(buf, len, out, e);
	free(buf);
	return r;
}

/* Whether the open file fd lives in memory (tmpfs, ramfs): no power cut spares such a file
 * system's contents, so a write-through attribute there would have nothing to protect. */
static bool in_memory(int fd)
{
	struct statfs fs;
	if (fstatfs(fd, &fs) < 0)
		return false;
	return fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC;
}

int agent_config_check_dirs(const struct agent_config *c, struct err *e)
{
	for (size_t i = 0; i < c->n; i++) {
		const struct backend_config *b = &c->backends[i];
		char probe[4096];
		struct stat st;
		if (b->kind != BACKEND_FILE)
			continue;
		if (stat(b->directory, &st) < 0 || !S_ISDIR(st.st_mode))
			return err_set(e, -ENOENT, "backends[%zu].file.directory %s does not exist",
			               i, b->directory);
		snprintf(probe, sizeof(probe), "%s/.pillar-csi-probe", b->directory);
		int fd = open(probe, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
		if (fd < 0)
			return err_set(
			    e, -EINVAL,
			    "backends[%zu].file.directory %s does not support direct I/O (tmpfs?)",
			    i, b->directory);
		struct err we = {0};
		int r = backend_file_write_through(fd, probe, &we);
		bool memory = r == 1 && in_memory(fd);
		close(fd);
		unlink(probe);
		if (r != 0 && !memory)
			return err_set(
			    e, -EINVAL,
			    "backends[%zu].file.directory %s does not support synchronous "
			    "writes (chattr +S: %s)",
			    i, b->directory, strerror(-we.code));
	}
	return 0;
}
