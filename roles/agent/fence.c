/* Fencing marks: decision rules and durable records (agent-api.md §6). */
#include "agent/fence.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/marklog.h"
#include "base/file.h"
#include "model/records.h"

int agent_fence_escape(const char *id, char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t k = 0;
	for (const unsigned char *p = (const unsigned char *)id; *p; p++) {
		unsigned char c = *p;
		bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		            (c >= '0' && c <= '9') || c == '.' || c == '-';
		if (k + (keep ? 1 : 3) >= cap)
			return -ENAMETOOLONG;
		if (keep) {
			out[k++] = (char)c;
		} else {
			out[k++] = '_';
			out[k++] = hex[c >> 4];
			out[k++] = hex[c & 15];
		}
	}
	if (k >= cap)
		return -ENAMETOOLONG;
	out[k] = '\0';
	return 0;
}

static int mark_path(const char *state_dir, const char *volume_id, char *out, size_t cap,
                     struct err *e)
{
	char esc[NAME_MAX];
	if (agent_fence_escape(volume_id, esc, sizeof(esc) - 5) < 0)
		return err_set(e, -ENAMETOOLONG, "volume id \"%s\" is too long for a mark",
		               volume_id);
	if (snprintf(out, cap, "%s/generations/%s.mark", state_dir, esc) >= (int)cap)
		return err_set(e, -ENAMETOOLONG, "state path too long");
	return 0;
}

void agent_fence_mark_clear(struct fence_mark *m)
{
	for (size_t i = 0; i < m->n_ended; i++)
		free(m->ended_uids[i]);
	free(m->ended_uids);
	memset(m, 0, sizeof(*m));
}

static int corrupt(struct err *e, const char *path, const char *reason)
{
	return err_set(e, -EBADMSG, "corrupt fencing mark %s: %s", path, reason);
}

static int parse_mark(const char *path, struct fence_mark *m, struct err *e)
{
	struct model_fence_mark mark;
	struct err pe = {0};
	int r = model_fence_mark_read(path, &mark, &pe);
	memset(m, 0, sizeof(*m));
	if (r == -ENOENT)
		return -ENOENT;
	if (r == -EBADMSG)
		return corrupt(e, path, pe.msg);
	if (r < 0) /* unreadable now (out of memory, EIO): not corrupt */
		return err_set(e, r, "%s", pe.msg);
	snprintf(m->uid, sizeof(m->uid), "%s", mark.volume_uid);
	m->generation = (uint64_t)mark.generation;
	m->ended = mark.ended;
	m->image_bytes = mark.has_image_bytes ? mark.image_bytes : 0;
	m->n_ended = mark.ended_uids.n; /* the list moves over */
	m->ended_uids = mark.ended_uids.v;
	mark.ended_uids.n = 0;
	mark.ended_uids.v = NULL;
	model_type_clear(&model_fence_mark_type, &mark);
	return 0;
}

int agent_fence_read(const char *state_dir, const char *volume_id, struct fence_mark *m,
                     struct err *e)
{
	char path[PATH_MAX];
	memset(m, 0, sizeof(*m));
	int r = agent_marklog_open(state_dir, e); /* replayed before any mark is read */
	if (r == 0)
		r = mark_path(state_dir, volume_id, path, sizeof(path), e);
	return r < 0 ? r : parse_mark(path, m, e);
}

/* Durability of §6.2 through the marks' journal (marklog.h): one entry appended (an
 * fdatasync shared by the marks written at the same time) before the mutation the mark
 * authorises, then the file; generations/ itself made durable in the state directory once. */
static int write_mark(const char *state_dir, const char *path, const struct fence_mark *m,
                      struct err *e)
{
	/* every member always: a mark that lost an ended lifecycle would let it back in; the
	 * struct borrows m's strings */
	struct model_fence_mark mark = {
	    .volume_uid = (char *)m->uid,
	    .has_generation = true,
	    .generation = (int64_t)m->generation,
	    .has_ended = true,
	    .ended = m->ended,
	    .has_ended_uids = true,
	    .ended_uids = {m->n_ended, m->ended_uids},
	    .has_image_bytes = m->image_bytes > 0,
	    .image_bytes = m->image_bytes,
	};
	char *text = model_type_encode_text(&model_fence_mark_type, &mark);
	if (!text)
		return err_set(e, -ENOMEM, "write fencing mark %s: out of memory", path);
	const char *name = strrchr(path, '/');
	int r = agent_marklog_write(state_dir, name ? name + 1 : path, text, e);
	free(text);
	return r;
}

static int stale(struct err *e, const char *uid, uint64_t gen, const char *id, const char *reason,
                 const struct fence_mark *m)
{
	return err_set(
	    e, -ESTALE,
	    "stale fencing token (uid \"%s\", generation %" PRIu64 ") for volume \"%s\": "
	    "%s (mark uid \"%s\", generation %" PRIu64 ", ended %s)",
	    uid ? uid : "", gen, id, reason, m->uid, m->generation, m->ended ? "true" : "false");
}

/* Rule 5 on m: the ended lifecycle joins endedUIDs, uid's starts at generation (its image
 * size image_bytes: the ended lifecycle's image is gone).  0 or -ENOMEM. */
static int new_lifecycle(struct fence_mark *m, const char *uid, uint64_t generation,
                         int64_t image_bytes, struct err *e)
{
	char **nv = realloc(m->ended_uids, (m->n_ended + 1) * sizeof(char *));
	if (!nv)
		return err_set(e, -ENOMEM, "out of memory");
	m->ended_uids = nv;
	if (!(m->ended_uids[m->n_ended] = strdup(m->uid)))
		return err_set(e, -ENOMEM, "out of memory");
	m->n_ended++;
	snprintf(m->uid, sizeof(m->uid), "%s", uid);
	m->generation = generation;
	m->ended = false;
	m->image_bytes = image_bytes;
	return 0;
}

/* The rules of §6.3; image_bytes > 0 is recorded in the mark a grant writes (*recorded as
 * agent_fence_check_create's). */
static int decide(const char *state_dir, const char *volume_id, const char *uid,
                  uint64_t generation, enum fence_class cls, int64_t image_bytes, bool *recorded,
                  bool *written, struct err *e)
{
	char path[PATH_MAX];
	struct fence_mark m = {0};
	int r;
	*recorded = *written = false;

	if ((r = agent_marklog_open(state_dir, e)) < 0 ||
	    (r = mark_path(state_dir, volume_id, path, sizeof(path), e)) < 0)
		return r;
	r = parse_mark(path, &m, e);
	if (r < 0 && r != -ENOENT)
		return r;
	bool have = r == 0;
	/* Rule 1. */
	if (!uid || !*uid) {
		r = stale(e, uid, generation, volume_id, "missing fencing token", &m);
		goto out;
	}
	if (generation > FENCE_GENERATION_MAX || strlen(uid) >= sizeof(m.uid)) {
		r = err_set(e, -EINVAL, "invalid fencing token for volume \"%s\"", volume_id);
		goto out;
	}
	/* Rule 2: adopt. */
	if (!have) {
		snprintf(m.uid, sizeof(m.uid), "%s", uid);
		m.generation = generation;
		m.image_bytes = image_bytes;
		r = write_mark(state_dir, path, &m, e);
		*written = true;
		goto out;
	}
	/* Rule 3. */
	for (size_t i = 0; i < m.n_ended; i++)
		if (strcmp(m.ended_uids[i], uid) == 0) {
			r = stale(e, uid, generation, volume_id, "lifecycle already ended", &m);
			goto out;
		}
	if (strcmp(uid, m.uid) != 0) {
		/* Rule 4. */
		if (!m.ended) {
			r = stale(e, uid, generation, volume_id,
			          "volume is owned by another lifecycle", &m);
			goto out;
		}
		/* Rule 5: a new lifecycle. */
		r = new_lifecycle(&m, uid, generation, image_bytes, e);
		if (r == 0)
			r = write_mark(state_dir, path, &m, e);
		*written = true;
		goto out;
	}
	/* Rule 6. */
	if (m.ended) {
		r = (cls != FENCE_GRANT && generation == m.generation)
		        ? 0
		        : stale(e, uid, generation, volume_id, "lifecycle already ended", &m);
		goto out;
	}
	/* Rules 7, 7', 7''. */
	if (generation < m.generation)
		r = stale(e, uid, generation, volume_id, "generation is older than the mark", &m);
	else if (generation == m.generation)
		r = 0;
	else {
		m.generation = generation;
		if (image_bytes > 0)
			m.image_bytes = image_bytes;
		r = write_mark(state_dir, path, &m, e);
		*written = true;
	}
out:
	/* the mark as it now stands on disk holds this lifecycle's image size */
	*recorded = r == 0 && image_bytes > 0 && m.image_bytes == image_bytes;
	*written = *written && *recorded;
	agent_fence_mark_clear(&m);
	return r;
}

int agent_fence_check(const char *state_dir, const char *volume_id, const char *uid,
                      uint64_t generation, enum fence_class cls, struct err *e)
{
	bool recorded, written;
	return decide(state_dir, volume_id, uid, generation, cls, 0, &recorded, &written, e);
}

int agent_fence_check_create(const char *state_dir, const char *volume_id, const char *uid,
                             uint64_t generation, int64_t image_bytes, bool *recorded,
                             bool *written, struct err *e)
{
	return decide(state_dir, volume_id, uid, generation, FENCE_GRANT,
	              image_bytes > 0 ? image_bytes : 0, recorded, written, e);
}

int agent_fence_end(const char *state_dir, const char *volume_id, struct err *e)
{
	char path[PATH_MAX];
	struct fence_mark m;
	int r = agent_marklog_open(state_dir, e);
	if (r == 0)
		r = mark_path(state_dir, volume_id, path, sizeof(path), e);
	if (r < 0)
		return r;
	r = parse_mark(path, &m, e);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if (!m.ended) {
		m.ended = true;
		m.image_bytes = 0; /* the image is gone with its lifecycle */
		r = write_mark(state_dir, path, &m, e);
	}
	agent_fence_mark_clear(&m);
	return r;
}
