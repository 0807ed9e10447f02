/* store/kube internals shared by kube.c (requests) and kube_watch.c (watches).  Not a public
 * interface: callers use store.h. */
#ifndef PILLAR_STORE_KUBE_INT_H
#define PILLAR_STORE_KUBE_INT_H

#include "kube/client.h"
#include "store/store.h"

/* A kind's REST address with its own storage for group and version. */
struct kube_store_res {
	struct kube_resource r;
	char group[128], version[32];
};

void kube_store_resource(const struct store_kind *k, struct kube_store_res *out);
/* Adds kind and apiVersion when obj lacks them (list items of built-in kinds). */
void kube_store_typed(cJSON *obj, const struct store_kind *k);
/* Maps a failed request to the store's code (410 Gone/Expired: STORE_EXPIRED) with the
 * server's message in e; returns the code. */
int kube_store_fail(int rc, const struct kube_status *st, struct err *e);
/* The store's client and the timeoutSeconds of its watch streams. */
struct kube_client *kube_store_client(store *st, int *watch_secs);

int kube_store_watch(store *st, const struct store_kind *k, uint64_t from_rv, store_watch **w,
                     struct err *e);
int kube_store_watch_next(store_watch *w, int timeout_ms, enum store_event_type *type, cJSON **obj,
                          struct err *e);
void kube_store_watch_close(store_watch *w);

#endif
