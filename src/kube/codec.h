/* kube/codec — the JSON documents the Kubernetes client reads and writes itself, decoded into
 * and encoded from structs here and nowhere else in src/kube:
 *  - Status (an error answer, a watch ERROR event's object) into struct kube_status;
 *  - a watch event line `{"type":T,"object":{...}}`;
 *  - a list answer's `metadata.resourceVersion` / `metadata.continue` and its `items`;
 *  - an object's `metadata.name` / `metadata.resourceVersion`;
 *  - DeleteOptions with preconditions.
 * The objects themselves pass through whole (cJSON, owned by the caller) to the store layer,
 * whose interface is JSON.  kubeconfig files have their own codec (kube/kubeconfig.h).
 * Decoders accept any input (fuzzed: test/fuzz/fuzz_kube.c).
 */
#ifndef PILLAR_KUBE_CODEC_H
#define PILLAR_KUBE_CODEC_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "base/err.h"
#include "kube/status.h"
#include "kube/watch.h"

/* Fills st from a parsed Status object; http_status 0 when none.  Returns kube_status_errno(st).
 * (kube_status_decode, kube/status.h, does the same from a response body.) */
int kube_status_from_json(struct kube_status *st, int http_status, const cJSON *obj);

/* One watch line (without its newline): 1 with *type and *obj (the event's object, caller owns),
 * or -EBADMSG (not JSON, or no known type and object; the reason in e). */
int kube_codec_event_decode(const char *line, size_t len, enum kube_event_type *type, cJSON **obj,
                            struct err *e);

/* metadata.<key> of an object or a list as a string, NULL when absent. */
const char *kube_codec_meta_str(const cJSON *obj, const char *key);

/* Moves every item of the list answer `list` (one page) to the end of the array *all (not
 * copied), creating *all (an empty array when the page has no items) when NULL: 0 or -ENOMEM. */
int kube_codec_list_move_items(cJSON *list, cJSON **all);

/* The DeleteOptions body with the preconditions given (either may be NULL), malloc'd text, or
 * NULL when out of memory. */
char *kube_codec_delete_options_encode(const char *uid, const char *resource_version);

#endif
