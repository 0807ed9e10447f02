/* dir_list — the embedded store's list_each and list_each_skip (store.h): the references to a
 * kind's objects are taken from the index under the store's mutex, then each object is parsed
 * and handed on outside it, one at a time, in list order; a corrupt file is reported in its
 * place (store_unreadable_report) and the list goes on.  An object a label selector does not
 * select is passed over on its blob's labels (blob.h), before skip is asked about it.  A process
 * whose index does not answer (the CLI) reads the kind's files one at a time in the same order:
 * only their names are held, never all the objects.  dir_files_each, the walk of a kind's
 * directory, serves that list and store_list's (dir.c). */
#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "store/dir_int.h"

struct ref {
	const char *ns, *name; /* in key, for the list order */
	char *key;
	struct store_blob *obj; /* NULL: the file is corrupt */
	char *corrupt;          /* then: the error naming it */
	uint64_t rv;
};

static int cmp_refs(const void *a, const void *b)
{
	const struct ref *x = a, *y = b;
	/* namespaces without their '/', as cmp_names compares them ("a" before "a-b") */
	size_t nx = x->name > x->ns ? (size_t)(x->name - x->ns) - 1 : 0;
	size_t ny = y->name > y->ns ? (size_t)(y->name - y->ns) - 1 : 0;
	int c = strncmp(x->ns, y->ns, nx < ny ? nx : ny);
	if (c == 0 && nx != ny)
		c = nx < ny ? -1 : 1;
	return c ? c : strcmp(x->name, y->name);
}

static void refs_free(struct ref *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].key);
		free(v[i].corrupt);
		if (v[i].obj)
			store_blob_put(v[i].obj);
	}
	free(v);
}

/* References to the kind's objects in ns (NULL: all) that selector (optional) may select, with
 * mu held; a corrupt file's reference carries its error instead of an object.  An object whose
 * labels the selector does not select is passed over here, before it is copied or sorted: a
 * list of one agent's volumes costs its own volumes, not every volume's key. */
static int refs_of(struct dir_store *s, const struct store_kind *k, const char *ns,
                   const char *selector, struct ref **out, size_t *n, struct err *e)
{
	char prefix[PATH_MAX];
	int ki = dir_kind_index(k);
	size_t plen = (size_t)snprintf(prefix, sizeof(prefix), "%s/%s/", k->plural, ns ? ns : "");
	size_t cap = 0, skip = strlen(k->plural) + 1;
	struct ref *v = NULL;
	dir_catch_up(s, false);
	*n = 0;
	for (struct index_entry *en = ki >= 0 ? s->kinds[ki] : NULL; en; en = en->knext) {
		if (ns && strncmp(en->key, prefix, plen) != 0)
			continue;
		if (selector && en->obj && store_blob_selects(en->obj, selector) == 0)
			continue;
		if (*n == cap) {
			struct ref *p = realloc(v, (cap = cap ? cap * 2 : 64) * sizeof(*p));
			if (!p) {
				refs_free(v, *n);
				*n = 0; /* the caller frees nothing */
				return err_set(e, -ENOMEM, "list: out of memory");
			}
			v = p;
		}
		struct ref *r = &v[*n];
		r->corrupt = NULL;
		r->obj = NULL;
		if (!(r->key = strdup(en->key)) ||
		    (!en->obj &&
		     !(r->corrupt = strdup(en->corrupt ? en->corrupt : "corrupt record")))) {
			free(r->key);
			refs_free(v, *n);
			*n = 0; /* the caller frees nothing */
			return err_set(e, -ENOMEM, "list: out of memory");
		}
		r->ns = r->key + skip;
		r->name = k->namespaced ? strchr(r->ns, '/') + 1 : r->ns;
		r->obj = en->obj ? store_blob_ref(en->obj) : NULL;
		r->rv = en->rv;
		(*n)++;
	}
	*out = v;
	return 0;
}

/* r's namespace apart from its name into buf (NULL for a cluster-scoped kind). */
static const char *ref_ns(const struct store_kind *k, const struct ref *r, char *buf, size_t cap)
{
	if (!k->namespaced)
		return NULL;
	snprintf(buf, cap, "%.*s", (int)(r->name - r->ns - 1), r->ns);
	return buf;
}

/* A file of the kind's directory: namespace (NULL: cluster-scoped) and name, one allocation. */
struct file_ref {
	const char *ns, *name;
};

struct files {
	struct file_ref *v;
	size_t n, cap;
};

static int cmp_files(const void *a, const void *b)
{
	const struct file_ref *x = a, *y = b;
	int c = strcmp(x->ns ? x->ns : "", y->ns ? y->ns : "");
	return c ? c : strcmp(x->name, y->name);
}

static void files_free(struct files *f)
{
	for (size_t i = 0; i < f->n; i++)
		free((char *)(f->v[i].ns ? f->v[i].ns : f->v[i].name));
	free(f->v);
}

size_t dir_object_name_len(const char *file)
{
	size_t len = strlen(file);
	if (file[0] == '.' || len < 6 || strcmp(file + len - 5, ".json") != 0)
		return 0;
	return len - 5;
}

/* dir_files_each below a namespace's directory when inner: one that cannot be opened (for a
 * reason other than being gone or not a directory) is reported in its place and passed over. */
static int files_each(const struct store_kind *k, const char *dir, const char *ns, bool recurse,
                      bool inner, dir_file_fn fn, void *arg, struct err *e)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int r = 0;
	if (!d) {
		if (errno == ENOENT || (ns && errno == ENOTDIR))
			return 0;
		if (!inner)
			return err_set(e, -errno, "open %s: %s", dir, strerror(errno));
		char msg[PATH_MAX + 64];
		snprintf(msg, sizeof(msg), "namespace %s not listed: open %s: %s", ns, dir,
		         strerror(errno));
		store_unreadable_report(k, ns, "*", msg);
		return 0;
	}
	while (r == 0 && (de = readdir(d)) != NULL) {
		char path[PATH_MAX];
		size_t len = strlen(de->d_name);
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (recurse)
			r = files_each(k, path, de->d_name, false, true, fn, arg, e);
		else if (dir_object_name_len(de->d_name))
			r = fn(arg, path, ns, de->d_name, len, e);
	}
	closedir(d);
	return r;
}

int dir_files_each(const struct store_kind *k, const char *dir, const char *ns, bool recurse,
                   dir_file_fn fn, void *arg, struct err *e)
{
	return files_each(k, dir, ns, recurse, false, fn, arg, e);
}

/* dir_file_fn: notes one object file's namespace and name in the struct files arg. */
static int add_file(void *arg, const char *path, const char *ns, const char *file, size_t len,
                    struct err *e)
{
	struct files *f = arg;
	size_t nl = ns ? strlen(ns) + 1 : 0;
	char *both;
	(void)path;
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 64;
		struct file_ref *p = realloc(f->v, cap * sizeof(*p));
		if (!p)
			return err_set(e, -ENOMEM, "list: out of memory");
		f->v = p;
		f->cap = cap;
	}
	if (!(both = malloc(nl + len - 4)))
		return err_set(e, -ENOMEM, "list: out of memory");
	if (ns)
		memcpy(both, ns, nl);
	snprintf(both + nl, len - 4, "%s", file);
	f->v[f->n++] = (struct file_ref){ns ? both : NULL, both + nl};
	return 0;
}

/* The list of a process whose index does not answer: each file read, parsed and handed on in
 * turn; a file that cannot be read is reported in its place (store.h). */
static int files_walk(struct dir_store *s, const struct store_kind *k, const char *ns,
                      const char *selector, store_skip_fn skip, store_each_fn fn, void *arg,
                      uint64_t *list_rv, struct err *e)
{
	struct files f = {0};
	char dir[PATH_MAX];
	uint64_t rv = 0;
	int r, n;
	ns = k->namespaced ? ns : NULL;
	n = ns ? snprintf(dir, sizeof(dir), "%s/%s/%s", s->path, k->plural, ns)
	       : snprintf(dir, sizeof(dir), "%s/%s", s->path, k->plural);
	if (n < 0 || (size_t)n >= sizeof(dir))
		return err_set(e, -ENAMETOOLONG, "path too long");
	pthread_mutex_lock(&s->mu);
	r = dir_rv_last(s, &rv, e); /* before reading: no event is missed */
	pthread_mutex_unlock(&s->mu);
	if (r == 0)
		r = dir_files_each(k, dir, ns, k->namespaced && !ns, add_file, &f, e);
	if (r == 0 && f.n > 1)
		qsort(f.v, f.n, sizeof(*f.v), cmp_files);
	for (size_t i = 0; i < f.n && r == 0; i++) {
		char path[PATH_MAX * 2];
		cJSON *o = NULL;
		struct err oe = {0};
		snprintf(path, sizeof(path), "%s/%s/%s%s%s.json", s->path, k->plural,
		         f.v[i].ns ? f.v[i].ns : "", f.v[i].ns ? "/" : "", f.v[i].name);
		int rr = json_read_file(path, &o, &oe);
		if (rr == -ENOENT) /* deleted meanwhile */
			continue;
		if (rr == -ENOMEM)
			r = err_set(e, rr, "%s", oe.msg);
		else if (rr < 0) /* this object's own error */
			store_unreadable_report(k, f.v[i].ns, f.v[i].name, oe.msg);
		else if (store_selector_match(selector, o, NULL) == 1 &&
		         !(skip && skip(f.v[i].ns, f.v[i].name, store_meta_rv(o), arg)))
			r = fn(o, arg);
		cJSON_Delete(o);
	}
	files_free(&f);
	if (r == 0 && list_rv)
		*list_rv = rv;
	return r;
}

/* The objects of a list in order; those skip (optional) skips are not parsed. */
static int d_walk(store *st, const struct store_kind *k, const char *ns, const char *selector,
                  store_skip_fn skip, store_each_fn fn, void *arg, uint64_t *list_rv, struct err *e)
{
	struct dir_store *s = DS(st);
	struct ref *v = NULL;
	size_t n = 0;
	uint64_t rv;
	int r;
	if (ns && (r = store_validate_name("namespace", ns, e)) < 0)
		return r;
	if ((r = store_selector_match(selector, NULL, e)) < 0)
		return r;
	pthread_mutex_lock(&s->mu);
	if (!dir_live(s)) {
		pthread_mutex_unlock(&s->mu);
		return files_walk(s, k, ns, selector, skip, fn, arg, list_rv, e);
	}
	r = refs_of(s, k, k->namespaced ? ns : NULL, selector, &v, &n, e);
	rv = s->index_rv;
	pthread_mutex_unlock(&s->mu);
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_refs);
	for (size_t i = 0; i < n && r == 0; i++) {
		cJSON *o = NULL;
		char nsb[PATH_MAX];
		const char *ons = ref_ns(k, &v[i], nsb, sizeof(nsb));
		if (!v[i].obj) {
			store_unreadable_report(k, ons, v[i].name, v[i].corrupt);
			continue;
		}
		if (skip && skip(ons, v[i].name, v[i].rv, arg))
			continue;
		if ((r = store_blob_parse(v[i].obj, &o, e)) == 0 &&
		    store_selector_match(selector, o, NULL) == 1)
			r = fn(o, arg);
		cJSON_Delete(o);
	}
	refs_free(v, n);
	if (r == 0 && list_rv)
		*list_rv = rv;
	return r;
}

int dir_list_each(store *st, const struct store_kind *k, const char *ns, const char *selector,
                  store_each_fn fn, void *arg, uint64_t *list_rv, struct err *e)
{
	return d_walk(st, k, ns, selector, NULL, fn, arg, list_rv, e);
}

/* store_list_each_skip as the caches answer it: skip is asked about every object (before the
 * selector), and only the objects it does not skip are parsed. */
int dir_list_each_skip(store *st, const struct store_kind *k, const char *ns, const char *selector,
                       store_skip_fn skip, store_each_fn fn, void *arg, uint64_t *list_rv,
                       struct err *e)
{
	return d_walk(st, k, ns, selector, skip, fn, arg, list_rv, e);
}
