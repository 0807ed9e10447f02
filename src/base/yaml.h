/* yaml — one YAML document into a cJSON tree: the one YAML reader of the program, for the
 * configuration documents (crds.md §8: JSON is valid input; model/docs.c) and kubeconfig files
 * (kube/kubeconfig.c).
 *
 * The root must be a mapping.  Anchors, aliases, tags, duplicate keys and more than one
 * document are rejected.  Scalars: quoted scalars become cJSON strings; plain scalars that read
 * as `true`/`false`, a decimal integer or `null`/`~` become cJSON *raw* items holding their
 * literal text (so a caller can take them as booleans/integers, or as the literal text where a
 * string is wanted, e.g. zfs.properties values); every other plain scalar is a string.
 * Returns 0 with *out (caller frees), or -EINVAL with e->msg
 * "invalid document: <reason> at line <l> column <c>" (1-based), or -ENOMEM.
 * text is len bytes (no NUL needed).  Only codecs (model/docs.c, kube/kubeconfig.c) and tests
 * use the JSON it returns.
 */
#ifndef PILLAR_BASE_YAML_H
#define PILLAR_BASE_YAML_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "base/err.h"

int yaml_doc_parse(const char *text, size_t len, cJSON **out, struct err *e);

/* v as one YAML document (malloc'd text), as kubectl -o yaml prints objects: block style, keys
 * sorted, sequences in mappings not indented, strings plain unless they would read back as
 * something else (true, null, 600, "") or need quotes; NULL when out of memory or nested
 * deeper than 32. */
char *yaml_emit(const cJSON *v);

#endif
