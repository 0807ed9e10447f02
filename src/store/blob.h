/* store/blob — an object version kept as its compact JSON text: immutable, reference counted
 * (atomically, so a reader may hold one outside the lock of the map it came from).  The
 * embedded store's index and event history and the watch-fed caches keep objects this way: the
 * text of a Kubernetes-shaped object is several times smaller than its cJSON tree.
 *
 * A blob knows, from when it was made, whether its text passes json_parse_strict's checks (then
 * a parse skips them: the text never changes) and where its metadata.labels stand in it, so a
 * list with a label selector passes over the objects it does not select without parsing them.
 *
 * store_blob_new/_of return NULL when out of memory (_of also when obj cannot be printed);
 * store_blob_parse returns 0 with a new tree (caller owns) or json_parse_strict's errors;
 * store_blob_put(NULL) is a no-op. */
#ifndef PILLAR_STORE_BLOB_H
#define PILLAR_STORE_BLOB_H

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

enum store_blob_labels { BLOB_LABELS_UNKNOWN, BLOB_LABELS_NONE, BLOB_LABELS_AT };

struct store_blob {
	atomic_uint refs;
	bool checked;                   /* text passes json_text_checked (base/json.h) */
	bool long_integers;             /* json_text_long_integers of text */
	unsigned char labels;           /* enum store_blob_labels */
	uint32_t labels_at, labels_len; /* BLOB_LABELS_AT: metadata.labels' compact text */
	size_t len;
	char text[];
};

struct store_blob *store_blob_new(const char *text, size_t len); /* refs 1 */
struct store_blob *store_blob_of(const cJSON *obj);              /* its compact text, refs 1 */
/* store_blob_of a tree as json_parse_strict returned it: its strings passed the checks, which
 * its printed text then passes too (cJSON escapes every control character it prints). */
struct store_blob *store_blob_of_parsed(const cJSON *obj);
/* store_blob_of obj without metadata.managedFields, which the API server adds to every object
 * and no reader of a cache uses (an update that does not send them keeps the stored ones); they
 * are often a third of an object's text.  obj is left as it was: the member is unlinked for the
 * print and linked back after the same sibling (by hand: cJSON_InsertItemInArray of Debian 12's
 * cJSON 1.7.15 refuses an item detached before, and the member would be lost). */
struct store_blob *store_blob_of_kept(cJSON *obj);
/* store_blob_of_parsed without printing obj again: text (len bytes) is the text obj was parsed
 * from by json_parse_strict, made compact in place (the whitespace between its tokens removed)
 * and kept.  The text cJSON prints, pretty as the embedded store writes its files, becomes
 * exactly the compact text it prints; any other valid text becomes a compact one holding the
 * same value. */
struct store_blob *store_blob_of_text(char *text, size_t len, const cJSON *obj);
/* The blob a cache keeps of an object listed with its text (store_list_each_kept): from the
 * text (store_blob_of_text) when there is one and obj holds no metadata.managedFields, else
 * store_blob_of_kept. */
struct store_blob *store_blob_of_listed(cJSON *obj, char *text, size_t len);
struct store_blob *store_blob_ref(struct store_blob *b); /* b, one more reference */
void store_blob_put(struct store_blob *b);               /* drops one reference */
int store_blob_parse(const struct store_blob *b, cJSON **out, struct err *e);
/* Whether the object's labels match selector (store_selector_match): 1 or 0; -1 when the blob
 * does not know (its object parsed answers) or the selector is not valid. */
int store_blob_selects(const struct store_blob *b, const char *selector);

#endif
