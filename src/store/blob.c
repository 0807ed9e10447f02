/* store/blob — compact, reference-counted object texts (blob.h). */
#include "store/blob.h"

#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "store/store.h"

static struct store_blob *make(const char *text, size_t len, bool checked, bool long_integers)
{
	struct store_blob *b = malloc(sizeof(*b) + len + 1);
	if (!b)
		return NULL;
	atomic_init(&b->refs, 1);
	b->checked = checked;
	b->long_integers = long_integers;
	b->labels = BLOB_LABELS_UNKNOWN;
	b->labels_at = b->labels_len = 0;
	b->len = len;
	memcpy(b->text, text, len);
	b->text[len] = '\0';
	return b;
}

struct store_blob *store_blob_new(const char *text, size_t len)
{
	return make(text, len, json_text_checked(text, len), json_text_long_integers(text, len));
}

/* Where obj's labels stand in b's text: the same printer prints them the same bytes, and any
 * place those bytes stand is that same value. */
static void find_labels(struct store_blob *b, const cJSON *obj)
{
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "labels");
	if (!labels) {
		b->labels = BLOB_LABELS_NONE;
		return;
	}
	char *text = json_dump(labels);
	size_t n = text ? strlen(text) : 0;
	const char *at = text ? memmem(b->text, b->len, text, n) : NULL;
	if (at && n <= UINT32_MAX && b->len <= UINT32_MAX) {
		b->labels = BLOB_LABELS_AT;
		b->labels_at = (uint32_t)(at - b->text);
		b->labels_len = (uint32_t)n;
	}
	free(text);
}

static struct store_blob *of(const cJSON *obj, bool parsed)
{
	char *text = json_dump(obj); /* exact integers (base/json.h) */
	size_t len = text ? strlen(text) : 0;
	struct store_blob *b =
	    text ? make(text, len, parsed || json_text_checked(text, len), json_long_integers(obj))
	         : NULL;
	free(text);
	if (b)
		find_labels(b, obj);
	return b;
}

struct store_blob *store_blob_of(const cJSON *obj)
{
	return of(obj, false);
}

struct store_blob *store_blob_of_parsed(const cJSON *obj)
{
	return of(obj, true);
}

struct store_blob *store_blob_of_kept(cJSON *obj)
{
	cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata"), *mf = NULL, *prev = NULL;
	for (cJSON *it = cJSON_IsObject(md) ? md->child : NULL; it; prev = it, it = it->next)
		if (it->string && !strcmp(it->string, "managedFields")) {
			mf = cJSON_DetachItemViaPointer(md, it);
			break;
		}
	struct store_blob *b = store_blob_of(obj);
	if (!mf)
		return b;
	/* cJSON's lists: next ends with NULL, the first item's prev is the last item */
	if (!prev) {
		mf->next = md->child;
		mf->prev = md->child ? md->child->prev : mf;
		if (md->child)
			md->child->prev = mf;
		md->child = mf;
	} else {
		mf->next = prev->next;
		mf->prev = prev;
		if (prev->next)
			prev->next->prev = mf;
		else
			md->child->prev = mf;
		prev->next = mf;
	}
	return b;
}

/* Removes the whitespace between the tokens of valid JSON text in place (nothing inside its
 * strings, where an escaped quote does not end one); the new length. */
static size_t compact(char *text, size_t len)
{
	size_t out = 0;
	bool in_string = false;
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (in_string) {
			text[out++] = c;
			if (c == '\\' && i + 1 < len)
				text[out++] = text[++i];
			else if (c == '"')
				in_string = false;
		} else if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			in_string = c == '"';
			text[out++] = c;
		}
	}
	return out;
}

struct store_blob *store_blob_of_text(char *text, size_t len, const cJSON *obj)
{
	len = compact(text, len);
	/* json_parse_strict passed the text: removing whitespace between tokens keeps it passing
	 * json_text_checked; its integers are obj's */
	struct store_blob *b = make(text, len, true, json_long_integers(obj));
	if (b)
		find_labels(b, obj);
	return b;
}

struct store_blob *store_blob_of_listed(cJSON *obj, char *text, size_t len)
{
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	if (!text || cJSON_GetObjectItemCaseSensitive(md, "managedFields"))
		return store_blob_of_kept(obj);
	return store_blob_of_text(text, len, obj);
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
	if (b->checked)
		return json_parse_checked(b->text, b->len, b->long_integers, out, e);
	return json_parse_strict(b->text, b->len, out, e);
}

int store_blob_selects(const struct store_blob *b, const char *selector)
{
	if (b->labels == BLOB_LABELS_UNKNOWN)
		return -1;
	int r = store_selector_match_text(
	    selector, b->labels == BLOB_LABELS_AT ? b->text + b->labels_at : NULL, b->labels_len,
	    NULL);
	return r < 0 ? -1 : r;
}
