/* model kpath — kubectl's output templates over objects, so `pillar-csi get` prints what
 * `kubectl get` prints (standalone.md; the operator's page runs both):
 *  - `-o jsonpath=TEMPLATE` (k8s.io/client-go/util/jsonpath): text with {actions}; an action is
 *    a path (`.a.b`, `['a']`, `[N]`, `[a:b]`, `[*]`, `.*`, `[?(@.x=="y")]` with == != < > <= >=
 *    on strings, numbers and booleans, `[?(@.x)]`), a quoted literal ("\n"), or
 *    `range PATH` ... `end`.  Several results of one action are joined by a space; strings
 *    print as they are, other values as compact JSON with sorted keys (Go's json.Marshal);
 *    missing fields print nothing (kubectl allows missing keys).  Recursive descent (`..`) is
 *    refused with -EINVAL.
 *  - `-o custom-columns=NAME:PATH,...`: one row per object, cells are the path's results in
 *    Go's %v form joined by ",", `<none>` when there is none, aligned as kubectl's tabwriter.
 * Documents are cJSON values passed as void * (cJSON stays inside src/model).  Functions return
 * 0 with a malloc'd *out, or -EINVAL with kubectl's message in e / -ENOMEM.
 */
#ifndef PILLAR_MODEL_KPATH_H
#define PILLAR_MODEL_KPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/err.h"
#include "model/model.h"

/* The document kubectl evaluates: the object itself (single, n == 1) or a List
 * {"apiVersion":"v1","items":[...],"kind":"List","metadata":{"resourceVersion":""}}; NULL when
 * out of memory.  Free with model_kpath_doc_free (NULL is a no-op). */
void *model_kpath_doc(const struct model_kind *k, const void *items, size_t n, bool single);
void model_kpath_doc_free(void *doc);
/* Appends obj to the items of a List made by model_kpath_doc (0, or -ENOMEM). */
int model_kpath_doc_add(void *doc, const struct model_kind *k, const void *obj);

/* `-o json`: doc as kubectl prints it (json.MarshalIndent with four spaces, keys sorted, <, >
 * and & escaped, a final newline), without metadata.managedFields (kubectl's default
 * --show-managed-fields=false), which are removed from doc.  0 with *out, or -ENOMEM. */
int model_kpath_json(void *doc, char **out);
/* `-o json` of a List written as its items arrive, byte for byte what model_kpath_json prints
 * for the List of the same items: begin, item i = 0, 1, ... (0, or -ENOMEM with nothing
 * written), then end with the number of items written. */
void model_kpath_json_list_begin(FILE *f);
int model_kpath_json_list_item(FILE *f, const struct model_kind *k, const void *obj, size_t i);
void model_kpath_json_list_end(FILE *f, size_t n);
int model_kpath_template(const void *doc, const char *tmpl, char **out, struct err *e);
/* One custom-columns cell: the results of path (".a.b", "a.b", "{.a.b}") on obj. */
int model_kpath_cell(const void *obj, const char *path, char **out, struct err *e);
/* The custom-columns table (header line and one line per item of a List, or of the object). */
int model_kpath_columns(const void *doc, const char *spec, char **out, struct err *e);

#endif
