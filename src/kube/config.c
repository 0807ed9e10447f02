#include "kube/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/base64.h>
#include <yaml.h>

#include "base/file.h"
#include "base/json.h"

#define PEM_MAX      (1u << 20)
#define YAML_MAX     (4u << 20)
#define SYSTEM_ROOTS "/etc/ssl/certs/ca-certificates.crt"

void kube_config_free(struct kube_config *c)
{
	if (!c)
		return;
	free(c->ca_pem);
	free(c->cert_pem);
	free(c->key_pem);
	free(c->token);
	free(c->token_file);
	free(c);
}

/* host and port as an h2/net.h target (an IPv6 literal in brackets). */
static int set_target(struct kube_config *c, const char *host, size_t hlen, const char *port,
                      struct err *e)
{
	if (!hlen || hlen >= 256)
		return err_set(e, -EINVAL, "%s: no usable host", c->source);
	for (const char *p = port; *p; p++)
		if (*p < '0' || *p > '9' || p - port > 5)
			return err_set(e, -EINVAL, "%s: bad port \"%s\"", c->source, port);
	if (!*port)
		return err_set(e, -EINVAL, "%s: empty port", c->source);
	if (memchr(host, ':', hlen))
		snprintf(c->target, sizeof(c->target), "[%.*s]:%s", (int)hlen, host, port);
	else
		snprintf(c->target, sizeof(c->target), "%.*s:%s", (int)hlen, host, port);
	return 0;
}

int kube_config_in_cluster(struct kube_config **out, const char *sa_dir, struct err *e)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	struct kube_config *c;
	char path[4200], *ns = NULL;
	size_t len;
	int rc;

	if (!host || !*host || !port || !*port)
		return err_set(e, -ENOENT,
		               "not in a cluster: KUBERNETES_SERVICE_HOST and "
		               "KUBERNETES_SERVICE_PORT must be set (or use --kubeconfig)");
	if (!sa_dir)
		sa_dir = KUBE_SA_DIR;
	c = calloc(1, sizeof(*c));
	if (!c)
		return err_set(e, -ENOMEM, "out of memory");
	snprintf(c->source, sizeof(c->source), "in-cluster");
	snprintf(c->server, sizeof(c->server), "https://%s:%s", host, port);
	rc = set_target(c, host, strlen(host), port, e);
	snprintf(path, sizeof(path), "%s/ca.crt", sa_dir);
	if (rc == 0)
		rc = file_read_all(path, PEM_MAX, &c->ca_pem, &len, e);
	snprintf(path, sizeof(path), "%s/token", sa_dir);
	if (rc == 0 && !(c->token_file = strdup(path)))
		rc = err_set(e, -ENOMEM, "out of memory");
	snprintf(path, sizeof(path), "%s/namespace", sa_dir);
	if (rc == 0 && file_read_all(path, 4096, &ns, &len, NULL) == 0) {
		while (len && (ns[len - 1] == '\n' || ns[len - 1] == ' '))
			ns[--len] = '\0';
		snprintf(c->ns, sizeof(c->ns), "%s", ns);
	}
	free(ns);
	if (rc < 0) {
		err_prefix(e, "in-cluster configuration");
		kube_config_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* ---- YAML → cJSON (every scalar a string: kubeconfig values are strings) ----------------- */

static cJSON *yaml_node_json(yaml_document_t *d, yaml_node_t *n, int depth)
{
	cJSON *v = NULL;

	if (!n || depth > 32)
		return NULL;
	if (n->type == YAML_SCALAR_NODE)
		return cJSON_CreateString((const char *)n->data.scalar.value);
	if (n->type == YAML_SEQUENCE_NODE) {
		v = cJSON_CreateArray();
		for (yaml_node_item_t *i = n->data.sequence.items.start;
		     v && i < n->data.sequence.items.top; i++) {
			cJSON *x = yaml_node_json(d, yaml_document_get_node(d, *i), depth + 1);
			if (!x || !cJSON_AddItemToArray(v, x)) {
				cJSON_Delete(x);
				cJSON_Delete(v);
				return NULL;
			}
		}
		return v;
	}
	v = cJSON_CreateObject();
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; v && p < n->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(d, p->key);
		cJSON *x;
		if (!k || k->type != YAML_SCALAR_NODE) {
			cJSON_Delete(v);
			return NULL;
		}
		x = yaml_node_json(d, yaml_document_get_node(d, p->value), depth + 1);
		if (!x || !cJSON_AddItemToObject(v, (const char *)k->data.scalar.value, x)) {
			cJSON_Delete(x);
			cJSON_Delete(v);
			return NULL;
		}
	}
	return v;
}

static int yaml_to_json(const char *text, size_t len, cJSON **out, struct err *e)
{
	yaml_parser_t p;
	yaml_document_t d;
	int rc = 0;

	if (!yaml_parser_initialize(&p))
		return err_set(e, -ENOMEM, "out of memory");
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	if (!yaml_parser_load(&p, &d)) {
		rc = err_set(e, -EINVAL, "YAML error at line %zu: %s", p.problem_mark.line + 1,
		             p.problem ? p.problem : "malformed");
		yaml_parser_delete(&p);
		return rc;
	}
	*out = yaml_node_json(&d, yaml_document_get_root_node(&d), 0);
	if (!*out || !cJSON_IsObject(*out)) {
		cJSON_Delete(*out);
		*out = NULL;
		rc = err_set(e, -EINVAL, "not a YAML mapping (or nested too deep)");
	}
	yaml_document_delete(&d);
	yaml_parser_delete(&p);
	return rc;
}

/* ---- kubeconfig ------------------------------------------------------------------------------ */

/* The `key` member (cluster/context/user) of the entry of list whose name is name. */
static const cJSON *named(const cJSON *root, const char *list, const char *name, const char *key)
{
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(root, list), *it;
	const cJSON *arr = cJSON_IsArray(l) ? l : NULL;

	cJSON_ArrayForEach(it, arr)
	{
		const char *n = json_get_str(it, "name");
		if (n && strcmp(n, name) == 0)
			return cJSON_GetObjectItemCaseSensitive(it, key);
	}
	return NULL;
}

/* Reads `key`-data (base64) or the file `key` of obj into *out (NUL-terminated): 0, 1 when
 * neither is given, or a negative errno. */
static int data_or_file(const cJSON *obj, const char *key, const char *dir, char **out,
                        struct err *e)
{
	char dkey[64], path[4200];
	const char *b64, *file;
	size_t n = 0;

	snprintf(dkey, sizeof(dkey), "%s-data", key);
	b64 = json_get_str(obj, dkey);
	file = json_get_str(obj, key);
	if (b64 && *b64) {
		size_t len = strlen(b64);
		mbedtls_base64_decode(NULL, 0, &n, (const unsigned char *)b64, len);
		*out = malloc(n + 1);
		if (!*out)
			return err_set(e, -ENOMEM, "out of memory");
		if (mbedtls_base64_decode((unsigned char *)*out, n, &n, (const unsigned char *)b64,
		                          len)) {
			free(*out);
			*out = NULL;
			return err_set(e, -EINVAL, "%s is not base64", dkey);
		}
		(*out)[n] = '\0';
		return 0;
	}
	if (!file || !*file)
		return 1;
	if (file[0] != '/' && dir)
		snprintf(path, sizeof(path), "%s/%s", dir, file);
	else
		snprintf(path, sizeof(path), "%s", file);
	return file_read_all(path, PEM_MAX, out, &n, e);
}

static int parse_server(struct kube_config *c, const char *url, struct err *e)
{
	const char *h, *end, *port = NULL;
	char portbuf[8] = "443";
	size_t hlen;

	snprintf(c->server, sizeof(c->server), "%s", url);
	if (strncmp(url, "https://", 8) != 0)
		return err_set(e, -EINVAL, "server \"%s\": only https:// servers are supported",
		               url);
	h = url + 8;
	end = h + strcspn(h, "/?#");
	if (*end && strcmp(end, "/") != 0)
		return err_set(e, -EINVAL, "server \"%s\": a path prefix is not supported", url);
	if (*h == '[') {
		const char *rb = memchr(h, ']', (size_t)(end - h));
		if (!rb || (rb + 1 < end && rb[1] != ':'))
			return err_set(e, -EINVAL, "server \"%s\": bad IPv6 literal", url);
		hlen = (size_t)(rb - h - 1);
		h++;
		if (rb + 1 < end)
			port = rb + 2;
	} else {
		const char *colon = memchr(h, ':', (size_t)(end - h));
		hlen = (size_t)((colon ? colon : end) - h);
		if (colon)
			port = colon + 1;
	}
	if (port) {
		if (port >= end || end - port >= (long)sizeof(portbuf))
			return err_set(e, -EINVAL, "server \"%s\": bad port", url);
		memcpy(portbuf, port, (size_t)(end - port));
		portbuf[end - port] = '\0';
	}
	return set_target(c, h, hlen, portbuf, e);
}

static int from_cluster(struct kube_config *c, const cJSON *cl, const char *dir, struct err *e)
{
	const char *server = json_get_str(cl, "server"), *sni = json_get_str(cl, "tls-server-name");
	const char *insecure = json_get_str(cl, "insecure-skip-tls-verify");
	size_t n;
	int rc;

	if (!server)
		return err_set(e, -EINVAL, "the cluster has no server");
	if (insecure && strcmp(insecure, "true") == 0)
		return err_set(e, -ENOTSUP, "insecure-skip-tls-verify is not supported");
	rc = parse_server(c, server, e);
	if (rc < 0)
		return rc;
	if (sni)
		snprintf(c->server_name, sizeof(c->server_name), "%s", sni);
	rc = data_or_file(cl, "certificate-authority", dir, &c->ca_pem, e);
	if (rc == 1) /* client-go falls back to the system's roots */
		rc = file_read_all(SYSTEM_ROOTS, 4 * PEM_MAX, &c->ca_pem, &n, e);
	return rc;
}

static int from_user(struct kube_config *c, const cJSON *u, const char *dir, struct err *e)
{
	static const char *const unsupported[] = {"exec", "auth-provider", "username", "password"};
	const char *token = json_get_str(u, "token"), *tf = json_get_str(u, "tokenFile");
	int rc;

	for (size_t i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++)
		if (cJSON_GetObjectItemCaseSensitive(u, unsupported[i]))
			return err_set(e, -ENOTSUP,
			               "user: \"%s\" is not supported (use a token or "
			               "a client certificate)",
			               unsupported[i]);
	rc = data_or_file(u, "client-certificate", dir, &c->cert_pem, e);
	if (rc >= 0)
		rc = data_or_file(u, "client-key", dir, &c->key_pem, e);
	if (rc < 0)
		return rc;
	if (!c->cert_pem != !c->key_pem)
		return err_set(e, -EINVAL, "client certificate and key go together");
	if (token && *token && !(c->token = strdup(token)))
		return err_set(e, -ENOMEM, "out of memory");
	if (!c->token && tf && *tf) {
		char path[4200];
		if (tf[0] != '/' && dir)
			snprintf(path, sizeof(path), "%s/%s", dir, tf);
		else
			snprintf(path, sizeof(path), "%s", tf);
		if (!(c->token_file = strdup(path)))
			return err_set(e, -ENOMEM, "out of memory");
	}
	return 0;
}

static int from_json(struct kube_config *c, const cJSON *root, const char *dir, const char *ctx,
                     struct err *e)
{
	const cJSON *context, *cl, *u;
	const char *cname, *uname, *ns;
	int rc;

	if (!ctx || !*ctx)
		ctx = json_get_str(root, "current-context");
	if (!ctx || !*ctx)
		return err_set(e, -ENOENT, "no current-context (and no context named)");
	snprintf(c->source + strlen(c->source), sizeof(c->source) - strlen(c->source),
	         " context %.250s", ctx);
	context = named(root, "contexts", ctx, "context");
	if (!context)
		return err_set(e, -ENOENT, "no context named \"%s\"", ctx);
	cname = json_get_str(context, "cluster");
	uname = json_get_str(context, "user");
	ns = json_get_str(context, "namespace");
	if (ns)
		snprintf(c->ns, sizeof(c->ns), "%s", ns);
	cl = cname ? named(root, "clusters", cname, "cluster") : NULL;
	if (!cl)
		return err_set(e, -ENOENT, "context \"%s\": no cluster named \"%s\"", ctx,
		               cname ? cname : "");
	rc = from_cluster(c, cl, dir, e);
	if (rc < 0)
		return rc;
	if (!uname || !*uname)
		return 0; /* no user: anonymous */
	u = named(root, "users", uname, "user");
	if (!u)
		return err_set(e, -ENOENT, "context \"%s\": no user named \"%s\"", ctx, uname);
	return from_user(c, u, dir, e);
}

int kube_config_from_yaml(struct kube_config **out, const char *yaml, size_t len, const char *dir,
                          const char *context, struct err *e)
{
	struct kube_config *c = calloc(1, sizeof(*c));
	cJSON *root = NULL;
	int rc;

	if (!c)
		return err_set(e, -ENOMEM, "out of memory");
	snprintf(c->source, sizeof(c->source), "kubeconfig %.400s", dir ? dir : ".");
	rc = yaml_to_json(yaml, len, &root, e);
	if (rc == 0)
		rc = from_json(c, root, dir, context, e);
	cJSON_Delete(root);
	if (rc < 0) {
		err_prefix(e, "%s", c->source);
		kube_config_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int kube_config_from_file(struct kube_config **out, const char *path, const char *context,
                          struct err *e)
{
	char *text = NULL, dir[4096];
	const char *slash = strrchr(path, '/');
	size_t len;
	int rc;

	rc = file_read_all(path, YAML_MAX, &text, &len, e);
	if (rc < 0) {
		err_prefix(e, "kubeconfig");
		return rc;
	}
	if (slash)
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	else
		snprintf(dir, sizeof(dir), ".");
	if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	rc = kube_config_from_yaml(out, text, len, dir, context, e);
	if (rc == 0)
		snprintf((*out)->source, sizeof((*out)->source), "kubeconfig %.300s context %.250s",
		         path, context ? context : "(current)");
	free(text);
	return rc;
}

int kube_config_load(struct kube_config **out, const char *kubeconfig, struct err *e)
{
	if (kubeconfig && *kubeconfig)
		return kube_config_from_file(out, kubeconfig, NULL, e);
	return kube_config_in_cluster(out, NULL, e);
}
