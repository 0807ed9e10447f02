/* fsopts — the mkfs option allowlist (rules/mkfs.h) applied to a JSON list. */
#include "controller/fsopts.h"

#include <errno.h>
#include <stdlib.h>

#include "rules/mkfs.h"

int fsopts_mkfs_check(const char *fstype, const cJSON *list, struct err *e)
{
	size_t n = (size_t)cJSON_GetArraySize(list), i = 0, bad;
	const char **opts = calloc(n + 1, sizeof(*opts));
	const cJSON *it;
	if (!opts)
		return err_set(e, -ENOMEM, "out of memory");
	cJSON_ArrayForEach(it, list) opts[i++] = cJSON_IsString(it) ? it->valuestring : NULL;
	int r = rules_mkfs_check(fstype, opts, n, &bad, e);
	if (r < 0 && bad < n && !opts[bad]) {
		/* A non-string element is named by its JSON text. */
		char *t = cJSON_PrintUnformatted(cJSON_GetArrayItem(list, (int)bad));
		r = rules_mkfs_refuse(e, t ? t : "?", fstype);
		free(t);
	}
	free(opts);
	return r;
}
