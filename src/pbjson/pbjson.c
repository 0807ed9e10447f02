#include "pbjson/pbjson.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <mbedtls/base64.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json.h"

#define EXACT 9007199254740992.0 /* 2^53 */

/* google.protobuf.BoolValue, Int64Value, ...: JSON carries the bare value (proto3 mapping). */
static bool is_wrapper(const ProtobufCMessageDescriptor *d)
{
	return strncmp(d->name, "google.protobuf.", 16) == 0 && d->n_fields == 1 &&
	       strcmp(d->fields[0].name, "value") == 0 && strstr(d->name, "Value") != NULL;
}

/* ---- google.protobuf.Timestamp: an RFC 3339 string in UTC (proto3 JSON mapping) ----------- */

#define TS_MIN (-62135596800LL) /* 0001-01-01T00:00:00Z */
#define TS_MAX 253402300799LL   /* 9999-12-31T23:59:59Z */

static bool is_timestamp(const ProtobufCMessageDescriptor *d)
{
	return strcmp(d->name, "google.protobuf.Timestamp") == 0;
}

static void *ts_member(const ProtobufCMessage *m, const char *name)
{
	const ProtobufCFieldDescriptor *f =
	    protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);
	return (char *)m + f->offset;
}

static int64_t *ts_seconds(const ProtobufCMessage *m)
{
	return ts_member(m, "seconds");
}

static int32_t *ts_nanos(const ProtobufCMessage *m)
{
	return ts_member(m, "nanos");
}

/* "2026-01-02T03:04:05[.frac](Z|+hh:mm|-hh:mm)" into seconds and nanos; -EINVAL when malformed
 * or outside years 1..9999. */
static int ts_parse(const char *s, int64_t *sec, int32_t *nanos)
{
	struct tm tm = {0};
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	int32_t ns = 0;
	int digits = 0;
	if (!p || strlen(s) < 20 || s[4] != '-' || s[10] != 'T')
		return -EINVAL;
	if (*p == '.')
		for (p++; isdigit((unsigned char)*p); p++, digits++)
			if (digits < 9)
				ns = ns * 10 + (*p - '0');
	if (p[-1] == '.' || digits > 9)
		return -EINVAL;
	for (int i = digits; i < 9; i++)
		ns *= 10;
	int64_t t = (int64_t)timegm(&tm);
	if (*p == '+' || *p == '-') {
		int hh, mm, n = 0;
		if (sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &n) != 2 || n != 5 || p[6] || hh > 23 ||
		    mm > 59)
			return -EINVAL;
		t += (*p == '+' ? -1 : 1) * (int64_t)(hh * 3600 + mm * 60);
	} else if (strcmp(p, "Z") != 0) {
		return -EINVAL;
	}
	if (t < TS_MIN || t > TS_MAX)
		return -EINVAL;
	*sec = t;
	*nanos = ns;
	return 0;
}

static cJSON *ts_json(const ProtobufCMessage *m)
{
	int64_t sec = *ts_seconds(m);
	int32_t ns = *ts_nanos(m);
	char buf[48];
	struct tm tm;
	time_t t = (time_t)sec;
	if (sec < TS_MIN || sec > TS_MAX || ns < 0 || ns > 999999999 || !gmtime_r(&t, &tm))
		return NULL;
	size_t n =
	    (size_t)snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
	                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
	if (ns % 1000000 == 0 && ns)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, ".%03d", ns / 1000000);
	else if (ns % 1000 == 0 && ns)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, ".%06d", ns / 1000);
	else if (ns)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, ".%09d", ns);
	snprintf(buf + n, sizeof(buf) - n, "Z");
	return cJSON_CreateString(buf);
}

/* ---- names ------------------------------------------------------------------------------------ */

size_t pbjson_json_name(const char *name, char *buf, size_t size)
{
	size_t n = 0;
	bool up = false;
	for (const char *p = name; *p; p++) {
		char c = *p;
		if (c == '_') {
			up = true;
			continue;
		}
		if (up)
			c = (char)toupper((unsigned char)c);
		up = false;
		if (n + 1 < size)
			buf[n] = c;
		n++;
	}
	if (size)
		buf[n < size ? n : size - 1] = '\0';
	return n;
}

/* The field named by its .proto name or by its JSON name (protoc's json_name). */
static const ProtobufCFieldDescriptor *field_by_json_name(const ProtobufCMessageDescriptor *d,
                                                          const char *name)
{
	const ProtobufCFieldDescriptor *f =
	    protobuf_c_message_descriptor_get_field_by_name(d, name);
	char json[128];
	if (f)
		return f;
	for (unsigned i = 0; i < d->n_fields; i++)
		if (pbjson_json_name(d->fields[i].name, json, sizeof(json)) < sizeof(json) &&
		    strcmp(json, name) == 0)
			return &d->fields[i];
	return NULL;
}

static int get_int(const cJSON *v, long double lo, long double hi, long double *out)
{
	if (cJSON_IsNumber(v) && !v->valuestring) {
		double x = v->valuedouble;
		if (x != floor(x) || x < lo || x > hi || fabs(x) > EXACT)
			return -EINVAL;
		*out = x;
		return 0;
	}
	/* a decimal string, or a long integer's exact text (base/json.h) */
	if ((cJSON_IsString(v) || cJSON_IsNumber(v)) && v->valuestring && *v->valuestring) {
		char *end;
		errno = 0;
		if (v->valuestring[0] == '-') {
			long long x = strtoll(v->valuestring, &end, 10);
			if (errno || *end || (long double)x < lo)
				return -EINVAL;
			*out = x;
		} else {
			unsigned long long x = strtoull(v->valuestring, &end, 10);
			if (errno || *end || (long double)x > hi)
				return -EINVAL;
			*out = x;
		}
		return 0;
	}
	return -EINVAL;
}

static int bad_value(const ProtobufCFieldDescriptor *f, struct err *e)
{
	return err_set(e, -EINVAL, "field %s: wrong JSON type or value out of range", f->name);
}

/* Integers, floating point and booleans: 0, or -EINVAL when v is not one in range, or 1 when f
 * is not of a numeric type. */
static int set_number(const ProtobufCFieldDescriptor *f, const cJSON *v, void *dst)
{
	long double x = 0;
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		if (get_int(v, -2147483648.0, 2147483647.0, &x) < 0)
			return -EINVAL;
		*(int32_t *)dst = (int32_t)x;
		return 0;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		if (get_int(v, 0, 4294967295.0, &x) < 0)
			return -EINVAL;
		*(uint32_t *)dst = (uint32_t)x;
		return 0;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		if (get_int(v, -9223372036854775808.0L, 9223372036854775807.0L, &x) < 0)
			return -EINVAL;
		*(int64_t *)dst = (int64_t)x;
		return 0;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		if (get_int(v, 0, 18446744073709551615.0L, &x) < 0)
			return -EINVAL;
		*(uint64_t *)dst = (uint64_t)x;
		return 0;
	case PROTOBUF_C_TYPE_FLOAT:
		if (!cJSON_IsNumber(v))
			return -EINVAL;
		*(float *)dst = (float)v->valuedouble;
		return 0;
	case PROTOBUF_C_TYPE_DOUBLE:
		if (!cJSON_IsNumber(v))
			return -EINVAL;
		*(double *)dst = v->valuedouble;
		return 0;
	case PROTOBUF_C_TYPE_BOOL:
		if (!cJSON_IsBool(v))
			return -EINVAL;
		*(protobuf_c_boolean *)dst = cJSON_IsTrue(v);
		return 0;
	default: return 1;
	}
}

/* An enum by name or by number. */
static int set_enum(const ProtobufCFieldDescriptor *f, const cJSON *v, void *dst, struct err *e)
{
	const ProtobufCEnumDescriptor *ed = f->descriptor;
	long double x = 0;

	if (cJSON_IsString(v)) {
		const ProtobufCEnumValue *ev =
		    protobuf_c_enum_descriptor_get_value_by_name(ed, v->valuestring);
		if (!ev)
			return err_set(e, -EINVAL, "field %s: unknown %s value \"%s\"", f->name,
			               ed->name, v->valuestring);
		*(int *)dst = ev->value;
		return 0;
	}
	if (get_int(v, -2147483648.0, 2147483647.0, &x) < 0)
		return bad_value(f, e);
	*(int *)dst = (int)x;
	return 0;
}

/* Bytes from base64 text. */
static int set_bytes(const ProtobufCFieldDescriptor *f, const cJSON *v, void *dst, struct err *e)
{
	ProtobufCBinaryData *b = dst;
	size_t n = 0, len;

	if (!cJSON_IsString(v))
		return bad_value(f, e);
	len = strlen(v->valuestring);
	mbedtls_base64_decode(NULL, 0, &n, (const unsigned char *)v->valuestring, len);
	b->data = malloc(n ? n : 1);
	if (!b->data)
		return err_set(e, -ENOMEM, "out of memory");
	if (mbedtls_base64_decode(b->data, n, &b->len, (const unsigned char *)v->valuestring,
	                          len) != 0) {
		free(b->data);
		b->data = NULL;
		b->len = 0;
		return err_set(e, -EINVAL, "field %s: not base64", f->name);
	}
	return 0;
}

static int set_scalar(const ProtobufCFieldDescriptor *f, const cJSON *v, void *dst, struct err *e);

/* A message: a wrapper type from its bare value, a Timestamp from RFC 3339 text, any other from
 * an object. */
static int set_message(const ProtobufCFieldDescriptor *f, const cJSON *v, void *dst, struct err *e)
{
	const ProtobufCMessageDescriptor *md = f->descriptor;

	if (is_wrapper(md) && !cJSON_IsObject(v)) {
		ProtobufCMessage *w = calloc(1, md->sizeof_message);
		if (!w)
			return err_set(e, -ENOMEM, "out of memory");
		md->message_init(w);
		*(ProtobufCMessage **)dst = w;
		return set_scalar(&md->fields[0], v, (char *)w + md->fields[0].offset, e);
	}
	if (is_timestamp(md) && cJSON_IsString(v)) {
		int64_t sec;
		int32_t ns;
		if (ts_parse(v->valuestring, &sec, &ns) < 0)
			return err_set(e, -EINVAL,
			               "field %s: \"%s\" is not an RFC 3339 time in years 1-9999",
			               f->name, v->valuestring);
		ProtobufCMessage *t = calloc(1, md->sizeof_message);
		if (!t)
			return err_set(e, -ENOMEM, "out of memory");
		md->message_init(t);
		*ts_seconds(t) = sec;
		*ts_nanos(t) = ns;
		*(ProtobufCMessage **)dst = t;
		return 0;
	}
	return pbjson_to_message(md, v, (ProtobufCMessage **)dst, e);
}

static int set_scalar(const ProtobufCFieldDescriptor *f, const cJSON *v, void *dst, struct err *e)
{
	int r;

	switch (f->type) {
	case PROTOBUF_C_TYPE_ENUM: return set_enum(f, v, dst, e);
	case PROTOBUF_C_TYPE_STRING: {
		if (!cJSON_IsString(v))
			return bad_value(f, e);
		char *s = strdup(v->valuestring);
		if (!s)
			return err_set(e, -ENOMEM, "out of memory");
		*(char **)dst = s;
		return 0;
	}
	case PROTOBUF_C_TYPE_BYTES: return set_bytes(f, v, dst, e);
	case PROTOBUF_C_TYPE_MESSAGE: return set_message(f, v, dst, e);
	default: r = set_number(f, v, dst); return r == 0 ? 0 : bad_value(f, e);
	}
}

static size_t elem_size(const ProtobufCFieldDescriptor *f)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_FLOAT:
	case PROTOBUF_C_TYPE_ENUM: return 4;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE: return 8;
	case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
	case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
	}
	return 8;
}

static bool is_map_entry(const ProtobufCFieldDescriptor *f)
{
	const ProtobufCMessageDescriptor *md = f->descriptor;
	if (f->type != PROTOBUF_C_TYPE_MESSAGE || f->label != PROTOBUF_C_LABEL_REPEATED)
		return false;
	size_t n = strlen(md->name);
	return n > 5 && strcmp(md->name + n - 5, "Entry") == 0 && md->n_fields == 2 &&
	       strcmp(md->fields[0].name, "key") == 0 && strcmp(md->fields[1].name, "value") == 0;
}

static int set_field(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f, const cJSON *v,
                     struct err *e)
{
	char *base = (char *)m;
	if (f->label == PROTOBUF_C_LABEL_REPEATED) {
		bool map = is_map_entry(f);
		size_t n = (size_t)cJSON_GetArraySize(v), es = elem_size(f), i = 0;
		const cJSON *it;
		if (map ? !cJSON_IsObject(v) : !cJSON_IsArray(v))
			return err_set(e, -EINVAL, "field %s: expected a JSON %s", f->name,
			               map ? "object" : "array");
		void *arr = calloc(n ? n : 1, es);
		if (!arr)
			return err_set(e, -ENOMEM, "out of memory");
		*(void **)(base + f->offset) = arr;
		cJSON_ArrayForEach(it, v)
		{
			int r;
			if (map) {
				const ProtobufCMessageDescriptor *md = f->descriptor;
				ProtobufCMessage *ent = calloc(1, md->sizeof_message);
				if (!ent)
					return err_set(e, -ENOMEM, "out of memory");
				md->message_init(ent);
				((ProtobufCMessage **)arr)[i] = ent;
				*(size_t *)(base + f->quantifier_offset) = ++i;
				cJSON *k = cJSON_CreateString(it->string);
				r = set_scalar(&md->fields[0], k,
				               (char *)ent + md->fields[0].offset, e);
				cJSON_Delete(k);
				if (r == 0)
					r = set_scalar(&md->fields[1], it,
					               (char *)ent + md->fields[1].offset, e);
			} else {
				r = set_scalar(f, it, (char *)arr + i * es, e);
				*(size_t *)(base + f->quantifier_offset) = ++i;
			}
			if (r < 0)
				return r;
		}
		return 0;
	}
	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
		*(uint32_t *)(base + f->quantifier_offset) = f->id;
	else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset &&
	         f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING)
		*(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
	return set_scalar(f, v, base + f->offset, e);
}

/* Sets f once: a field given twice (its proto name and its JSON name are one field) or a second
 * member of a oneof is refused, as protobuf's own JSON parser refuses them — a silent last-wins
 * would also lose what the first one allocated. */
static int set_once(ProtobufCMessage *m, unsigned char *seen, const ProtobufCFieldDescriptor *f,
                    const cJSON *v, struct err *e)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	unsigned idx = (unsigned)(f - d->fields);
	if (seen[idx])
		return err_set(e, -EINVAL, "%s: field %s is given more than once", d->name,
		               f->name);
	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
		uint32_t set = *(const uint32_t *)((const char *)m + f->quantifier_offset);
		const ProtobufCFieldDescriptor *other =
		    set ? protobuf_c_message_descriptor_get_field(d, set) : NULL;
		if (other)
			return err_set(
			    e, -EINVAL,
			    "%s: fields %s and %s are members of one oneof; give one of them",
			    d->name, other->name, f->name);
	}
	seen[idx] = 1;
	return set_field(m, f, v, e);
}

int pbjson_to_message(const ProtobufCMessageDescriptor *d, const cJSON *j, ProtobufCMessage **out,
                      struct err *e)
{
	ProtobufCMessage *m;
	unsigned char *seen;
	const cJSON *it;
	*out = NULL;
	if (!cJSON_IsObject(j))
		return err_set(e, -EINVAL, "%s: expected a JSON object", d->name);
	m = calloc(1, d->sizeof_message);
	seen = calloc(d->n_fields ? d->n_fields : 1, 1);
	if (!m || !seen) {
		free(m);
		free(seen);
		return err_set(e, -ENOMEM, "out of memory");
	}
	d->message_init(m);
	cJSON_ArrayForEach(it, j)
	{
		const ProtobufCFieldDescriptor *f = field_by_json_name(d, it->string);
		int r;
		if (!f) {
			protobuf_c_message_free_unpacked(m, NULL);
			free(seen);
			return err_set(e, -EINVAL, "%s has no field \"%s\"", d->name, it->string);
		}
		if (cJSON_IsNull(it))
			continue;
		r = set_once(m, seen, f, it, e);
		if (r < 0) {
			protobuf_c_message_free_unpacked(m, NULL);
			free(seen);
			return r;
		}
	}
	free(seen);
	*out = m;
	return 0;
}

/* ---- message → JSON ----------------------------------------------------------------------- */

/* 64-bit integers are decimal strings in proto3 JSON, whatever their size. */
static cJSON *int64_json(int64_t v)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%" PRId64, v);
	return cJSON_CreateString(buf);
}

static cJSON *uint64_json(uint64_t v)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return cJSON_CreateString(buf);
}

static cJSON *scalar_json(const ProtobufCFieldDescriptor *f, const void *p, unsigned flags)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32: return cJSON_CreateNumber(*(const int32_t *)p);
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32: return cJSON_CreateNumber(*(const uint32_t *)p);
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64: return int64_json(*(const int64_t *)p);
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64: return uint64_json(*(const uint64_t *)p);
	case PROTOBUF_C_TYPE_FLOAT: return cJSON_CreateNumber(*(const float *)p);
	case PROTOBUF_C_TYPE_DOUBLE: return cJSON_CreateNumber(*(const double *)p);
	case PROTOBUF_C_TYPE_BOOL: return cJSON_CreateBool(*(const protobuf_c_boolean *)p);
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumValue *ev =
		    protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p);
		return ev ? cJSON_CreateString(ev->name) : cJSON_CreateNumber(*(const int *)p);
	}
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)p;
		return cJSON_CreateString(s ? s : "");
	}
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *b = p;
		size_t n = 0;
		mbedtls_base64_encode(NULL, 0, &n, b->data, b->len);
		unsigned char *buf = malloc(n + 1);
		cJSON *r;
		if (!buf)
			return NULL;
		mbedtls_base64_encode(buf, n + 1, &n, b->data, b->len);
		buf[n] = '\0';
		r = cJSON_CreateString((char *)buf);
		free(buf);
		return r;
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
		if (sub && is_wrapper(sub->descriptor))
			return scalar_json(&sub->descriptor->fields[0],
			                   (const char *)sub + sub->descriptor->fields[0].offset,
			                   flags);
		if (sub && is_timestamp(sub->descriptor)) {
			cJSON *t = ts_json(sub);
			if (t)
				return t;
		}
		return sub ? pbjson_from_message(sub, flags) : cJSON_CreateNull();
	}
	}
	return cJSON_CreateNull();
}

static bool is_default(const ProtobufCFieldDescriptor *f, const void *p)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)p;
		return !s || !*s;
	}
	case PROTOBUF_C_TYPE_BYTES: return ((const ProtobufCBinaryData *)p)->len == 0;
	case PROTOBUF_C_TYPE_MESSAGE: return *(ProtobufCMessage *const *)p == NULL;
	default: {
		static const char zero[16];
		return memcmp(p, zero, elem_size(f)) == 0;
	}
	}
}

/* The member name of f: its JSON name, or its .proto name with PBJSON_PROTO_NAMES (or when the
 * JSON name does not fit buf, which no field of ours comes near). */
static const char *field_key(const ProtobufCFieldDescriptor *f, unsigned flags, char *buf,
                             size_t size)
{
	if (flags & PBJSON_PROTO_NAMES || pbjson_json_name(f->name, buf, size) >= size)
		return f->name;
	return buf;
}

/* A map field's entries into a new object; NULL when out of memory. */
static cJSON *map_json(const ProtobufCFieldDescriptor *f, void *const *arr, size_t n,
                       unsigned flags)
{
	const ProtobufCMessageDescriptor *md = f->descriptor;
	cJSON *map = cJSON_CreateObject();
	for (size_t k = 0; map && k < n; k++) {
		const char *ent = (const char *)((ProtobufCMessage *const *)arr)[k];
		cJSON *key = scalar_json(&md->fields[0], ent + md->fields[0].offset, flags);
		char kbuf[64];
		const char *ks = cJSON_IsString(key) ? key->valuestring : kbuf;
		if (!key) {
			cJSON_Delete(map);
			return NULL;
		}
		if (!cJSON_IsString(key))
			snprintf(kbuf, sizeof(kbuf), "%.0f", key->valuedouble);
		if (!json_add(map, ks,
		              scalar_json(&md->fields[1], ent + md->fields[1].offset, flags)))
			cJSON_Delete(map), map = NULL;
		cJSON_Delete(key);
	}
	return map;
}

/* A repeated field into a new array or (map fields) object; NULL when out of memory. */
static cJSON *repeated_json(const ProtobufCFieldDescriptor *f, void *const *arr, size_t n,
                            unsigned flags)
{
	if (is_map_entry(f))
		return map_json(f, arr, n, flags);
	cJSON *a = cJSON_CreateArray();
	for (size_t k = 0; a && k < n; k++)
		if (!json_add(a, NULL, scalar_json(f, (const char *)arr + k * elem_size(f), flags)))
			cJSON_Delete(a), a = NULL;
	return a;
}

/* false when the singular field f holds nothing to print (proto3 JSON leaves defaults out). */
static bool present(const ProtobufCFieldDescriptor *f, const char *base, const void *p)
{
	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
		return *(const uint32_t *)(base + f->quantifier_offset) == f->id;
	if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset &&
	    f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING)
		return *(const protobuf_c_boolean *)(base + f->quantifier_offset);
	return !is_default(f, p);
}

cJSON *pbjson_from_message(const ProtobufCMessage *m, unsigned flags)
{
	char name[128];
	const ProtobufCMessageDescriptor *d = m->descriptor;
	const char *base = (const char *)m;
	cJSON *o = cJSON_CreateObject();
	for (unsigned i = 0; o && i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const void *p = base + f->offset;
		cJSON *v;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)(base + f->quantifier_offset);
			if (n == 0)
				continue;
			v = repeated_json(f, *(void *const *)p, n, flags);
		} else if (present(f, base, p)) {
			v = scalar_json(f, p, flags);
		} else {
			continue;
		}
		if (!json_add(o, field_key(f, flags, name, sizeof(name)), v))
			cJSON_Delete(o), o = NULL; /* out of memory: nothing half-printed */
	}
	return o;
}

/* ---- log text --------------------------------------------------------------------------------- */

/* Members that hold secrets: CSI's `secrets` maps and the agent API's DH-HMAC-CHAP keys
 * (HostAuth, docs/authentication.md). */
static bool secret_member(const char *name)
{
	return name && (!strcmp(name, "secrets") || !strcmp(name, "dhchap_key") ||
	                !strcmp(name, "dhchap_ctrl_key"));
}

/* false when out of memory (a secret is then removed, never left in place). */
static bool strip_secrets(cJSON *j)
{
	cJSON *next;
	bool ok = true;
	for (cJSON *it = j ? j->child : NULL; it; it = next) {
		next = it->next;
		if (secret_member(it->string)) {
			char name[32]; /* it->string goes with the replaced item */
			snprintf(name, sizeof(name), "%s", it->string);
			cJSON *s = cJSON_CreateString("***stripped***");
			if (!s || !cJSON_ReplaceItemInObjectCaseSensitive(j, name, s)) {
				cJSON_Delete(s);
				cJSON_DeleteItemFromObjectCaseSensitive(j, name);
				ok = false;
			} else if (!s->string) { /* replaced, but the key could not be copied */
				ok = false;
			}
		} else if (!strip_secrets(it)) {
			ok = false;
		}
	}
	return ok;
}

char *pbjson_log_text(const ProtobufCMessage *m)
{
	cJSON *j = m ? pbjson_from_message(m, PBJSON_PROTO_NAMES) : NULL;
	if (!j)
		return NULL;
	if (!strip_secrets(j)) {
		cJSON_Delete(j);
		return NULL;
	}
	char *t = json_dump(j);
	cJSON_Delete(j);
	return t;
}

int pbjson_parse_text(const ProtobufCMessageDescriptor *d, const char *text, size_t len,
                      ProtobufCMessage **out, struct err *e)
{
	cJSON *j = NULL;
	int r = json_parse_strict(text, len, &j, e);

	*out = NULL;
	if (r == 0)
		r = pbjson_to_message(d, j, out, e);
	cJSON_Delete(j);
	return r;
}

char *pbjson_text(const ProtobufCMessage *m, unsigned flags)
{
	cJSON *j = pbjson_from_message(m, flags);
	char *t = NULL;

	if (j)
		t = json_print(j, flags & PBJSON_PRETTY);
	cJSON_Delete(j);
	return t;
}
