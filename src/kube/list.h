/* kube/list — a List answer read as it arrives: each element of its `items` array is cut out of
 * the text by a scanner that knows JSON's strings, escapes and nesting, parsed on its own
 * (json_parse_marked: strict, a \u0000 marks only the item that holds it) and handed on, so a
 * page is never held whole, neither as text nor as a tree: what is held at once is one item's
 * text and tree and the bytes of one read.
 *
 * The answer must be one JSON object (members in any order, as a List's are); `items` an array
 * (or null: no items), `metadata` an object whose `resourceVersion` and `continue` strings are
 * kept; other members are checked to be JSON and dropped.  The scanner accepts any bytes
 * (test/fuzz/fuzz_kube.c): text that is not such an object is -EBADMSG with the byte where it
 * went wrong, a value longer than the scanner's maximum -EMSGSIZE; what was handed on before
 * stays handed on.
 */
#ifndef PILLAR_KUBE_LIST_H
#define PILLAR_KUBE_LIST_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "kube/client.h"

/* One listed item (a JSON object; the scanner frees it when fn returns) and the text it was
 * parsed from: len bytes of the scanner's buffer, which fn may change in place (as
 * store_blob_of_text compacts it), or NULL when the item was parsed from a changed copy
 * (json_parse_marked's, for an escape \u0000).  0 to go on, anything else stops the list and is
 * returned as it is. */
typedef int (*kube_item_fn)(cJSON *item, char *text, size_t len, void *arg);

#define KUBE_LIST_VALUE_MAX (16u << 20) /* default largest item (or other member) */

struct kube_list_scan {
	kube_item_fn fn;
	void *arg;
	size_t max_value;
	char *buf;         /* the bytes not yet consumed: at most the value being scanned */
	size_t len, cap;   /* of buf */
	size_t pos, start; /* scanned up to pos; the value being scanned starts at start */
	uint64_t base;     /* bytes dropped from buf's front so far (offsets in messages) */
	int state, member; /* where in the List; which member's value comes (items, metadata) */
	int error;         /* what a failed scan returned (state S_FAILED) */
	int64_t depth;     /* of the value being scanned */
	bool in_string, escape, scalar, seen_items, seen_meta;
	bool stopped;             /* fn's return ended the scan */
	bool drop_managed_fields; /* cut each item's metadata.managedFields before the parse */
	size_t items;             /* handed on so far */
	char *rv, *cont;          /* metadata.resourceVersion and .continue (NULL: absent) */
};

/* max_value 0: KUBE_LIST_VALUE_MAX. */
void kube_list_scan_init(struct kube_list_scan *s, size_t max_value, kube_item_fn fn, void *arg);
void kube_list_scan_free(struct kube_list_scan *s);
/* Scans the next bytes of the answer, handing on every item they complete: 0, -EBADMSG,
 * -EMSGSIZE, -ENOMEM (the reason in e), or what fn returned.  After a failure the scanner
 * refuses more bytes with the same code. */
int kube_list_scan_push(struct kube_list_scan *s, const void *data, size_t len, struct err *e);
/* The end of the answer: 0 when it was one whole List, or -EBADMSG (cut short). */
int kube_list_scan_finish(struct kube_list_scan *s, struct err *e);

/* One page of a list read as it arrives (kube_list's request): each item to fn, then the page's
 * metadata.resourceVersion into rv and metadata.continue into cont ("" when absent; -EOVERFLOW
 * when one does not fit).  Errors as kube_list's, and fn's return as it is. */
int kube_list_each(struct kube_client *kc, const struct kube_resource *r, const char *ns,
                   const struct kube_list_opts *o, kube_item_fn fn, void *arg, char *rv,
                   size_t rv_cap, char *cont, size_t cont_cap, struct kube_status *st);

#endif
