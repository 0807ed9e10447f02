/* model/dhchap_keys — the DH-HMAC-CHAP key Secret and key file codecs (dhchap_keys.h). */
#include "model/dhchap_keys.h"

#include <errno.h>
#include <inttypes.h>
#include <mbedtls/base64.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void model_dhchap_keys_wipe(struct model_dhchap_keys *k)
{
	if (k)
		nvme_dhchap_wipe(k, sizeof(*k));
}

int model_dhchap_secret_name(const char *node, uint64_t generation, char *out, size_t cap,
                             struct err *e)
{
	if (!node || !*node || strlen(node) > MODEL_DHCHAP_NODE_MAX)
		return err_set(e, -EINVAL,
		               "a node name of 1 to %d characters is needed for DH-HMAC-CHAP keys",
		               MODEL_DHCHAP_NODE_MAX);
	if (generation == 0)
		return err_set(e, -EINVAL, "a DH-HMAC-CHAP key generation is greater than 0");
	int n = snprintf(out, cap, MODEL_DHCHAP_SECRET_PREFIX "%s-%" PRIu64, node, generation);
	if (n < 0 || (size_t)n >= cap)
		return err_set(e, -ENAMETOOLONG, "DH-HMAC-CHAP Secret name too long");
	return 0;
}

/* A decimal uint64 > 0 without sign, blanks or leading zeros. */
static int parse_generation(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	if (!s || !*s || *s == '0' || strlen(s) > 20)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9' || v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*out = v;
	return 0;
}

/* Decodes the base64 data member `name` into out (cap bytes with the NUL): -EINVAL for a
 * missing member, bad base64, a NUL inside or more than cap - 1 bytes. */
static int data_text(const struct model_secret *s, const char *name, char *out, size_t cap,
                     struct err *e)
{
	const char *b64 = model_map_get(&s->data, name);
	size_t n = 0;
	if (!b64 || !*b64)
		return err_set(e, -EINVAL, "data.%s is missing", name);
	if (strlen(b64) > 4 * ((cap + 2) / 3) ||
	    mbedtls_base64_decode((unsigned char *)out, cap - 1, &n, (const unsigned char *)b64,
	                          strlen(b64)) != 0) {
		nvme_dhchap_wipe(out, cap);
		return err_set(e, -EINVAL, "data.%s is not base64 of at most %zu bytes", name,
		               cap - 1);
	}
	out[n] = 0;
	if (memchr(out, 0, n)) {
		nvme_dhchap_wipe(out, cap);
		return err_set(e, -EINVAL, "data.%s contains a NUL byte", name);
	}
	return 0;
}

static int check_key(const char *member, const char *key, struct err *e)
{
	if (nvme_dhchap_secret_check(key, e) < 0) {
		err_prefix(e, "%s", member);
		return -EINVAL;
	}
	return 0;
}

static int secret_decode(const struct model_secret *s, struct model_dhchap_keys *k, struct err *e)
{
	char want[300];
	const char *node = model_map_get(&s->meta.annotations, MODEL_DHCHAP_ANN_NODE);
	const char *gen = model_map_get(&s->meta.annotations, MODEL_DHCHAP_ANN_GEN);
	const char *label = model_map_get(&s->meta.labels, MODEL_DHCHAP_LABEL);
	if (!s->type || strcmp(s->type, MODEL_DHCHAP_SECRET_TYPE))
		return err_set(e, -EINVAL, "type is not " MODEL_DHCHAP_SECRET_TYPE);
	if (!label || strcmp(label, MODEL_DHCHAP_LABEL_VALUE))
		return err_set(e, -EINVAL, "label " MODEL_DHCHAP_SELECTOR " is missing");
	if (parse_generation(gen, &k->generation) < 0)
		return err_set(e, -EINVAL,
		               "annotation " MODEL_DHCHAP_ANN_GEN " is not a decimal number > 0");
	if (model_dhchap_secret_name(node, k->generation, want, sizeof(want), e) < 0)
		return -EINVAL;
	if (!s->meta.name || strcmp(s->meta.name, want))
		return err_set(e, -EINVAL,
		               "the name is not \"%s\" (from annotations " MODEL_DHCHAP_ANN_NODE
		               " and " MODEL_DHCHAP_ANN_GEN ")",
		               want);
	snprintf(k->node, sizeof(k->node), "%s", node);
	int r = data_text(s, "hostNQN", k->host_nqn, sizeof(k->host_nqn), e);
	if (r == 0 && rules_hostnqn_check(k->host_nqn, e) < 0) {
		err_prefix(e, "data.hostNQN");
		r = -EINVAL;
	}
	if (r == 0)
		r = data_text(s, "key", k->key, sizeof(k->key), e);
	if (r == 0)
		r = data_text(s, "ctrlKey", k->ctrl_key, sizeof(k->ctrl_key), e);
	if (r == 0 && (r = check_key("data.key", k->key, e)) == 0)
		r = check_key("data.ctrlKey", k->ctrl_key, e);
	return r;
}

int model_dhchap_secret_decode(const struct model_secret *s, struct model_dhchap_keys *out,
                               struct err *e)
{
	memset(out, 0, sizeof(*out));
	int r = secret_decode(s, out, e);
	if (r < 0) {
		model_dhchap_keys_wipe(out);
		err_prefix(e, "Secret \"%s\"", s->meta.name ? s->meta.name : "");
	}
	return r;
}

static int data_set(struct model_secret *s, const char *name, const char *text)
{
	unsigned char b64[512];
	size_t n = 0;
	if (mbedtls_base64_encode(b64, sizeof(b64), &n, (const unsigned char *)text,
	                          strlen(text)) != 0)
		return -EINVAL;
	int r = model_map_set(&s->data, name, (const char *)b64);
	nvme_dhchap_wipe(b64, sizeof(b64));
	return r;
}

int model_dhchap_secret_encode(const struct model_dhchap_keys *k, const char *ns,
                               struct model_secret *out, struct err *e)
{
	char name[300], gen[24];
	memset(out, 0, sizeof(*out));
	if (model_dhchap_secret_name(k->node, k->generation, name, sizeof(name), e) < 0)
		return -EINVAL;
	if (rules_hostnqn_check(k->host_nqn, e) < 0 || check_key("key", k->key, e) < 0 ||
	    check_key("ctrlKey", k->ctrl_key, e) < 0)
		return -EINVAL;
	snprintf(gen, sizeof(gen), "%" PRIu64, k->generation);
	int r = model_str_set(&out->meta.name, name) | model_str_set(&out->meta.ns, ns) |
	        model_str_set(&out->type, MODEL_DHCHAP_SECRET_TYPE) |
	        model_map_set(&out->meta.labels, MODEL_DHCHAP_LABEL, MODEL_DHCHAP_LABEL_VALUE) |
	        model_map_set(&out->meta.annotations, MODEL_DHCHAP_ANN_NODE, k->node) |
	        model_map_set(&out->meta.annotations, MODEL_DHCHAP_ANN_GEN, gen) |
	        data_set(out, "hostNQN", k->host_nqn) | data_set(out, "key", k->key) |
	        data_set(out, "ctrlKey", k->ctrl_key);
	if (r < 0) {
		model_clear(&model_secret_kind, out);
		return err_set(e, -ENOMEM, "out of memory");
	}
	return 0;
}
