/* store/blob — compact, reference-counted object texts (blob.h). */
#include "store/blob.h"

#include <stdlib.h>
#include <string.h>

#include "base/json.h"

struct store_blob *store_blob_new(const char *text, size_t len)
{
	struct store_blob *b = malloc(sizeof(*b) + len + 1);
	if (!b)
		return NULL;
	atomic_init(&b->refs, 1);
	b->len = len;
	memcpy(b->text, text, len);
	b->text[len] = '\0';
	return b;
}

struct store_blob *store_blob_of(const cJSON *obj)
{
	char *text = json_dump(obj); /* exact integers (base/json.h) */
	struct store_blob *b = text ? store_blob_new(text, strlen(text)) : NULL;
	free(text);
	return b;
}

struct store_blob *store_blob_ref(struct store_blob *b)
{
	if (b)
		atomic_fetch_add(&b->refs, 1);
	return b;
}

void store_blob_put(struct store_blob *b)
{
	if (b && atomic_fetch_sub(&b->refs, 1) == 1)
		free(b);
}

int store_blob_parse(const struct store_blob *b, cJSON **out, struct err *e)
{
	return json_parse_strict(b->text, b->len, out, e);
}
