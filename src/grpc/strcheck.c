/* The strings of a received message, checked on the wire (grpc/strcheck.h). */
#include "grpc/strcheck.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/str.h"

#define MAX_DEPTH  64 /* protobuf's own recursion limit is 100; our messages nest a few levels */
#define MAX_COUNTS 64 /* fields per message whose repetitions are numbered in a path */
#define KEY_SHOWN  64 /* longest map key printed in a path */

struct walk {
	char path[512];
	char *msg;
	size_t cap;
};

/* One field of the wire: its number, wire type and, for length-delimited ones, its bytes. */
struct walk_field {
	uint32_t number;
	unsigned type;
	const uint8_t *body;
	size_t len;
};

static bool varint(const uint8_t *p, size_t len, size_t *i, uint64_t *v)
{
	uint64_t x = 0;
	for (unsigned shift = 0; shift < 64 && *i < len; shift += 7) {
		uint8_t b = p[(*i)++];
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return true;
		}
	}
	return false;
}

/* The next field at *i; false at the end or where the bytes are not the wire format. */
static bool next_field(const uint8_t *p, size_t len, size_t *i, struct walk_field *f)
{
	uint64_t tag, v;
	if (*i >= len || !varint(p, len, i, &tag) || tag >> 3 == 0 || tag >> 3 > UINT32_MAX)
		return false;
	f->number = (uint32_t)(tag >> 3);
	f->type = tag & 7;
	f->body = NULL;
	f->len = 0;
	switch (f->type) {
	case 0: return varint(p, len, i, &v);
	case 1: return len - *i >= 8 ? (*i += 8, true) : false;
	case 5: return len - *i >= 4 ? (*i += 4, true) : false;
	case 2:
		if (!varint(p, len, i, &v) || v > len - *i)
			return false;
		f->body = p + *i;
		f->len = (size_t)v;
		*i += (size_t)v;
		return true;
	default: return false; /* groups: protobuf-c refuses them */
	}
}

/* Appends text to the path; returns the old length to restore. */
static size_t push(struct walk *w, const char *fmt, const char *a, size_t n)
{
	size_t old = strlen(w->path);
	snprintf(w->path + old, sizeof(w->path) - old, fmt, (int)n, a);
	return old;
}

static int fault(struct walk *w, const char *what, enum str_fault f)
{
	snprintf(w->msg, w->cap, "%s %s %s", what, w->path, str_fault_text(f));
	return -EILSEQ;
}

static bool is_map_entry(const ProtobufCFieldDescriptor *f)
{
	const ProtobufCMessageDescriptor *md = f->descriptor;
	size_t n = strlen(md->name);
	return f->label == PROTOBUF_C_LABEL_REPEATED && n > 5 &&
	       !strcmp(md->name + n - 5, "Entry") && md->n_fields == 2 && md->fields[0].id == 1 &&
	       md->fields[1].id == 2;
}

static int walk_message(struct walk *w, const ProtobufCMessageDescriptor *d, const uint8_t *p,
                        size_t len, int depth);

/* A field's value (f the field descriptor, wf its bytes) with the path already naming it. */
static int walk_value(struct walk *w, const ProtobufCFieldDescriptor *f,
                      const struct walk_field *wf, int depth)
{
	enum str_fault bad;
	if (wf->type != 2)
		return 0;
	if (f->type == PROTOBUF_C_TYPE_STRING &&
	    (bad = str_check((const char *)wf->body, wf->len, NULL)))
		return fault(w, "field", bad);
	if (f->type == PROTOBUF_C_TYPE_MESSAGE)
		return walk_message(w, f->descriptor, wf->body, wf->len, depth + 1);
	return 0;
}

/* A map entry: its key first (a bad key is named by the map), then its value under
 * map["key"]. */
static int walk_entry(struct walk *w, const ProtobufCFieldDescriptor *f,
                      const struct walk_field *wf, int depth)
{
	const ProtobufCMessageDescriptor *md = f->descriptor;
	const uint8_t *key = NULL;
	size_t key_len = 0, i = 0;
	struct walk_field e;
	while (next_field(wf->body, wf->len, &i, &e)) {
		enum str_fault bad;
		if (e.number != 1 || e.type != 2 || md->fields[0].type != PROTOBUF_C_TYPE_STRING)
			continue;
		if ((bad = str_check((const char *)e.body, e.len, NULL)))
			return fault(w, "a key of field", bad);
		key = e.body;
		key_len = e.len;
	}
	bool shown = key && key_len <= KEY_SHOWN && strcmp(f->name, "secrets") != 0;
	for (size_t j = 0; shown && j < key_len; j++)
		shown = key[j] >= 0x20 && key[j] < 0x7f && key[j] != '"';
	size_t old =
	    shown ? push(w, "[\"%.*s\"]", (const char *)key, key_len) : push(w, "%.*s", "[...]", 5);
	int r = 0;
	for (i = 0; r == 0 && next_field(wf->body, wf->len, &i, &e);)
		if (e.number == 2)
			r = walk_value(w, &md->fields[1], &e, depth);
	if (r == 0)
		w->path[old] = '\0';
	return r;
}

static int walk_message(struct walk *w, const ProtobufCMessageDescriptor *d, const uint8_t *p,
                        size_t len, int depth)
{
	unsigned counts[MAX_COUNTS] = {0};
	struct walk_field wf;
	size_t i = 0;
	if (depth > MAX_DEPTH)
		return 0;
	while (next_field(p, len, &i, &wf)) {
		const ProtobufCFieldDescriptor *f =
		    protobuf_c_message_descriptor_get_field(d, wf.number);
		if (!f || wf.type != 2 ||
		    (f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE))
			continue;
		size_t k = (size_t)(f - d->fields);
		unsigned nth = k < MAX_COUNTS ? counts[k]++ : 0;
		size_t old = push(w, w->path[0] ? ".%.*s" : "%.*s", f->name, strlen(f->name));
		int r;
		if (f->type == PROTOBUF_C_TYPE_MESSAGE && is_map_entry(f)) {
			r = walk_entry(w, f, &wf, depth);
		} else {
			if (f->label == PROTOBUF_C_LABEL_REPEATED) {
				char n[16];
				snprintf(n, sizeof(n), "%u", nth);
				push(w, "[%.*s]", n, strlen(n));
			}
			r = walk_value(w, f, &wf, depth);
		}
		if (r < 0)
			return r;
		w->path[old] = '\0';
	}
	return 0;
}

int grpc_strcheck(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, char *msg,
                  size_t cap)
{
	struct walk w = {.msg = msg, .cap = cap};
	if (cap)
		msg[0] = '\0';
	return walk_message(&w, d, p, len, 0);
}
