/* kube/config — where the API server is and how to authenticate to it.
 *
 * Two sources, as client-go has them:
 *  - in cluster: KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT and the service account's
 *    directory (/var/run/secrets/kubernetes.io/serviceaccount: token, ca.crt, namespace);
 *  - a kubeconfig file (--kubeconfig): the current context (or a named one), its cluster's
 *    `server` (https only), `certificate-authority` / `-data`, `tls-server-name`, and its user's
 *    `client-certificate` / `-data` with `client-key` / `-data`, `token` or `tokenFile`.
 *    Relative file names are relative to the kubeconfig's directory.  exec and auth-provider
 *    plugins, basic auth and insecure-skip-tls-verify are refused with -ENOTSUP.
 * A token file is not read here: the client re-reads it whenever it changes (bound service
 * account tokens rotate), see kube/client.h.  Loaders return 0 or a negative errno with the
 * reason in e: -ENOENT (not in a cluster, file or context missing), -EINVAL (malformed).
 */
#ifndef PILLAR_KUBE_CONFIG_H
#define PILLAR_KUBE_CONFIG_H

#include <stddef.h>

#include "base/err.h"

#define KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

struct kube_config {
	char target[300];         /* host:port in h2/net.h form */
	char server_name[256];    /* tls-server-name, "" for the target's host */
	char server[512];         /* the server as configured, for messages */
	char *ca_pem;             /* PEM text of the CA bundle that verifies the server */
	char *cert_pem, *key_pem; /* client certificate and key, or NULL */
	char *token;              /* a fixed bearer token, or NULL */
	char *token_file;         /* a bearer token file to follow, or NULL */
	char ns[254];             /* the context's (or the pod's) namespace, "" when none */
	char source[600];         /* "in-cluster" or "kubeconfig PATH context NAME" */
};

/* In-cluster configuration; sa_dir NULL means KUBE_SA_DIR. */
int kube_config_in_cluster(struct kube_config **out, const char *sa_dir, struct err *e);
/* Kubeconfig at path; context NULL means its current-context. */
int kube_config_from_file(struct kube_config **out, const char *path, const char *context,
                          struct err *e);
/* The same from YAML text; dir resolves relative file names (NULL: the working directory). */
int kube_config_from_yaml(struct kube_config **out, const char *yaml, size_t len, const char *dir,
                          const char *context, struct err *e);
/* What --store=kube uses (standalone.md): the kubeconfig at path when one is given, else the
 * in-cluster configuration (-ENOENT outside a cluster). */
int kube_config_load(struct kube_config **out, const char *kubeconfig, struct err *e);
void kube_config_free(struct kube_config *c);

#endif
