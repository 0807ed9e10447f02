/* libFuzzer target: the model codecs (src/model).  The first byte picks the parser:
 *   0    an object file (model_decode_file: one object, an array or a List, every kind);
 *   1-3  a configuration document as a StorageClass parameter or PVC annotation carries it
 *        (model_doc_decode: YAML or JSON into the backend / protocol / filesystem type);
 *   4    a quantity ("10Gi", model_quantity_parse) and an option list (model_strs_decode_text).
 * Whatever decodes must encode, and the encoding must decode again (abort otherwise). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model/docs.h"
#include "model/model.h"
#include "model/pillar.h"

static void round_trip(const struct model_kind *k, const void *obj)
{
	char *t = model_encode_text(k, obj);
	void *copy = calloc(1, k->type->size);
	struct err e = {0};
	if (!t || !copy)
		abort();
	if (model_decode_text(k, t, copy, &e) < 0)
		abort(); /* our own encoding must read back */
	model_clear(k, copy);
	free(copy);
	free(t);
}

static void object_file(const char *text, size_t len)
{
	struct model_any *a = NULL;
	size_t n = 0;
	struct err e = {0};
	if (model_decode_file(text, len, &a, &n, &e) < 0)
		return;
	for (size_t i = 0; i < n; i++)
		if (a[i].k)
			round_trip(a[i].k, a[i].obj);
	model_any_free(a, n);
}

static void document(const struct model_type *t, const char *text)
{
	void *obj = calloc(1, t->size), *copy = calloc(1, t->size);
	struct err e = {0};
	if (!obj || !copy)
		abort();
	if (model_doc_decode(t, "pillar-csi.bhyoo.com/doc", text, obj, &e) == 0) {
		char *enc = model_type_encode_text(t, obj);
		if (!enc || model_doc_decode(t, "again", enc, copy, &e) < 0)
			abort();
		model_type_clear(t, copy);
		free(enc);
		model_type_clear(t, obj);
	}
	free(copy);
	free(obj);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct model_type *const docs[] = {&model_backend_type, &model_protocol_type,
	                                                &model_filesystem_type};
	char *text;
	if (size < 1)
		return 0;
	text = malloc(size); /* NUL-terminated copy of data + 1 */
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = 0;
	switch (data[0] % 5) {
	case 0: object_file(text, size - 1); break;
	case 1:
	case 2:
	case 3: document(docs[data[0] % 5 - 1], text); break;
	default: {
		long long q;
		struct model_strs l = {0};
		model_quantity_parse(text, &q);
		if (model_strs_decode_text(text, &l) == 0)
			model_strs_clear(&l);
	}
	}
	free(text);
	return 0;
}
