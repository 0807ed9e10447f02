/* Backend construction, command runner, device wait. */
#include "backend/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/exec.h"
#include "base/time.h"
#include "metrics/metrics.h"

const char *backend_kind_name(enum backend_kind k)
{
	switch (k) {
	case BACKEND_ZFS: return "zfs";
	case BACKEND_LVM: return "lvm";
	case BACKEND_FILE: return "file";
	}
	return "unknown";
}

void backend_config_clear(struct backend_config *c)
{
	free(c->pool);
	free(c->parent_dataset);
	free(c->thin_pool);
	free(c->directory);
	memset(c, 0, sizeof(*c));
}

static int dup_opt(char **dst, const char *src)
{
	*dst = NULL;
	if (!src)
		return 0;
	*dst = strdup(src);
	return *dst ? 0 : -ENOMEM;
}

int backend_new(const struct backend_config *cfg, backend **out, struct err *e)
{
	backend *b;
	*out = NULL;
	if (!cfg->pool || !*cfg->pool)
		return err_set(e, -EINVAL, "backend: pool name is required");
	b = calloc(1, sizeof(*b));
	if (!b)
		return err_set(e, -ENOMEM, "backend: out of memory");
	switch (cfg->kind) {
	case BACKEND_ZFS: b->ops = &backend_zfs_ops; break;
	case BACKEND_LVM: b->ops = &backend_lvm_ops; break;
	case BACKEND_FILE: b->ops = &backend_file_ops; break;
	default: free(b); return err_set(e, -EINVAL, "backend: unknown kind %d", (int)cfg->kind);
	}
	b->cfg.kind = cfg->kind;
	b->cfg.thin_default = cfg->thin_default;
	b->cfg.preallocate = cfg->preallocate;
	if (dup_opt(&b->cfg.pool, cfg->pool) < 0 ||
	    dup_opt(&b->cfg.parent_dataset, cfg->parent_dataset) < 0 ||
	    dup_opt(&b->cfg.thin_pool, cfg->thin_pool) < 0 ||
	    dup_opt(&b->cfg.directory, cfg->directory) < 0) {
		backend_free(b);
		return err_set(e, -ENOMEM, "backend: out of memory");
	}
	snprintf(b->dev_root, sizeof(b->dev_root), "/dev");
	b->timeout_ms = 60000;
	b->copy_wait_ms = 10000;
	b->dir_sync = (struct file_dir_group)FILE_DIR_GROUP_INIT;
	if (cfg->kind == BACKEND_FILE && backend_copies_new(&b->copies) < 0) {
		backend_free(b);
		return err_set(e, -ENOMEM, "backend: out of memory");
	}
	*out = b;
	return 0;
}

void backend_free(backend *b)
{
	if (!b)
		return;
	backend_copies_free(b->copies); /* cancels the copies still running */
	backend_config_clear(&b->cfg);
	pthread_mutex_destroy(&b->dir_sync.mu);
	pthread_cond_destroy(&b->dir_sync.cv);
	free(b);
}

void backend_set_dev_root(backend *b, const char *dev_root)
{
	snprintf(b->dev_root, sizeof(b->dev_root), "%s", dev_root);
}

bool backend_regular_devices(const backend *b)
{
	return b->cfg.kind == BACKEND_FILE || strcmp(b->dev_root, "/dev") != 0;
}

static const char *const command_labels[] = {"backend", "command", NULL};
static const double command_buckets[] = {.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, -1};
/* Label sets: the tools the backends run (zfs and zpool by subcommand, the lvm tools) — a few
 * dozen, fixed by this code. */
static struct metrics_family command_seconds = METRICS_FAMILY(
    "pillar_csi_agent_backend_command_duration_seconds",
    "Time the backend's commands (zfs, zpool, lvcreate, ...) took, by backend and command.",
    METRICS_HISTOGRAM, command_labels, command_buckets, 64);

void backend_metrics_register(void)
{
	metrics_register(&command_seconds);
}

/* "zfs create", "zpool list", "lvcreate": the tool's base name and, for zfs and zpool, the
 * subcommand. */
static void command_name(const char *const argv[], char *out, size_t cap)
{
	const char *tool = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	if ((strcmp(tool, "zfs") == 0 || strcmp(tool, "zpool") == 0) && argv[1])
		snprintf(out, cap, "%s %s", tool, argv[1]);
	else
		snprintf(out, cap, "%s", tool);
}

int backend_run(backend *b, const char *const argv[], struct exec_result *res, struct err *e)
{
	struct exec_opts o = {.timeout_ms = b->timeout_ms};
	struct err xe = {0};
	char command[64];
	memset(res, 0, sizeof(*res));
	uint64_t t0 = time_mono_ns();
	int r = exec_run(argv, &o, res, &xe);
	command_name(argv, command, sizeof(command));
	const char *labels[] = {backend_kind_name(b->cfg.kind), command};
	metrics_observe(&command_seconds, labels, (double)(time_mono_ns() - t0) / 1e9);
	if (r == -ETIMEDOUT || res->timed_out)
		return err_set(e, -ETIMEDOUT, "%s: timed out after %d ms", argv[0], b->timeout_ms);
	if (r < 0)
		return err_set(e, r == -ENOENT ? -EIO : r, "%s: %s", argv[0], xe.msg);
	if (res->exit_code == 0)
		return 0;
	const char *all = res->err_len ? res->err : (res->out ? res->out : "");
	int code = -EIO;
	if (strstr(all, "out of space") || strstr(all, "Insufficient free space"))
		code = -ENOSPC;
	else if (strstr(all, "busy") || strstr(all, "in use"))
		code = -EBUSY;
	else if (strstr(all, "does not exist") || strstr(all, "Failed to find logical volume") ||
	         strstr(all, "not found"))
		code = -ENOENT;
	const char *sum = exec_result_summary(res);
	if (res->exit_code < 0)
		return err_set(e, code, "%s: killed by signal %d%s%s", argv[0], res->term_signal,
		               *sum ? ": " : "", sum);
	return err_set(e, code, "%s: %s", argv[0], *sum ? sum : "failed without a message");
}

int backend_run_discard(backend *b, const char *const argv[], struct err *e)
{
	struct exec_result res;
	int r = backend_run(b, argv, &res, e);
	exec_result_free(&res);
	return r;
}

int backend_parse_i64(const char *s, int64_t *out)
{
	char *end;
	while (*s == ' ' || *s == '\t')
		s++;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')
		end++;
	if (end == s || *end || errno)
		return -EIO;
	*out = v;
	return 0;
}

int backend_vol_list_add(struct backend_vol_list *l, const char *name, int64_t size, struct err *e)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;
		struct backend_vol *nv = realloc(l->v, cap * sizeof(*nv));
		if (!nv)
			return err_set(e, -ENOMEM, "out of memory");
		l->v = nv;
		l->cap = cap;
	}
	snprintf(l->v[l->n].name, sizeof(l->v[l->n].name), "%s", name);
	l->v[l->n++].size = size;
	return 0;
}

int backend_vol_list_add_text(struct backend_vol_list *l, const char *name, const char *size,
                              struct err *e)
{
	int64_t bytes;
	return backend_parse_i64(size, &bytes) == 0 ? backend_vol_list_add(l, name, bytes, e) : 0;
}

int backend_vol_list_finish(struct backend_vol_list *l, int r, struct backend_vol **out, size_t *n)
{
	if (r < 0) {
		free(l->v);
		*l = (struct backend_vol_list){0};
		return r;
	}
	*out = l->v;
	*n = l->n;
	return 0;
}

static int device_ok(const char *path, bool allow_regular)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return 0;
	if (!S_ISBLK(st.st_mode) && !(allow_regular && S_ISREG(st.st_mode)))
		return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

int backend_device_wait(const char *path, bool allow_regular, int timeout_ms, int poll_ms)
{
	int64_t t0 = time_mono_ms();
	for (;;) {
		if (device_ok(path, allow_regular))
			return 0;
		long el = (long)(time_mono_ms() - t0);
		if (el >= timeout_ms)
			return -ENXIO;
		time_sleep_ms(poll_ms < timeout_ms - (int)el ? poll_ms : timeout_ms - (int)el);
	}
}
