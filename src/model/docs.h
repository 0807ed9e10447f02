/* model/docs — configuration documents (crds.md §8).
 *
 * model_doc_decode parses a document string (a StorageClass parameter or a PVC annotation: one
 * YAML document whose root is a mapping; JSON is valid input; base/yaml.h) and decodes it into
 * a struct of type t (model_backend_type, model_protocol_type, model_filesystem_type).  Plain
 * scalars are taken as integers/booleans where the field wants one and as their literal text in
 * zfs.properties.  Fields the type does not know are kept (model_unknown_first finds them), so
 * the caller can refuse them with its own message.  Errors carry the key:
 * `<key>: invalid document: <reason> at line <l> column <c>`, `<key>: <path> must be ...`.
 * Returns 0, -EINVAL or -ENOMEM (obj cleared).
 */
#ifndef PILLAR_MODEL_DOCS_H
#define PILLAR_MODEL_DOCS_H

#include "model/model.h"

int model_doc_decode(const struct model_type *t, const char *key, const char *text, void *obj,
                     struct err *e);

/* The list as compact JSON text (`["-L","data"]`), malloc'd; NULL when out of memory. */
char *model_strs_json(const struct model_strs *l);

/* The document `pillar-csi version --output=json` prints:
 * {"version","gitCommit","buildDate","libraries":{"<name>":"<version>",...}}. */
struct model_version {
	void *rest;
	char *version, *git_commit, *build_date;
	struct model_map libraries;
};
extern const struct model_type model_version_type;

#endif
