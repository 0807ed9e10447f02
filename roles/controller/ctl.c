/* ctl — the controller core: per-volume locks and store readiness. */
#include "controller/ctl.h"

#include "model/pillar.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ctl_init(struct ctl *c, store *st, agentclient *ac)
{
	memset(c, 0, sizeof(*c));
	c->st = st;
	c->ac = ac;
	c->agent_default_port = 9500;
	keylock_init(&c->locks);
}

void ctl_fini(struct ctl *c)
{
	if (c)
		keylock_fini(&c->locks);
}

bool ctl_store_ready(struct ctl *c)
{
	void *items = NULL;
	size_t n = 0;
	int r = model_list(c->st, &model_pa_kind, NULL, NULL, &items, &n, NULL, NULL);
	model_list_free(&model_pa_kind, items, n);
	return r == 0;
}
