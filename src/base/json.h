/* json — helpers over cJSON for records, configuration and Kubernetes-shaped objects.
 *
 * Parsing is strict: one JSON value filling the whole input (whitespace aside), so a
 * truncated or concatenated record is -EBADMSG, never half-read.
 *
 * Integers are exact over the whole int64_t range, both ways (Kubernetes' int64 fields, e.g.
 * capacityBytes): a parsed integer of more than 15 digits keeps its text in the number item's
 * valuestring (a double carries only 2^53 exactly), json_int64 creates such items, and
 * json_print/json_dump/json_write_file print integers of 10^15 and more digit for digit (cJSON
 * alone prints 15 significant digits).  Print through these, never cJSON_Print*, and read
 * integers with json_int64_of/json_get_int64, never valuedouble.
 */
#ifndef PILLAR_BASE_JSON_H
#define PILLAR_BASE_JSON_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"
#include "base/str.h"

#define JSON_FILE_MAX (16u << 20)

/* 0 with *out set (caller owns, cJSON_Delete), or -EBADMSG (not one valid JSON value, or a
 * string json_check_strings refuses) / -ENOMEM (out of memory, whatever the text). */
int json_parse_strict(const char *buf, size_t len, cJSON **out, struct err *e);

/* The same without its messages and without the string check, for a reader that words its own
 * (the agent's configuration file): a control character (a NUL byte too) inside a string or
 * between tokens, other than tab, LF and CR, is refused.  0 with *out; -EBADMSG with
 * *at the offset of the first byte that is not part of the value (the end of the value, or of
 * the text, when it is cut short); -ENOMEM. */
int json_parse_value(const char *buf, size_t len, cJSON **out, size_t *at);

/* Every string of the JSON text (member names too) is the bytes that were sent: no NUL byte
 * (the escape \u0000, or a \u without four hex digits, which cJSON turns into the end of the
 * string), UTF-8 (RFC 8259 §8.1) and no raw control character (U+0000 to U+001F are escaped
 * inside strings, §7); and no control character stands between tokens other than tab, LF and
 * CR (§2: cJSON skips any as whitespace).  The text must be valid JSON otherwise (cJSON parsed
 * it); json_parse_strict runs this check.  0, or -EBADMSG with "field spec.pools[0].name
 * contains a NUL byte (byte N)" / "field spec.name contains an escape \\u without four hex
 * digits (byte N)" / "a key of metadata.labels is not valid UTF-8 (byte N)" / "field spec.name
 * contains a control character (byte N)" / "field spec.name contains an invalid escape (byte N)"
 * (one RFC 8259 does not have, or a surrogate unpaired: json_parse_strict's cJSON refuses it
 * first) / "invalid JSON: control character 0x01 at byte N".  Strings are scanned by
 * json_string_scan. */
int json_check_strings(const char *buf, size_t len, struct err *e);

/* The JSON string whose text starts at p (past its opening quote) and may run to limit: its
 * first fault with *end at the byte where it stands, or STR_OK with *end at the closing quote
 * (limit when there is none).  The faults: STR_NUL for a NUL byte or the escape \u0000 and
 * STR_ESCAPE for a \u without four hex digits (cJSON decodes both into a NUL byte),
 * STR_CONTROL for another control character (RFC 8259 §7), STR_UTF8 for bytes that are not
 * UTF-8, STR_INVALID_ESCAPE for an escape RFC 8259 does not have or a surrogate escape not
 * paired as cJSON decodes it (a high one, then a low one; cJSON refuses the rest).  The one
 * string scanner of json_check_strings and json_cut_member. */
enum str_fault json_string_scan(const char *p, const char *limit, const char **end);

/* Whether text that passed json_check_strings' checks stays valid for json_parse_strict without
 * them: no NUL byte, no control character, UTF-8, no escape json_string_scan refuses
 * (json_check_strings' quick test).  A store that keeps a checked text checks it once,
 * then parses it with json_parse_checked. */
bool json_text_checked(const char *buf, size_t len);
/* Whether the text holds an integer of more than 15 digits (one json_parse_* keeps as text). */
bool json_text_long_integers(const char *buf, size_t len);
/* json_text_long_integers of what json_print/json_dump print for v, from the tree. */
bool json_long_integers(const cJSON *v);
/* json_parse_strict of text json_text_checked accepted, without its checks; long_integers as
 * json_text_long_integers answered for it.  0 with *out, -EBADMSG or -ENOMEM with e. */
int json_parse_checked(const char *buf, size_t len, bool long_integers, cJSON **out, struct err *e);

/* json_parse_strict for the answers of a server whose objects are each checked on their own
 * (the API server's lists and watch events): an escape \u0000 in a string does not refuse the
 * whole text but becomes U+FFFF, which json_marked finds and model_decode refuses for the one
 * object that holds it — an object any user can write (a claim's annotation) never hides the
 * others, and is never read as another.  Text that already holds U+FFFF, or is not UTF-8, is
 * refused as json_parse_strict refuses it. */
int json_parse_marked(const char *buf, size_t len, cJSON **out, struct err *e);
/* Whether a string or member name in v (at any depth) holds what json_parse_marked put for a
 * NUL byte; its path relative to v is then written to path (cap bytes; it must hold v's own
 * path, "" for none, on entry). */
bool json_marked(const cJSON *v, char *path, size_t cap);

/* Cuts the first member named member out of the first member named object (an object) of the
 * JSON object in text (len bytes), in place, and returns the text's new length: what cJSON then
 * parses is the object without it, as if cJSON had skipped the member (the API server's
 * metadata.managedFields, which no reader here keeps).  Names match as written, escapes aside.
 * Text that is not one valid JSON object (as json_parse_strict would refuse it), or has no such
 * member, is left as it is (len). */
size_t json_cut_member(char *text, size_t len, const char *object, const char *member);

/* Strict read of a JSON file: -ENOENT when missing, -EBADMSG when empty, truncated or corrupt. */
int json_read_file(const char *path, cJSON **out, struct err *e);

/* Durable write (file.h) of the value, formatted, with a trailing newline. */
int json_write_file(const char *path, const cJSON *v, mode_t mode, struct err *e);

/* The string member key of obj, or NULL when absent or not a string. */
const char *json_get_str(const cJSON *obj, const char *key);

/* 0, -ENOENT (absent or null) or -EINVAL (not an exact integer in range). */
int json_get_int64(const cJSON *obj, const char *key, int64_t *out);
/* The integer of a number item, or of a raw item's text (a plain YAML scalar, base/yaml.h):
 * 0, or -EINVAL when it is not an integer in int64_t's range (a number item without its text:
 * only up to 2^53). */
int json_int64_of(const cJSON *v, int64_t *out);
/* A number item carrying x exactly (NULL when out of memory). */
cJSON *json_int64(int64_t x);

/* 0, -ENOENT or -EINVAL (not a boolean). */
int json_get_bool(const cJSON *obj, const char *key, bool *out);

/* The string member key of the JSON object in the file at path, copied into buf ("" when
 * absent or not a string): 0 or json_read_file's errors (buf is then ""). */
int json_file_get_str(const char *path, const char *key, char *buf, size_t cap, struct err *e);

/* The name and the version of the linked JSON library ("cJSON", "1.7.18"). */
const char *json_lib_name(void);
const char *json_lib_version(void);

/* Adds item under key to the object o (key NULL: appends it to the array o).  false when out of
 * memory: item is NULL, or it could not be added (cJSON then drops it silently; it is freed
 * here).  A writer that checks every add never writes a record with a member missing. */
bool json_add(cJSON *o, const char *key, cJSON *item);

/* Compact text (malloc'd, caller frees), or NULL when out of memory. */
char *json_dump(const cJSON *v);
/* cJSON_Print (pretty) or cJSON_PrintUnformatted with exact integers; NULL when out of
 * memory. */
char *json_print(const cJSON *v, bool pretty);
/* json_dump's text as YAML reads it too (a document a YAML parser decodes, e.g. a StorageClass
 * parameter): the characters YAML does not allow raw (DEL, the C1 controls, U+FFFE, U+FFFF) or
 * reads as a line break (U+0085, U+2028, U+2029) are written as \u escapes, which JSON reads
 * as the same value.  Malloc'd, caller frees; NULL when out of memory. */
char *json_dump_for_yaml(const cJSON *v);

#endif
