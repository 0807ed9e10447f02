/* model/yaml — one YAML document (crds.md §8: JSON is valid input) into a cJSON tree.
 *
 * The root must be a mapping.  Anchors, aliases, tags, duplicate keys and more than one
 * document are rejected.  Scalars: quoted scalars become cJSON strings; plain scalars that read
 * as `true`/`false`, a decimal integer or `null`/`~` become cJSON *raw* items holding their
 * literal text (so a caller can take them as booleans/integers, or as the literal text where a
 * string is wanted, e.g. zfs.properties values); every other plain scalar is a string.
 * Returns 0 with *out (caller frees), or -EINVAL with e->msg
 * "invalid document: <reason> at line <l> column <c>" (1-based), or -ENOMEM.
 * Part of the model layer: only the codecs (model/docs.c) and tests use the JSON it returns.
 */
#ifndef PILLAR_MODEL_YAML_H
#define PILLAR_MODEL_YAML_H

#include <cjson/cJSON.h>

#include "base/err.h"

int model_yaml_parse(const char *text, cJSON **out, struct err *e);

#endif
