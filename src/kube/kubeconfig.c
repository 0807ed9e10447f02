/* kube/kubeconfig — the kubeconfig codec (kube/kubeconfig.h). */
#include "kube/kubeconfig.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/yaml.h"

void kube_kubeconfig_clear(struct kube_kubeconfig *k)
{
	char **all[] = {&k->context,
	                &k->ns,
	                &k->user_name,
	                &k->cluster.server,
	                &k->cluster.tls_server_name,
	                &k->cluster.ca_file,
	                &k->cluster.ca_data,
	                &k->user.token,
	                &k->user.token_file,
	                &k->user.cert_file,
	                &k->user.cert_data,
	                &k->user.key_file,
	                &k->user.key_data};

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		free(*all[i]);
	memset(k, 0, sizeof(*k));
}

/* The text of the scalar member key: a string, or a plain scalar base/yaml.h keeps as raw text
 * (`true`, `6443`); NULL when absent, null or not a scalar. */
static const char *scalar(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (cJSON_IsString(v))
		return v->valuestring;
	if (cJSON_IsRaw(v) && strcmp(v->valuestring, "null") && strcmp(v->valuestring, "~"))
		return v->valuestring;
	return NULL;
}

/* *dst = a copy of the scalar member key (NULL when absent): 0 or -ENOMEM. */
static int take(const cJSON *obj, const char *key, char **dst, struct err *e)
{
	const char *s = scalar(obj, key);

	if (s && !(*dst = strdup(s)))
		return err_set(e, -ENOMEM, "out of memory");
	return 0;
}

/* The `key` member (cluster/context/user) of the entry of list whose name is name. */
static const cJSON *named(const cJSON *root, const char *list, const char *name, const char *key)
{
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(root, list), *it;
	const cJSON *arr = cJSON_IsArray(l) ? l : NULL;

	cJSON_ArrayForEach(it, arr)
	{
		const char *n = scalar(it, "name");
		if (n && strcmp(n, name) == 0)
			return cJSON_GetObjectItemCaseSensitive(it, key);
	}
	return NULL;
}

static int decode_cluster(const cJSON *cl, struct kube_kubeconfig_cluster *c, struct err *e)
{
	const char *insecure = scalar(cl, "insecure-skip-tls-verify");
	int rc;

	c->insecure = insecure && strcmp(insecure, "true") == 0;
	if ((rc = take(cl, "server", &c->server, e)) < 0 ||
	    (rc = take(cl, "tls-server-name", &c->tls_server_name, e)) < 0 ||
	    (rc = take(cl, "certificate-authority", &c->ca_file, e)) < 0)
		return rc;
	return take(cl, "certificate-authority-data", &c->ca_data, e);
}

static int decode_user(const cJSON *u, struct kube_kubeconfig_user *k, struct err *e)
{
	static const char *const unsupported[] = {"exec", "auth-provider", "username", "password"};
	int rc;

	for (size_t i = 0; !k->unsupported && i < sizeof(unsupported) / sizeof(unsupported[0]); i++)
		if (cJSON_GetObjectItemCaseSensitive(u, unsupported[i]))
			k->unsupported = unsupported[i];
	if ((rc = take(u, "token", &k->token, e)) < 0 ||
	    (rc = take(u, "tokenFile", &k->token_file, e)) < 0 ||
	    (rc = take(u, "client-certificate", &k->cert_file, e)) < 0 ||
	    (rc = take(u, "client-certificate-data", &k->cert_data, e)) < 0 ||
	    (rc = take(u, "client-key", &k->key_file, e)) < 0)
		return rc;
	return take(u, "client-key-data", &k->key_data, e);
}

static int decode_root(const cJSON *root, const char *ctx, struct kube_kubeconfig *out,
                       struct err *e)
{
	const cJSON *context, *cl, *u;
	const char *cname, *uname;
	int rc;

	if (!ctx || !*ctx)
		ctx = scalar(root, "current-context");
	if (!ctx || !*ctx)
		return err_set(e, -ENOENT, "no current-context (and no context named)");
	if (!(out->context = strdup(ctx)))
		return err_set(e, -ENOMEM, "out of memory");
	context = named(root, "contexts", ctx, "context");
	if (!context)
		return err_set(e, -ENOENT, "no context named \"%s\"", ctx);
	cname = scalar(context, "cluster");
	uname = scalar(context, "user");
	if ((rc = take(context, "namespace", &out->ns, e)) < 0)
		return rc;
	cl = cname ? named(root, "clusters", cname, "cluster") : NULL;
	if (!cl)
		return err_set(e, -ENOENT, "context \"%s\": no cluster named \"%s\"", ctx,
		               cname ? cname : "");
	if ((rc = decode_cluster(cl, &out->cluster, e)) < 0)
		return rc;
	if (!uname || !*uname)
		return 0; /* no user: anonymous */
	if (!(out->user_name = strdup(uname)))
		return err_set(e, -ENOMEM, "out of memory");
	u = named(root, "users", uname, "user");
	out->user_found = u != NULL;
	return u ? decode_user(u, &out->user, e) : 0;
}

int kube_kubeconfig_decode(const char *yaml, size_t len, const char *context,
                           struct kube_kubeconfig *out, struct err *e)
{
	cJSON *root = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = yaml_doc_parse(yaml, len, &root, e);
	if (rc == 0)
		rc = decode_root(root, context, out, e);
	cJSON_Delete(root);
	return rc;
}
