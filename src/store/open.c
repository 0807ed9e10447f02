/* store: opening the store a --store flag names (store.h). */
#include <errno.h>
#include <string.h>

#include "store/store.h"

int store_open_url(const char *url, bool owner, store **out, struct err *e)
{
	*out = NULL;
	if (!url || !*url)
		return err_set(e, -EINVAL, "--store is required: dir:PATH for the embedded store");
	if (strncmp(url, "dir:", 4) == 0) {
		if (!url[4])
			return err_set(e, -EINVAL, "--store=dir:PATH needs a path");
		return store_dir_open(url + 4, owner, 1000, out, e);
	}
	if (strcmp(url, "kube") == 0)
		return err_set(
		    e, -ENOTSUP,
		    "--store=kube: the Kubernetes API client is not part of this build yet; "
		    "use --store=dir:PATH");
	return err_set(e, -EINVAL, "unknown --store \"%s\"; accepted: dir:PATH, kube", url);
}
