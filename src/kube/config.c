#include "kube/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/base64.h>

#include "base/file.h"
#include "kube/kubeconfig.h"

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

/* ---- kubeconfig ------------------------------------------------------------------------------ */

/* Reads the base64 data (named key for messages) or else the file into *out (NUL-terminated): 0,
 * 1 when neither is given, or a negative errno. */
static int data_or_file(const char *b64, const char *file, const char *key, const char *dir,
                        char **out, struct err *e)
{
	char path[4200];
	size_t n = 0;

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
			return err_set(e, -EINVAL, "%s-data is not base64", key);
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

static int from_cluster(struct kube_config *c, const struct kube_kubeconfig_cluster *cl,
                        const char *dir, struct err *e)
{
	size_t n;
	int rc;

	if (!cl->server)
		return err_set(e, -EINVAL, "the cluster has no server");
	if (cl->insecure)
		return err_set(e, -ENOTSUP, "insecure-skip-tls-verify is not supported");
	rc = parse_server(c, cl->server, e);
	if (rc < 0)
		return rc;
	if (cl->tls_server_name)
		snprintf(c->server_name, sizeof(c->server_name), "%s", cl->tls_server_name);
	rc = data_or_file(cl->ca_data, cl->ca_file, "certificate-authority", dir, &c->ca_pem, e);
	if (rc == 1) /* client-go falls back to the system's roots */
		rc = file_read_all(SYSTEM_ROOTS, 4 * PEM_MAX, &c->ca_pem, &n, e);
	return rc;
}

static int from_user(struct kube_config *c, const struct kube_kubeconfig_user *u, const char *dir,
                     struct err *e)
{
	int rc;

	if (u->unsupported)
		return err_set(e, -ENOTSUP,
		               "user: \"%s\" is not supported (use a token or "
		               "a client certificate)",
		               u->unsupported);
	rc = data_or_file(u->cert_data, u->cert_file, "client-certificate", dir, &c->cert_pem, e);
	if (rc >= 0)
		rc = data_or_file(u->key_data, u->key_file, "client-key", dir, &c->key_pem, e);
	if (rc < 0)
		return rc;
	if (!c->cert_pem != !c->key_pem)
		return err_set(e, -EINVAL, "client certificate and key go together");
	if (u->token && *u->token && !(c->token = strdup(u->token)))
		return err_set(e, -ENOMEM, "out of memory");
	if (!c->token && u->token_file && *u->token_file) {
		char path[4200];
		if (u->token_file[0] != '/' && dir)
			snprintf(path, sizeof(path), "%s/%s", dir, u->token_file);
		else
			snprintf(path, sizeof(path), "%s", u->token_file);
		if (!(c->token_file = strdup(path)))
			return err_set(e, -ENOMEM, "out of memory");
	}
	return 0;
}

/* The connection the decoded kubeconfig k describes. */
static int from_kubeconfig(struct kube_config *c, const struct kube_kubeconfig *k, const char *dir,
                           struct err *e)
{
	int rc;

	if (k->ns)
		snprintf(c->ns, sizeof(c->ns), "%s", k->ns);
	rc = from_cluster(c, &k->cluster, dir, e);
	if (rc < 0 || !k->user_name)
		return rc; /* no user: anonymous */
	if (!k->user_found)
		return err_set(e, -ENOENT, "context \"%s\": no user named \"%s\"", k->context,
		               k->user_name);
	return from_user(c, &k->user, dir, e);
}

int kube_config_from_yaml(struct kube_config **out, const char *yaml, size_t len, const char *dir,
                          const char *context, struct err *e)
{
	struct kube_config *c = calloc(1, sizeof(*c));
	struct kube_kubeconfig k;
	int rc;

	if (!c)
		return err_set(e, -ENOMEM, "out of memory");
	snprintf(c->source, sizeof(c->source), "kubeconfig %.400s", dir ? dir : ".");
	rc = kube_kubeconfig_decode(yaml, len, context, &k, e);
	if (k.context)
		snprintf(c->source + strlen(c->source), sizeof(c->source) - strlen(c->source),
		         " context %.250s", k.context);
	if (rc == 0)
		rc = from_kubeconfig(c, &k, dir, e);
	kube_kubeconfig_clear(&k);
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
