/* storeflags — the kube store's shared flags (storeflags.h). */
#include "storeflags.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int store_flags_opts(const struct store_flags *f, const char *component, struct store_open_opts *o,
                     struct err *e)
{
	char *end = NULL;
	double qps = f->qps ? strtod(f->qps, &end) : 0;
	memset(o, 0, sizeof(*o));
	if (!f->qps || end == f->qps || *end || !isfinite(qps) || qps <= 0)
		return err_set(e, -EINVAL, "--kube-api-qps must be a positive number, not \"%s\"",
		               f->qps ? f->qps : "");
	if (f->burst < 1 || f->burst > 1000000)
		return err_set(e, -EINVAL, "--kube-api-burst must be at least 1, not %lld",
		               (long long)f->burst);
	o->kubeconfig = f->kubeconfig && *f->kubeconfig ? f->kubeconfig : NULL;
	o->component = component;
	o->qps = qps;
	o->burst = (int)f->burst;
	return 0;
}
