/* rules/volid — volume IDs, volume names, PillarVolumeState names (csi.md §2). */
#include "rules/volid.h"

#include <errno.h>
#include <mbedtls/sha256.h>
#include <stdio.h>
#include <string.h>

static bool lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool alnum(char c)
{
	return lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

enum rules_objname rules_objname_check(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0)
		return RULES_OBJNAME_EMPTY;
	if (n > RULES_OBJNAME_MAX)
		return RULES_OBJNAME_TOO_LONG;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (lower_alnum(c) || ((c == '-' || c == '.') && i > 0 && i < n - 1))
			continue;
		return RULES_OBJNAME_BAD_CHAR;
	}
	return strstr(name, "..") ? RULES_OBJNAME_DOT_DOT : RULES_OBJNAME_OK;
}

bool rules_volname_valid(const char *n)
{
	size_t len = n ? strlen(n) : 0;
	if (len < 1 || len > RULES_VOLNAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!alnum(n[i]) && (i == 0 || (n[i] != '_' && n[i] != '-')))
			return false;
	return true;
}

/* A pool segment: [A-Za-z0-9._:-]+, not "." or "..". */
static bool pool_valid(const char *s, size_t len)
{
	if (len == 0 || (len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!alnum(s[i]) && s[i] != '.' && s[i] != '_' && s[i] != ':' && s[i] != '-')
			return false;
	return true;
}

static bool backend_valid(const char *b)
{
	return !strcmp(b, "zfs-zvol") || !strcmp(b, "lvm-lv") || !strcmp(b, "file");
}

/* Copies the segment [p, up to '/' or end) into dst; returns the next position (after the
 * '/'), or NULL when the segment is empty or does not fit. */
static const char *segment(const char *p, char *dst, size_t cap, bool last)
{
	const char *s = last ? p + strlen(p) : strchr(p, '/');
	if (!s || s == p || (size_t)(s - p) >= cap)
		return NULL;
	memcpy(dst, p, (size_t)(s - p));
	dst[s - p] = '\0';
	return last ? s : s + 1;
}

int rules_agent_volid_parse(const char *id, char *pool, size_t pool_cap, char *name,
                            size_t name_cap)
{
	const char *p = id ? segment(id, pool, pool_cap, false) : NULL;
	if (!p || strchr(p, '/') || !segment(p, name, name_cap, true) ||
	    !pool_valid(pool, strlen(pool)) || !rules_volname_valid(name))
		return -EINVAL;
	return 0;
}

int rules_volid_parse(const char *id, struct rules_volid *v)
{
	const char *p = id;
	memset(v, 0, sizeof(*v));
	if (!p || !(p = segment(p, v->agent, sizeof(v->agent), false)) ||
	    !(p = segment(p, v->protocol, sizeof(v->protocol), false)) ||
	    !(p = segment(p, v->backend, sizeof(v->backend), false)) ||
	    rules_agent_volid_parse(p, v->pool, sizeof(v->pool), v->name, sizeof(v->name)) < 0)
		return -EINVAL;
	if (rules_objname_check(v->agent) != RULES_OBJNAME_OK || !backend_valid(v->backend) ||
	    strspn(v->protocol, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(v->protocol))
		return -EINVAL;
	snprintf(v->agent_volume_id, sizeof(v->agent_volume_id), "%s/%s", v->pool, v->name);
	return strcmp(v->protocol, RULES_PROTOCOL_NVMEOF_TCP) ? -EPROTONOSUPPORT : 0;
}

int rules_volid_make(const char *agent, const char *backend, const char *pool, const char *name,
                     char *id, size_t cap, struct rules_volid *v)
{
	memset(v, 0, sizeof(*v));
	int n = snprintf(id, cap, "%s/%s/%s/%s/%s", agent, RULES_PROTOCOL_NVMEOF_TCP, backend, pool,
	                 name);
	if (n < 0 || (size_t)n >= cap || rules_objname_check(agent) != RULES_OBJNAME_OK ||
	    !backend_valid(backend) || !pool_valid(pool, strlen(pool)) ||
	    strlen(pool) >= sizeof(v->pool) || !rules_volname_valid(name))
		return -EINVAL;
	snprintf(v->agent, sizeof(v->agent), "%s", agent);
	snprintf(v->protocol, sizeof(v->protocol), "%s", RULES_PROTOCOL_NVMEOF_TCP);
	snprintf(v->backend, sizeof(v->backend), "%s", backend);
	snprintf(v->pool, sizeof(v->pool), "%s", pool);
	snprintf(v->name, sizeof(v->name), "%s", name);
	snprintf(v->agent_volume_id, sizeof(v->agent_volume_id), "%s/%s", pool, name);
	return 0;
}

int rules_snapid_parse(const char *id, struct rules_volid *v)
{
	int r = rules_volid_parse(id, v);
	if (r == -EPROTONOSUPPORT && !strcmp(v->protocol, RULES_SNAPID_TAG))
		return 0;
	memset(v, 0, sizeof(*v));
	return -EINVAL;
}

int rules_snapid_make(const char *agent, const char *backend, const char *pool, const char *name,
                      char *id, size_t cap, struct rules_volid *v)
{
	int r = rules_volid_make(agent, backend, pool, name, id, cap, v);
	if (r < 0)
		return r;
	int n = snprintf(id, cap, "%s/%s/%s/%s/%s", agent, RULES_SNAPID_TAG, backend, pool, name);
	if (n < 0 || (size_t)n >= cap)
		return -EINVAL;
	snprintf(v->protocol, sizeof(v->protocol), "%s", RULES_SNAPID_TAG);
	return 0;
}

void rules_pvst_name(const char *csi_name, char *out, size_t cap)
{
	size_t len = strlen(csi_name);
	bool ok = len > 0 && len <= RULES_OBJNAME_MAX;
	for (size_t i = 0; ok && i < len; i++) {
		char ch = csi_name[i];
		if (!lower_alnum(ch) && (ch != '-' || i == 0 || i == len - 1))
			ok = false;
	}
	if (ok) {
		snprintf(out, cap, "%s", csi_name);
		return;
	}
	unsigned char d[32];
	char hex[33];
	mbedtls_sha256_ret((const unsigned char *)csi_name, len, d, 0);
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	snprintf(out, cap, "pillar-%s", hex);
}
