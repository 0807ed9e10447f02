/* model/codec — the table macros the codec files of src/model use to describe a struct.
 *
 * Inside a table, T is #defined to the struct being described.  MODEL_F_INT and MODEL_F_BOOL
 * and MODEL_F_ANY need a `bool has_<member>` next to the member; the *_HAS variants of MODEL_F_OBJ and
 * MODEL_F_STRS need one too (presence matters: `[]` clears an inherited list).  Not for use
 * outside src/model.
 */
#ifndef PILLAR_MODEL_CODEC_H
#define PILLAR_MODEL_CODEC_H

#include <stddef.h>

#include "model/model.h"

#define MODEL_F_(k, t, m, h, n, s)                      \
	{                                               \
		(k), (t), offsetof(T, m), (h), (n), (s) \
	}
#define MODEL_F_STR(k, m)          MODEL_F_(k, MODEL_STR, m, MODEL_NONE, 0, NULL)
#define MODEL_F_QTY(k, m)          MODEL_F_(k, MODEL_QTY, m, MODEL_NONE, 0, NULL)
#define MODEL_F_INT(k, m)          MODEL_F_(k, MODEL_INT, m, offsetof(T, has_##m), 0, NULL)
#define MODEL_F_BOOL(k, m)         MODEL_F_(k, MODEL_BOOL, m, offsetof(T, has_##m), 0, NULL)
#define MODEL_F_MAP(k, m)          MODEL_F_(k, MODEL_MAP, m, MODEL_NONE, 0, NULL)
#define MODEL_F_TEXTMAP(k, m)      MODEL_F_(k, MODEL_TEXTMAP, m, MODEL_NONE, 0, NULL)
#define MODEL_F_TEXTMAP_HAS(k, m)  MODEL_F_(k, MODEL_TEXTMAP, m, offsetof(T, has_##m), 0, NULL)
#define MODEL_F_STRS(k, m)         MODEL_F_(k, MODEL_STRS, m, MODEL_NONE, 0, NULL)
#define MODEL_F_STRS_HAS(k, m)     MODEL_F_(k, MODEL_STRS, m, offsetof(T, has_##m), 0, NULL)
#define MODEL_F_OBJ(k, m, sub)     MODEL_F_(k, MODEL_OBJ, m, MODEL_NONE, 0, sub)
#define MODEL_F_OBJ_HAS(k, m, sub) MODEL_F_(k, MODEL_OBJ, m, offsetof(T, has_##m), 0, sub)
#define MODEL_F_LIST(k, m, n, sub) MODEL_F_(k, MODEL_LIST, m, MODEL_NONE, offsetof(T, n), sub)
#define MODEL_F_LIST_HAS(k, m, n, sub) \
	MODEL_F_(k, MODEL_LIST, m, offsetof(T, has_##m), offsetof(T, n), sub)
#define MODEL_F_ANY(k, m)   MODEL_F_(k, MODEL_ANY, rest, offsetof(T, has_##m), 0, NULL)
#define MODEL_F_CONDS(k, m) MODEL_F_LIST(k, m.v, m.n, &model_cond_type)
#define MODEL_F_META()      MODEL_F_OBJ("metadata", meta, &model_meta_type)

#define MODEL_TYPE_RULES(var, S, table, rules_)                                      \
	const struct model_type var = {.name = #S,                                   \
	                               .size = sizeof(S),                            \
	                               .fields = table,                              \
	                               .n_fields = sizeof(table) / sizeof(table[0]), \
	                               .rules = (rules_)}
#define MODEL_TYPE(var, S, table) MODEL_TYPE_RULES(var, S, table, NULL)

extern const struct model_type model_meta_type, model_cond_type, model_owner_ref_type;

#endif
