/* store/blob — an object version kept as its compact JSON text: immutable, reference counted
 * (atomically, so a reader may hold one outside the lock of the map it came from).  The
 * embedded store's index and event history and the watch-fed caches keep objects this way: the
 * text of a Kubernetes-shaped object is several times smaller than its cJSON tree.
 *
 * store_blob_new/_of return NULL when out of memory (_of also when obj cannot be printed);
 * store_blob_parse returns 0 with a new tree (caller owns) or json_parse_strict's errors;
 * store_blob_put(NULL) is a no-op. */
#ifndef PILLAR_STORE_BLOB_H
#define PILLAR_STORE_BLOB_H

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stddef.h>

#include "base/err.h"

struct store_blob {
	atomic_uint refs;
	size_t len;
	char text[];
};

struct store_blob *store_blob_new(const char *text, size_t len); /* refs 1 */
struct store_blob *store_blob_of(const cJSON *obj);              /* its compact text, refs 1 */
struct store_blob *store_blob_ref(struct store_blob *b);         /* b, one more reference */
void store_blob_put(struct store_blob *b);                       /* drops one reference */
int store_blob_parse(const struct store_blob *b, cJSON **out, struct err *e);

#endif
