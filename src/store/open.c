/* store: opening the store a --store flag names (store.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

int store_open(const char *url, bool owner, const struct store_open_opts *o, store **out,
               struct err *e)
{
	*out = NULL;
	if ((!url || !*url) && getenv("KUBERNETES_SERVICE_HOST"))
		url = "kube";
	if (!url || !*url)
		return err_set(e, -EINVAL,
		               "--store is required outside a cluster: dir:PATH for the embedded "
		               "store, or kube with --kubeconfig=PATH");
	if (strncmp(url, "dir:", 4) == 0) {
		if (!url[4])
			return err_set(e, -EINVAL, "--store=dir:PATH needs a path");
		return store_dir_open(url + 4, owner, 1000, out, e);
	}
	if (strcmp(url, "kube") == 0)
		return store_kube_open(o, out, e);
	return err_set(e, -EINVAL, "unknown --store \"%s\"; accepted: dir:PATH, kube", url);
}

int store_open_url(const char *url, bool owner, store **out, struct err *e)
{
	return store_open(url, owner, NULL, out, e);
}
