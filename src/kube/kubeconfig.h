/* kube/kubeconfig — the kubeconfig codec: a kubeconfig document (YAML, base/yaml.h) decoded into
 * the one context a client uses, its cluster and its user, as plain strings (kube/config.c turns
 * them into a connection: files, base64, URL).
 *
 * kube_kubeconfig_decode returns 0, or a negative errno with the reason in e: -EINVAL (not a
 * YAML mapping, malformed), -ENOENT (no current-context and none named, or the named context or
 * its cluster missing), -ENOMEM.  A user the context names but the file lacks is not an error
 * here (user_name set, user_found false): the caller reports it after checking the cluster.  out->context is set as soon as it is known, even on
 * failure (for messages); kube_kubeconfig_clear frees out's strings in every case.
 */
#ifndef PILLAR_KUBE_KUBECONFIG_H
#define PILLAR_KUBE_KUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

struct kube_kubeconfig {
	char *context; /* the context used: the one named, else current-context */
	char *ns;      /* the context's namespace, or NULL */
	struct kube_kubeconfig_cluster {
		char *server, *tls_server_name;
		char *ca_file, *ca_data; /* certificate-authority, certificate-authority-data */
		bool insecure;           /* insecure-skip-tls-verify: true */
	} cluster;
	char *user_name; /* the user the context names, NULL for anonymous */
	bool user_found; /* users has an entry named user_name (decoded into .user) */
	struct kube_kubeconfig_user {
		char *token, *token_file;
		char *cert_file, *cert_data, *key_file, *key_data;
		const char *unsupported; /* "exec", "auth-provider", "username" or "password" when
		                          * the user has it (static text), else NULL */
	} user;
};

int kube_kubeconfig_decode(const char *yaml, size_t len, const char *context,
                           struct kube_kubeconfig *out, struct err *e);
void kube_kubeconfig_clear(struct kube_kubeconfig *k);

#endif
