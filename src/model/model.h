/* model — every object kind the roles handle, as a C struct with one codec.
 *
 * A kind (kinds.h: the five pillar-csi custom resources and the Kubernetes kinds the driver
 * reads or writes) is a struct whose first two members are `void *rest` and `struct model_meta
 * meta`, followed by its typed fields.  Its codec is a table (struct model_type) read by one
 * engine: model_decode turns a JSON object into the struct, model_encode turns the struct back.
 * JSON stays inside this layer and the store; callers see only structs.
 *
 * Unknown fields survive: every decoded object keeps, in `rest`, what this version does not
 * type (at every nesting level), and encoding starts from it, so a read-modify-write never drops
 * what a newer writer put there.  Absent optional values stay absent (strings NULL, `has_*`
 * false) and are not written back; decoding fills the spec's default into the value while
 * `has_*` stays false.
 *
 * Decoding checks JSON types only ("<path>: must be a string"); the spec's bounds and rules of
 * each kind live in one validation function per kind (kinds.h), with the spec's messages.
 *
 * Errors: functions return 0 or a negative errno: -EINVAL (wrong type, with a message naming the
 * path in `struct err`), -ENOMEM (out of memory; the output is cleared), or the store's codes
 * for the store operations (store.h).  model_free/model_clear of NULL are no-ops.  Every string
 * in a struct is malloc'd and owned by the struct; setters copy.
 */
#ifndef PILLAR_MODEL_MODEL_H
#define PILLAR_MODEL_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "store/store.h"

/* ---- value types ------------------------------------------------------------------------------ */

struct model_kv {
	char *key, *value;
};

/* A string map in document order (labels, annotations, parameters, zfs properties). */
struct model_map {
	size_t n;
	struct model_kv *kv;
};

/* A list of strings. */
struct model_strs {
	size_t n;
	char **v;
};

/* The value of key, or NULL. */
const char *model_map_get(const struct model_map *m, const char *key);
/* Sets (copying) or, with value NULL, removes key.  0 or -ENOMEM. */
int model_map_set(struct model_map *m, const char *key, const char *value);
void model_map_clear(struct model_map *m);
/* 0 or -ENOMEM: dst becomes a copy of src. */
int model_map_copy(struct model_map *dst, const struct model_map *src);

bool model_strs_has(const struct model_strs *l, const char *s);
/* Appends a copy of s.  0 or -ENOMEM. */
int model_strs_add(struct model_strs *l, const char *s);
/* Removes every element equal to s; returns how many were removed. */
size_t model_strs_remove(struct model_strs *l, const char *s);
void model_strs_clear(struct model_strs *l);
/* Decodes JSON text holding an array of strings into *out (replacing it).  0, -EINVAL (not
 * such an array; *out is empty) or -ENOMEM. */
int model_strs_decode_text(const char *text, struct model_strs *out);
int model_strs_copy(struct model_strs *dst, const struct model_strs *src);

/* Replaces *dst by a copy of s (NULL clears).  0 or -ENOMEM. */
int model_str_set(char **dst, const char *s);

/* Kubernetes Quantities in canonical binary form (crds.md §1): the largest suffix of
 * Ki Mi Gi Ti Pi Ei dividing the byte count, else plain bytes.  model_quantity_parse accepts
 * those suffixes, the decimal k M G T P E and plain integers; 0 or -EINVAL. */
void model_quantity_format(long long bytes, char *out, size_t cap);
int model_quantity_parse(const char *q, long long *out);

/* ---- metadata and conditions ------------------------------------------------------------------ */

struct model_owner_ref {
	void *rest;
	char *api_version, *kind, *name, *uid;
	bool has_controller, controller;
	bool has_block_owner_deletion, block_owner_deletion;
};

struct model_meta {
	void *rest; /* managedFields, … */
	char *name, *ns, *uid, *resource_version, *creation_timestamp, *deletion_timestamp;
	bool has_generation;
	int64_t generation;
	struct model_map labels, annotations;
	bool has_finalizers; /* present, possibly empty: [] clears them on an update */
	struct model_strs finalizers;
	size_t n_owner_refs;
	struct model_owner_ref *owner_refs;
};

/* metadata.resourceVersion as a number (0 when absent or not decimal). */
uint64_t model_meta_rv(const struct model_meta *m);

/* A condition of the standard shape (crds.md §1). */
struct model_cond {
	void *rest;
	char *type, *status, *reason, *message, *last_transition_time;
	bool has_observed_generation;
	int64_t observed_generation;
};

struct model_conds {
	size_t n;
	struct model_cond *v;
};

/* The condition of type, or NULL. */
const struct model_cond *model_cond_get(const struct model_conds *c, const char *type);
/* status / reason of the condition of type ("" when absent). */
const char *model_cond_status(const struct model_conds *c, const char *type);
const char *model_cond_reason(const struct model_conds *c, const char *type);
/* Sets condition `type`.  lastTransitionTime (now, RFC 3339) changes only when the status
 * changes.  Returns 1 when anything changed, 0 when not, -ENOMEM. */
int model_cond_set(struct model_conds *c, const char *type, const char *status, const char *reason,
                   const char *message, int64_t observed_generation);

/* ---- codecs ----------------------------------------------------------------------------------- */

enum model_ftype {
	MODEL_STR,     /* char * */
	MODEL_INT,     /* int64_t (+ has flag) */
	MODEL_BOOL,    /* bool (+ has flag) */
	MODEL_MAP,     /* struct model_map of strings */
	MODEL_TEXTMAP, /* struct model_map; scalars read as their literal text (zfs properties) */
	MODEL_STRS,    /* struct model_strs */
	MODEL_OBJ,     /* an embedded struct of type `sub` (+ optional has flag) */
	MODEL_LIST,    /* size_t count at n_off, pointer to an array of `sub` structs at off */
	MODEL_QTY,     /* char *: a Kubernetes Quantity, a string or (on input) an integer */
	MODEL_ANY,     /* any value, kept as it is in rest; only its presence is typed (has flag) */
};

#define MODEL_NONE ((size_t)-1)

struct model_type;

struct model_field {
	const char *key;
	enum model_ftype type;
	size_t off;
	size_t has_off; /* MODEL_INT, MODEL_BOOL, MODEL_OBJ: offset of a bool, or MODEL_NONE */
	size_t n_off;   /* MODEL_LIST: offset of the size_t count */
	const struct model_type *sub;
};

/* The rules of a struct type that strict decoding (model_type_decode_strict) runs on each
 * object of the type as it is decoded; either may be NULL.  Each returns 0, or -EINVAL with its
 * message in e (returned as it is); path names the object ("" for the root). */
struct model_rules {
	/* Which members are given, before any value is decoded: the has_* flags are set, the
	 * values are not. */
	int (*given)(const void *obj, const char *path, struct err *e);
	/* The values, once the object's members are decoded.  For an element of a list, earlier
	 * points to the list's first element and index counts the elements before this one, all
	 * decoded and checked; otherwise earlier is NULL and index 0. */
	int (*check)(const void *obj, const char *path, const void *earlier, size_t index,
	             struct err *e);
};

/* A struct type: its size and fields.  Every such struct starts with `void *rest`. */
struct model_type {
	const char *name;
	size_t size;
	const struct model_field *fields;
	size_t n_fields;
	const struct model_rules *rules; /* NULL when none */
};

/* A top-level kind: apiVersion/kind and the struct type (which starts with rest and meta). */
struct model_kind {
	const char *kind;
	const char *api_version;
	const struct model_type *type;
	/* The kind's validation rules (crds.md: the CRD's schema and CEL rules on one object), NULL
	 * when the model has none: 0 or -EINVAL with the spec's message.  model_create,
	 * model_update and model_update_status run it before writing. */
	int (*validate)(const void *obj, struct err *e);
	/* The kind's transition rules (the CRD's CEL rules on oldSelf: immutable fields), NULL
	 * when none: 0 or -EINVAL with the spec's message.  model_update runs it against the
	 * stored object. */
	int (*validate_update)(const void *old, const void *obj, struct err *e);
	/* The JSON member that validate_update keeps immutable ("spec"), NULL when its rules are
	 * others: the rules pass whenever an update's encoding holds this member as the stored
	 * object does (model_update_on compares the two without decoding the stored object). */
	const char *immutable;
};

/* The common head of every kind: MODEL_META(obj) is the metadata of any kind's struct. */
struct model_head {
	void *rest;
	struct model_meta meta;
};
#define MODEL_META(obj) (&((struct model_head *)(obj))->meta)

/* Decodes a JSON object (a cJSON *, passed as const void * so callers need no JSON header)
 * into obj, which must be zeroed or cleared.  On error obj is cleared. */
int model_decode(const struct model_kind *k, const void *json, void *obj, struct err *e);
/* Encodes obj into a new cJSON object (returned as void *; NULL when out of memory). */
void *model_encode(const struct model_kind *k, const void *obj);
/* A string member that is a name, an ID or a path (never free text): its path in messages and
 * its offset in the struct (a char *). */
struct model_name_field {
	const char *path;
	size_t off;
};
/* 0, or -EINVAL "<path> contains a control character" for the first of the n members of obj
 * that holds one (an escape such as \n decodes into a valid JSON string, never a valid name). */
int model_names_plain(const void *obj, const struct model_name_field *f, size_t n, struct err *e);
/* An update's check that old and obj (both of kind k) have the same spec: 0, -EINVAL "spec is
 * immutable", or -ENOMEM. */
int model_spec_unchanged(const struct model_kind *k, const void *old, const void *obj,
                         struct err *e);
/* Frees everything obj owns and zeroes it.  NULL is a no-op. */
void model_clear(const struct model_kind *k, void *obj);
/* Same for an embedded struct type. */
void model_type_clear(const struct model_type *t, void *obj);
/* Fields of obj (a struct of type t) that t does not type: how many, and the first one's key
 * (NULL when none).  Documents use them to reject unknown fields. */
size_t model_unknown_count(const struct model_type *t, const void *obj);
const char *model_unknown_first(const struct model_type *t, const void *obj);
/* Deep copy (through encode/decode).  0 or -ENOMEM. */
int model_copy(const struct model_kind *k, void *dst, const void *src);

/* 1 when obj encodes to the same JSON value as text (an earlier model_encode_text of it) —
 * compared as a whole, or only its member `part` (e.g. "status") when part is not NULL — else
 * 0 (also when out of memory: the caller then writes). */
int model_same(const struct model_kind *k, const void *obj, const char *text, const char *part);

/* The same for a struct type that is not a kind (records kept in annotations, documents). */
int model_type_decode(const struct model_type *t, const void *json, void *obj, struct err *e);
int model_type_decode_text(const struct model_type *t, const char *text, void *obj, struct err *e);
char *model_type_encode_text(const struct model_type *t, const void *obj);
/* Formatted (indented) JSON text of obj, malloc'd; NULL when out of memory. */
char *model_type_encode_pretty(const struct model_type *t, const void *obj);
int model_type_copy(const struct model_type *t, void *dst, const void *src);

/* Strict decoding, for a file a user writes (the agent's configuration: agent_config.h): the
 * text (len bytes) must be one JSON value and every string in it the bytes sent
 * (json_check_strings); every member of an object must be a field of its type, given once, and
 * of the field's JSON type, null included.  The first fault found, in document order, is the
 * error: `invalid JSON near byte <n>`, json_check_strings' messages, `unknown field "<path>"`,
 * `duplicate field "<path>"`, `<path>: expected <string|boolean|integer|object|array>` (the
 * root's path is "(root)"), each after "<prefix>: " when prefix is not NULL; or the message of
 * a type's rules (model_rules), as it is, which run on each object as it is decoded.  0,
 * -EINVAL, or -ENOMEM ("out of memory", prefixed too); obj is cleared on error. */
int model_type_decode_strict(const struct model_type *t, const char *text, size_t len,
                             const char *prefix, void *obj, struct err *e);

/* Decodes / encodes JSON text (tests, the CLI): 0 or -EBADMSG/-EINVAL/-ENOMEM. */
int model_decode_text(const struct model_kind *k, const char *text, void *obj, struct err *e);
/* Compact JSON text (malloc'd) or NULL when out of memory. */
char *model_encode_text(const struct model_kind *k, const void *obj);

/* ---- object files and output (the CLI) ------------------------------------------------------ */

/* One object of an object file. */
struct model_any {
	const struct model_kind *k; /* NULL when the object is refused (err says why) */
	void *obj;                  /* a struct of kind k */
	bool has_status;            /* the input carries a status object */
	char err[ERR_MSG_MAX];
	/* What strict field validation refuses in the input (model_strict_fields), one a line
	 * ("" when nothing); obj holds the object without them, as the API server stores it. */
	char fields[ERR_MSG_MAX];
};
/* Decodes an object file: one object, a JSON array of objects or a List
 * ({"kind":"List","items":[...]}).  Each object's kind and apiVersion are checked
 * (store_kind_of), its fields are checked (model_strict_fields, pruned) and it is decoded into
 * its struct; a refused object has k NULL and its reason in err.  0 with *out
 * (model_any_free), or -EBADMSG (not one JSON value) / -ENOMEM. */
int model_decode_file(const char *text, size_t len, struct model_any **out, size_t *n,
                      struct err *e);
void model_any_free(struct model_any *a, size_t n);
/* Strict field validation of an object of kind k (a cJSON object, as void *), as the API
 * server's fieldValidation=Strict and kubectl's default --validate=strict apply it: members the
 * kind does not know and members given twice in one object, each appended to out (cap bytes,
 * one a line, in document order) as `unknown field "spec.bogus"` / `duplicate field
 * "metadata.name"`.  The pillar-csi kinds are checked whole (the model types their CRDs'
 * schemas); Kubernetes' own kinds, which the model types in part, for duplicates only.  With
 * prune they are also removed as the API server does under Warn and Ignore: unknown members
 * dropped, only the last of duplicates kept.  Returns how many were found. */
int model_strict_fields(const struct model_kind *k, void *json, bool prune, char *out, size_t cap);
/* Evaluates the JSONPath subset of CRD printer columns (`.a.b`, `[N]`,
 * `[?(@.field=="value")]`) on obj (or on a JSON value, passed as a cJSON *) and formats the
 * result into buf: strings as they are, numbers as integers, other values as compact JSON;
 * "" when absent or when the path is not of the subset. */
void model_jsonpath(const struct model_kind *k, const void *obj, const char *path, char *buf,
                    size_t cap);
void model_jsonpath_json(const void *json, const char *path, char *buf, size_t cap);

/* ---- typed store operations (store.h semantics; cluster-scoped kinds pass ns NULL) ---------- */

/* The store kind of a model kind (NULL when the store does not know it). */
const struct store_kind *model_store_kind(const struct model_kind *k);

int model_get(store *s, const struct model_kind *k, const char *ns, const char *name, void *out,
              struct err *e);
/* model_get that also hands out *base, the stored object (a cJSON *) that out was decoded from
 * (NULL on error; free with model_base_free): an update made from out passes it to
 * model_update_on. */
int model_get_base(store *s, const struct model_kind *k, const char *ns, const char *name,
                   void *out, void **base, struct err *e);
void model_base_free(void *base);
/* model_get answered from a watch-fed cache when s is one that holds the kind (as on a thread
 * that reads cached, store_cache_thread_reads), whatever the calling thread's setting. */
int model_get_cached(store *s, const struct model_kind *k, const char *ns, const char *name,
                     void *out, struct err *e);
/* *items: an array of *n structs (free with model_list_free).  An object that does not decode
 * (a wrong JSON type) is left out and reported as the store reports an object it cannot read
 * (store.h: store_unreadable_report, a warning in the log unless the thread catches it), so
 * one bad object never hides the others. */
int model_list(store *s, const struct model_kind *k, const char *ns, const char *selector,
               void **items, size_t *n, uint64_t *list_rv, struct err *e);
void model_list_free(const struct model_kind *k, void *items, size_t n);
/* model_list's objects one at a time, in the same order, never more than one decoded: fn gets
 * each (borrowed: cleared after fn returns); 0 goes on, a negative errno stops the list and is
 * returned.  Objects that do not decode are left out as model_list leaves them.  0, a store
 * error, -ENOMEM, or fn's error. */
typedef int (*model_each_fn)(void *obj, void *arg);
int model_list_each(store *s, const struct model_kind *k, const char *ns, const char *selector,
                    model_each_fn fn, void *arg, uint64_t *list_rv, struct err *e);
/* model_list_each of the objects skip does not skip (store.h: store_list_each_skip): an object
 * whose version the caller already made something of is not parsed or decoded again. */
int model_list_each_skip(store *s, const struct model_kind *k, const char *ns, const char *selector,
                         store_skip_fn skip, model_each_fn fn, void *arg, uint64_t *list_rv,
                         struct err *e);
/* out (optional) receives the stored object; it must be zeroed/cleared.  Every write runs the
 * kind's validation first (model_kind.validate; model_update also its transition rules against
 * the stored object, model_kind.validate_update): an object the CRD would reject is refused
 * with STORE_INVALID and `<Kind> "<name>" is invalid: <the spec's message>`, nothing written.
 * Every writer (the controller, `pillar-csi apply`) goes through these three. */
int model_create(store *s, const struct model_kind *k, const void *obj, void *out, struct err *e);
int model_update(store *s, const struct model_kind *k, const void *obj, void *out, struct err *e);
int model_update_status(store *s, const struct model_kind *k, const void *obj, void *out,
                        struct err *e);
/* store_create_with_status / store_update_with_status (store.h): obj with its status in one
 * write where the store can; validated as model_create / model_update. */
int model_create_with_status(store *s, const struct model_kind *k, const void *obj, void *out,
                             struct err *e);
int model_update_with_status(store *s, const struct model_kind *k, const void *obj, void *out,
                             struct err *e);
/* model_update_with_status (with_status) or model_update_status of obj, made from base
 * (model_get_base; may be NULL): when obj still holds base's resourceVersion, the transition
 * rules compare with base rather than with the stored object read and decoded again, and a
 * kind's immutable member passes them when its encoding is base's. */
int model_update_on(store *s, const struct model_kind *k, const void *base, const void *obj,
                    bool with_status, void *out, struct err *e);
/* store_watch_next with the object decoded into obj (zeroed or cleared; on 1 the caller clears
 * it).  An object that does not decode is skipped with a warning (returns 0, as a timeout). */
int model_watch_next(store_watch *w, int timeout_ms, const struct model_kind *k,
                     enum store_event_type *type, void *obj, struct err *e);
/* The model kind of a store kind name ("PillarAgent", "Node", ...), or NULL. */
const struct model_kind *model_kind_find(const char *kind);

#endif
