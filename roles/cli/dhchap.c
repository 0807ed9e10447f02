/* `pillar-csi dhchap rotate NODE`: asks the node plugin of NODE for new DH-HMAC-CHAP keys by a
 * new value (the time, RFC 3339 with nanoseconds) of the Node annotation
 * pillar-csi.bhyoo.com/dhchap-rotate (docs/authentication.md "Rotation").  The embedded store
 * may hold no Node yet: one is created there. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/flags.h"
#include "cli/cli.h"
#include "model/kube.h"
#include "rules/keys.h"
#include "store/store.h"
#include "storeflags.h"

/* Sets the annotation on Node name (created in the embedded store when missing). */
static int request(store *s, const char *name, const char *value, struct err *e)
{
	for (int attempt = 0; attempt < 5; attempt++) {
		struct model_node nd = {0};
		int r = model_get(s, &model_node_kind, NULL, name, &nd, e);
		bool create = r == STORE_NOT_FOUND && !store_kube_client(s);
		if (r < 0 && !create)
			return r;
		if (create && (r = model_str_set(&nd.meta.name, name)) < 0)
			return err_set(e, r, "out of memory");
		if (model_map_set(&nd.meta.annotations, RULES_ANN_DHCHAP_ROTATE, value) < 0)
			r = err_set(e, -ENOMEM, "out of memory");
		else
			r = create ? model_create(s, &model_node_kind, &nd, NULL, e)
			           : model_update(s, &model_node_kind, &nd, NULL, e);
		model_clear(&model_node_kind, &nd);
		if (r != STORE_CONFLICT && r != STORE_ALREADY_EXISTS)
			return r;
	}
	return err_set(e, STORE_CONFLICT, "Node \"%s\": too many concurrent updates", name);
}

int cli_dhchap_main(int argc, char **argv)
{
	const char *url = cli_default_store();
	const struct flag_def defs[] = {
	    {"store", FLAG_STRING, &url,
	     "object store: dir:PATH or kube (default $PILLAR_CSI_STORE)", false},
	    STORE_FLAG_DEFS(&cli_sf),
	};
	char **pos = calloc((size_t)argc + 1, sizeof(char *)), value[64];
	int npos = 0, r;
	struct err e = {0};
	store *s;
	if (!pos)
		return 1;
	r = flags_parse_mixed("pillar-csi dhchap", defs, sizeof(defs) / sizeof(defs[0]), argc, argv,
	                      pos, &npos, &e);
	if (r == FLAGS_HELP) {
		flags_usage(stdout, "pillar-csi dhchap",
		            "pillar-csi dhchap rotate NODE: ask the node plugin of NODE for new "
		            "DH-HMAC-CHAP keys (docs/authentication.md).",
		            defs, sizeof(defs) / sizeof(defs[0]));
		free(pos);
		return 0;
	}
	if (r != FLAGS_OK || npos != 2 || strcmp(pos[0], "rotate") != 0) {
		fprintf(stderr, "%s\n",
		        r < 0 ? e.msg
		              : "pillar-csi dhchap: usage: pillar-csi dhchap rotate NODE "
		                "[--store=dir:PATH|kube]");
		free(pos);
		return 2;
	}
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(value, sizeof(value), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(value + n, sizeof(value) - n, ".%09ldZ", ts.tv_nsec);
	if ((r = cli_open_store(url, &s)) != 0) {
		free(pos);
		return r;
	}
	r = request(s, pos[1], value, &e);
	store_close(s);
	if (r < 0)
		fprintf(stderr, "Error from server (%s): %s\n", store_reason(r), e.msg);
	else
		printf("node/%s: DH-HMAC-CHAP rotation requested (%s=%s)\n", pos[1],
		       RULES_ANN_DHCHAP_ROTATE, value);
	free(pos);
	return r < 0 ? 1 : 0;
}
