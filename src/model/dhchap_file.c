/* model/dhchap_file — the worker's DH-HMAC-CHAP key file (dhchap_file.h). */
#include "model/dhchap_file.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/json.h"
#include "base/str.h"

#define FILE_MAX 4096

static int key_path(const char *state_dir, char *buf, size_t cap, struct err *e)
{
	if (snprintf(buf, cap, "%s/%s", state_dir, MODEL_DHCHAP_FILE) >= (int)cap)
		return err_set(e, -ENAMETOOLONG, "state directory path too long");
	return 0;
}

void model_dhchap_file_wipe(struct model_dhchap_file *k)
{
	nvme_dhchap_wipe(k, sizeof(*k));
}

/* Clears every string of v (member names aside) before it is freed. */
static void json_wipe(cJSON *v)
{
	for (; v; v = v->next) {
		if (v->valuestring)
			nvme_dhchap_wipe(v->valuestring, strlen(v->valuestring));
		json_wipe(v->child);
	}
}

/* Every member of o is one of names (NULL-terminated). */
static bool members_only(const cJSON *o, const char *const *names)
{
	for (const cJSON *m = o->child; m; m = m->next) {
		const char *const *n = names;
		while (*n && strcmp(*n, m->string))
			n++;
		if (!*n)
			return false;
	}
	return true;
}

/* A string member copied into out (cap bytes): 0, or the defect in *why. */
static int take_str(const cJSON *o, const char *name, char *out, size_t cap, const char **why)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	if (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) >= cap) {
		*why = "a member is missing, empty, too long or not a string";
		return -EBADMSG;
	}
	str_copy(out, cap, v->valuestring);
	return 0;
}

static int take_gen(const cJSON *o, const char *name, bool *has, struct model_dhchap_generation *g,
                    const char **why)
{
	static const char *const names[] = {"generation", "key", "ctrlKey", NULL};
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	int64_t gen;
	*has = v != NULL;
	if (!v)
		return 0;
	if (!cJSON_IsObject(v) || !members_only(v, names)) {
		*why = "a generation is not an object of generation, key and ctrlKey";
		return -EBADMSG;
	}
	if (json_get_int64(v, "generation", &gen) < 0 || gen <= 0) {
		*why = "a generation is not a positive integer";
		return -EBADMSG;
	}
	g->generation = (uint64_t)gen;
	if (take_str(v, "key", g->key, sizeof(g->key), why) < 0 ||
	    take_str(v, "ctrlKey", g->ctrl_key, sizeof(g->ctrl_key), why) < 0)
		return -EBADMSG;
	if (nvme_dhchap_secret_check(g->key, NULL) < 0 ||
	    nvme_dhchap_secret_check(g->ctrl_key, NULL) < 0) {
		*why = "a secret is malformed";
		return -EBADMSG;
	}
	if (!strcmp(g->key, g->ctrl_key)) {
		*why = "a host and a controller secret are the same";
		return -EBADMSG;
	}
	return 0;
}

/* Parses the file's text into k.  0 or -EBADMSG with the defect in why. */
static int parse(const char *text, size_t len, struct model_dhchap_file *k, const char **why)
{
	static const char *const names[] = {"node",          "hostNQN",    "current", "next",
	                                    "rotateRequest", "ctrlKeyDue", NULL};
	cJSON *doc = NULL;
	int r = -EBADMSG;
	if (json_parse_strict(text, len, &doc, NULL) < 0 || !cJSON_IsObject(doc)) {
		*why = "it is not one JSON object";
		goto out;
	}
	if (!members_only(doc, names)) {
		*why = "it has a member other than node, hostNQN, current, next, rotateRequest, "
		       "ctrlKeyDue";
		goto out;
	}
	const cJSON *rq = cJSON_GetObjectItemCaseSensitive(doc, "rotateRequest");
	const cJSON *due = cJSON_GetObjectItemCaseSensitive(doc, "ctrlKeyDue");
	if (take_str(doc, "node", k->node, sizeof(k->node), why) < 0 ||
	    take_str(doc, "hostNQN", k->hostnqn, sizeof(k->hostnqn), why) < 0 ||
	    take_gen(doc, "current", &k->has_current, &k->current, why) < 0 ||
	    take_gen(doc, "next", &k->has_next, &k->next, why) < 0)
		goto out;
	if (rq && (!cJSON_IsString(rq) || strlen(rq->valuestring) >= sizeof(k->rotate_request))) {
		*why = "rotateRequest is not a string of at most 255 bytes";
		goto out;
	}
	if (rq)
		str_copy(k->rotate_request, sizeof(k->rotate_request), rq->valuestring);
	if (due && !cJSON_IsBool(due)) {
		*why = "ctrlKeyDue is not true or false";
		goto out;
	}
	k->ctrl_key_due = cJSON_IsTrue(due);
	if (!k->has_current && !k->has_next)
		*why = "it has neither current nor next keys";
	else if (k->has_current && k->has_next && k->next.generation <= k->current.generation)
		*why = "its next generation is not above the current one";
	else
		r = 0;
out:
	json_wipe(doc);
	cJSON_Delete(doc);
	return r;
}

/* The file's mode and owner: 0, -ENOENT, or -EBADMSG with why (another errno: r). */
static int check_file(const char *path, const char **why, char *buf, size_t cap)
{
	struct stat sb;
	if (lstat(path, &sb) < 0)
		return -errno;
	if (!S_ISREG(sb.st_mode))
		*why = "it is not a regular file";
	else if ((sb.st_mode & 07777) != 0600) {
		snprintf(buf, cap, "it has mode %04o, not 0600", (unsigned)(sb.st_mode & 07777));
		*why = buf;
	} else if (sb.st_uid != geteuid()) {
		snprintf(buf, cap, "it is owned by uid %u, not %u", (unsigned)sb.st_uid,
		         (unsigned)geteuid());
		*why = buf;
	}
	return *why ? -EBADMSG : 0;
}

int model_dhchap_file_read(const char *state_dir, struct model_dhchap_file *k, struct err *e)
{
	char path[PATH_MAX], why_buf[64];
	char *text = NULL;
	size_t len = 0;
	const char *why = NULL;
	int r;

	memset(k, 0, sizeof(*k));
	if ((r = key_path(state_dir, path, sizeof(path), e)) < 0)
		return r;
	r = check_file(path, &why, why_buf, sizeof(why_buf));
	if (r == -ENOENT)
		return -ENOENT;
	if (r < 0 && r != -EBADMSG)
		return err_set(e, r, "read %s: %s", path, strerror(-r));
	if (r == 0) {
		r = file_read_all(path, FILE_MAX, &text, &len, e);
		if (r == -EFBIG)
			why = "it is larger than any key file";
		else if (r < 0)
			return err_set(e, r, "read %s: %s", path, strerror(-r));
		else
			r = parse(text, len, k, &why);
	}
	if (text) {
		nvme_dhchap_wipe(text, len);
		free(text);
	}
	if (why) {
		model_dhchap_file_wipe(k);
		return err_set(e, -EBADMSG,
		               "corrupt DH-HMAC-CHAP key file %s: %s; delete it to make new keys "
		               "(docs/authentication.md)",
		               path, why);
	}
	return 0;
}

static cJSON *gen_json(const struct model_dhchap_generation *g)
{
	cJSON *o = cJSON_CreateObject();
	if (o && json_add(o, "generation", json_int64((int64_t)g->generation)) &&
	    json_add(o, "key", cJSON_CreateString(g->key)) &&
	    json_add(o, "ctrlKey", cJSON_CreateString(g->ctrl_key)))
		return o;
	cJSON_Delete(o);
	return NULL;
}

int model_dhchap_file_write(const char *state_dir, const struct model_dhchap_file *k, struct err *e)
{
	char path[PATH_MAX];
	char *text = NULL;
	int r;
	if ((r = key_path(state_dir, path, sizeof(path), e)) < 0)
		return r;
	cJSON *o = cJSON_CreateObject();
	bool ok = o && json_add(o, "node", cJSON_CreateString(k->node)) &&
	          json_add(o, "hostNQN", cJSON_CreateString(k->hostnqn)) &&
	          (!k->has_current || json_add(o, "current", gen_json(&k->current))) &&
	          (!k->has_next || json_add(o, "next", gen_json(&k->next))) &&
	          (!k->rotate_request[0] ||
	           json_add(o, "rotateRequest", cJSON_CreateString(k->rotate_request))) &&
	          (!k->ctrl_key_due || json_add(o, "ctrlKeyDue", cJSON_CreateTrue())) &&
	          (text = json_print(o, false)) != NULL;
	json_wipe(o);
	cJSON_Delete(o);
	if (!ok)
		r = err_set(e, -ENOMEM, "out of memory");
	else if ((r = file_mkdir_p(state_dir, 0700, e)) == 0) {
		size_t n = strlen(text);
		text[n] = '\n'; /* json_print's NUL becomes the trailing newline */
		r = file_write_atomic(path, text, n + 1, 0600, e);
		text[n] = 0;
	}
	if (text) {
		nvme_dhchap_wipe(text, strlen(text));
		free(text);
	}
	return r;
}
