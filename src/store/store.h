/* store — objects with Kubernetes API semantics, behind one interface.
 *
 * Objects are cJSON documents shaped like Kubernetes objects (apiVersion, kind, metadata{name,
 * namespace, uid, resourceVersion, generation, labels, annotations, finalizers,
 * creationTimestamp, deletionTimestamp}, spec, status).  The controller and the node role use
 * this interface; in a cluster it is backed by the API server (store_kube_open), without one
 * by the embedded directory store (store_dir_open).  spec/standalone.md is the contract.
 *
 * Errors are negative errnos with the Kubernetes reason (store_reason()):
 *   STORE_NOT_FOUND -ENOENT "NotFound", STORE_ALREADY_EXISTS -EEXIST "AlreadyExists",
 *   STORE_CONFLICT -ESTALE "Conflict", STORE_INVALID -EINVAL "Invalid",
 *   STORE_EXPIRED -ERANGE "Expired" (watch from a version that is no longer retained: relist);
 *   anything else is "InternalError" (corrupt file, I/O).
 * Every returned object is a new cJSON tree owned by the caller (cJSON_Delete).
 */
#ifndef PILLAR_STORE_STORE_H
#define PILLAR_STORE_STORE_H

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

struct kube_client; /* kube/client.h */

#define STORE_NOT_FOUND      (-ENOENT)
#define STORE_ALREADY_EXISTS (-EEXIST)
#define STORE_CONFLICT       (-ESTALE)
#define STORE_INVALID        (-EINVAL)
#define STORE_EXPIRED        (-ERANGE)

/* "NotFound", "AlreadyExists", "Conflict", "Invalid", "Expired", "InternalError" ("" for 0). */
const char *store_reason(int code);

/* ---- kinds ----------------------------------------------------------------------------------- */

struct store_kind {
	const char *kind;        /* PillarVolumeState */
	const char *api_version; /* pillar-csi.bhyoo.com/v1alpha1 */
	const char *plural;      /* pillarvolumestates: the directory name */
	const char *singular;    /* pillarvolumestate */
	const char *short_name;  /* pvst, or NULL */
	bool namespaced;
	bool status_subresource;
};

/* By kind ("PillarAgent"), plural, singular or short name, case-insensitively; NULL if unknown. */
const struct store_kind *store_kind_lookup(const char *name);
/* The known kinds, NULL-terminated. */
const struct store_kind *const *store_kinds(void);

/* ---- the interface --------------------------------------------------------------------------- */

typedef struct store store;
typedef struct store_watch store_watch;

enum store_event_type { STORE_ADDED = 1, STORE_MODIFIED = 2, STORE_DELETED = 3 };

/* Called by store_list_each for each object (borrowed: valid during the call); 0 goes on, a
 * negative errno stops the list and is returned. */
typedef int (*store_each_fn)(cJSON *obj, void *arg);
/* Called by store_list_each_kept for each object (borrowed, as by store_each_fn) with a JSON
 * text of the same value: len bytes that fn may change in place (store_blob_of_text), or NULL
 * when the store has none. */
typedef int (*store_kept_fn)(cJSON *obj, char *text, size_t len, void *arg);
/* Asked by store_list_each_skip for each object before it is parsed: its namespace (NULL for a
 * cluster-scoped kind), name and resourceVersion; true skips it (not parsed, not handed on). */
typedef bool (*store_skip_fn)(const char *ns, const char *name, uint64_t rv, void *arg);

struct store_ops {
	int (*get)(store *s, const struct store_kind *k, const char *ns, const char *name,
	           cJSON **out, struct err *e);
	int (*list)(store *s, const struct store_kind *k, const char *ns, const char *selector,
	            cJSON **items, uint64_t *list_rv, struct err *e);
	/* optional (NULL: store_list_each lists, then walks the array) */
	int (*list_each)(store *s, const struct store_kind *k, const char *ns, const char *selector,
	                 store_each_fn fn, void *arg, uint64_t *list_rv, struct err *e);
	/* optional (NULL: list_each or list_each_any, texts NULL): store_list_each_kept */
	int (*list_each_kept)(store *s, const struct store_kind *k, bool any, store_kept_fn fn,
	                      void *arg, uint64_t *list_rv, struct err *e);
	/* optional (NULL: list_each): store_list_each_any */
	int (*list_each_any)(store *s, const struct store_kind *k, const char *ns,
	                     const char *selector, store_each_fn fn, void *arg, uint64_t *list_rv,
	                     struct err *e);
	/* optional (NULL: store_list_each_skip asks about each object listed) */
	int (*list_each_skip)(store *s, const struct store_kind *k, const char *ns,
	                      const char *selector, store_skip_fn skip, store_each_fn fn, void *arg,
	                      uint64_t *list_rv, struct err *e);
	int (*create)(store *s, const cJSON *obj, cJSON **out, struct err *e);
	int (*update)(store *s, const cJSON *obj, cJSON **out, struct err *e);
	int (*update_status)(store *s, const cJSON *obj, cJSON **out, struct err *e);
	/* optional (NULL: store_create_with_status / store_update_with_status make two calls):
	 * create (create true) or update obj with its status, in one write */
	int (*write_all)(store *s, const cJSON *obj, bool create, cJSON **out, struct err *e);
	int (*remove)(store *s, const struct store_kind *k, const char *ns, const char *name,
	              const char *uid_precondition, const char *rv_precondition, struct err *e);
	int (*watch)(store *s, const struct store_kind *k, uint64_t from_rv, store_watch **w,
	             struct err *e);
	int (*watch_next)(store_watch *w, int timeout_ms, enum store_event_type *type, cJSON **obj,
	                  struct err *e);
	void (*watch_close)(store_watch *w);
	void (*close)(store *s);
	/* optional (NULL: nothing to check): what a list answered from memory cannot tell */
	int (*health)(store *s, struct err *e);
};

/* What every implementation's store and watch begin with. */
struct store {
	const struct store_ops *ops;
};
struct store_watch {
	const struct store_ops *ops;
};

/* Thin wrappers over ops.  ns is NULL for cluster-scoped kinds.  list returns a JSON array of
 * objects (sorted by name) and the store's resourceVersion at the time of the list; selector is
 * a Kubernetes equality-based label selector (`k=v`, `k==v`, `k!=v`, `k`, `!k`, comma = and) or
 * NULL.  create sets uid, resourceVersion, generation 1 and creationTimestamp.  update replaces
 * the whole object except status (status subresource); a spec change bumps generation; a set
 * metadata.resourceVersion must match (Conflict).  update_status replaces only status.  remove
 * with finalizers present sets deletionTimestamp; the object goes when its last finalizer is
 * removed by an update.  watch delivers events after from_rv (0: the current objects as ADDED,
 * then changes). */
int store_get(store *s, const struct store_kind *k, const char *ns, const char *name, cJSON **out,
              struct err *e);
int store_list(store *s, const struct store_kind *k, const char *ns, const char *selector,
               cJSON **items, uint64_t *list_rv, struct err *e);
/* store_list's objects one at a time, in the same order, without holding them all: a store
 * that keeps objects compact (the caches) hands each to fn as a tree of its own, freed after
 * fn returns; the kube store hands out each page's objects as the page arrives (one page held
 * at a time).  A list the store could not finish consistently (the kube store's continue token
 * expired between pages: the version was compacted meanwhile) returns STORE_EXPIRED after fn
 * saw part of it: the caller drops what it made of those and lists again.  0, a store error,
 * or fn's error. */
int store_list_each(store *s, const struct store_kind *k, const char *ns, const char *selector,
                    store_each_fn fn, void *arg, uint64_t *list_rv, struct err *e);
/* store_list_each where an answer of any freshness will do: the kube store asks the API server
 * for resourceVersion=0, which kube-apiserver answers from its watch cache, in memory and in one
 * answer (client-go's reflector's first list), holding every object as of a version the server
 * has seen, possibly older than a write just made through another server; a watch from the
 * list's version brings what came after.  For an informer's first list, never for a read that
 * must see a write (a read after a write, a relist after STORE_EXPIRED: store_list_each).  The
 * other stores list as store_list_each. */
int store_list_each_any(store *s, const struct store_kind *k, const char *ns, const char *selector,
                        store_each_fn fn, void *arg, uint64_t *list_rv, struct err *e);
/* Every object of the kind, as a cache keeps them (store_cache_open): store_list_each (any:
 * store_list_each_any) handing fn each object with its text where the store reads objects as
 * text (the kube store), which may also leave out metadata.managedFields as it reads them (the
 * API server's field owners, which no cache keeps: never parsed, never allocated); the other
 * stores hand text NULL and the objects as they are. */
int store_list_each_kept(store *s, const struct store_kind *k, bool any, store_kept_fn fn,
                         void *arg, uint64_t *list_rv, struct err *e);
/* store_list_each, asking skip first: a caller that kept what it made of an object's version
 * does not pay for parsing it again.  A store that keeps objects compact (the caches, the
 * embedded store) asks about every object the selector selects (by the labels it keeps beside
 * each object's text: unselected objects are never parsed), with its lock held in a cache (skip
 * must not call the store), and parses only the objects not skipped (then applies the selector
 * to any whose labels it did not know); the others ask about each object the selector matches.
 * 0, a store error, or fn's error. */
int store_list_each_skip(store *s, const struct store_kind *k, const char *ns, const char *selector,
                         store_skip_fn skip, store_each_fn fn, void *arg, uint64_t *list_rv,
                         struct err *e);
/* store_list_each by store_list and a walk of the array (for implementations). */
int store_list_walk(store *s, const struct store_kind *k, const char *ns, const char *selector,
                    store_each_fn fn, void *arg, uint64_t *list_rv, struct err *e);
/* store_list_walk asking skip (NULL: none) about each object listed first. */
int store_list_walk_skip(store *s, const struct store_kind *k, const char *ns, const char *selector,
                         store_skip_fn skip, store_each_fn fn, void *arg, uint64_t *list_rv,
                         struct err *e);
int store_create(store *s, const cJSON *obj, cJSON **out, struct err *e);
int store_update(store *s, const cJSON *obj, cJSON **out, struct err *e);
int store_update_status(store *s, const cJSON *obj, cJSON **out, struct err *e);
/* A create, or an update, that also writes obj's status: one durable write where the store can
 * (the embedded store), so a crash leaves either the old object or all of obj.  Where a
 * status subresource makes it two requests (the API server), create then update_status, or
 * update_status then update (metadata and spec), each on the version the first returned — the
 * order the two separate calls have always been made in; a failed second call returns its
 * error with the first one written.  *out (optional): the final object. */
int store_create_with_status(store *s, const cJSON *obj, cJSON **out, struct err *e);
int store_update_with_status(store *s, const cJSON *obj, cJSON **out, struct err *e);
/* Lazy writes (the calling thread's setting, default false; returns the previous one): while on,
 * an update on this thread may be acknowledged before it is durable.  The embedded store makes
 * such a write of an object it wrote durably since its journal's last checkpoint began a lazy
 * journal entry (base/journal.h journal_append_lazy): applied, published and returned at once,
 * durable with the next durable write of the process (any object's), or at the latest
 * STORE_LAZY_MS later; a power cut before then leaves the object exactly as its previous
 * version (the journal replays that one), never a torn one.  Any other write on the thread
 * (a create, a delete, an object whose last durable entry was checkpointed meanwhile) is
 * durable as usual.  Meanwhile the process keeps the store's operation lock: another process's
 * write waits up to STORE_LAZY_MS.  The API server's store and the caches (which write through
 * on the same thread) ignore the setting: each write is durable when it returns.  A caller
 * turns it on only for a write whose loss after a power cut it can recover from. */
#define STORE_LAZY_MS 100
bool store_write_lazy(bool on);
int store_delete(store *s, const struct store_kind *k, const char *ns, const char *name,
                 const char *uid_precondition, const char *rv_precondition, struct err *e);
int store_watch_open(store *s, const struct store_kind *k, uint64_t from_rv, store_watch **w,
                     struct err *e);
void store_close(store *s); /* NULL is a no-op */
/* What the store's own answers cannot show (csi.md §1.1, the controller's readiness): for the
 * embedded store, that its directory is readable and writable by this process (a removed
 * directory, a read-only filesystem, or, for a process that is not root, its permissions) and,
 * for the owner, that this process still holds the lock on the .lock file now at PATH/.lock
 * (not on one since removed or replaced).  A few system calls on the directory, no object
 * read; meant for a thread of its own, not a call path.  0, or a negative errno with e naming
 * what is wrong; 0 for a store with nothing to check (the API server's list is its check). */
int store_health(store *s, struct err *e);

/* Waits up to timeout_ms for the next event.  Returns 1 with *type and *obj (caller owns), 0 on
 * timeout, STORE_EXPIRED when events were lost (relist and watch again), or another negative
 * errno.  store_watch_close(NULL) is a no-op; closing wakes a waiter in another thread. */
int store_watch_next(store_watch *w, int timeout_ms, enum store_event_type *type, cJSON **obj,
                     struct err *e);
void store_watch_close(store_watch *w);

/* ---- unreadable objects ----------------------------------------------------------------------
 *
 * A list yields every object it can read.  An object it cannot read — a corrupt or unreadable
 * file of the embedded store (whatever the selector: its labels cannot be read either), an
 * object the model's codec cannot decode (model.h) — is left out of the list and reported to
 * the receiver the calling thread set, or, with none set, logged as a warning.  The error is
 * that object's own: a get of it fails with the same message, the other objects are listed.
 * A receiver is called during the list, possibly with the store's lock held: it must not call
 * the store. */
typedef void (*store_unreadable_fn)(void *arg, const struct store_kind *k, const char *ns,
                                    const char *name, const char *error);
struct store_unreadable {
	store_unreadable_fn fn; /* NULL: none (log) */
	void *arg;
};
/* Sets the calling thread's receiver to *set (NULL: none); *prev (optional) gets the one
 * before, to be set again when the caller is done. */
void store_unreadable_catch(const struct store_unreadable *set, struct store_unreadable *prev);
/* Reports one unreadable object (ns NULL when cluster-scoped; error names it, e.g. its file).
 * name "*": the whole namespace ns could not be read (a process without the embedded store's
 * index found its directory unopenable); its objects are not in the list. */
void store_unreadable_report(const struct store_kind *k, const char *ns, const char *name,
                             const char *error);

/* ---- helpers shared by implementations and callers ------------------------------------------ */

/* Validates a Kubernetes object name (DNS subdomain: lowercase alphanumerics, '-' and '.', at
 * most 253 characters, starting and ending alphanumeric).  0 or STORE_INVALID with a message. */
int store_validate_name(const char *what, const char *name, struct err *e);

/* 1 when the object's labels match the selector, 0 when not, STORE_INVALID on a bad selector. */
int store_selector_match(const char *selector, const cJSON *obj, struct err *e);

/* store_selector_match on an object's metadata.labels given as cJSON's compact text of that
 * value (as json_dump prints it; labels NULL: the object has none).  1, 0, or STORE_INVALID. */
int store_selector_match_text(const char *selector, const char *labels, size_t len, struct err *e);

/* metadata.<field> string of obj, or NULL. */
const char *store_meta_str(const cJSON *obj, const char *field);
/* metadata.resourceVersion as a number (0 when absent or not a decimal string). */
uint64_t store_meta_rv(const cJSON *obj);

/* The kind of obj from its "kind" field, with apiVersion checked; NULL and STORE_INVALID. */
const struct store_kind *store_kind_of(const cJSON *obj, struct err *e);

/* RFC 3339 UTC timestamp of now, e.g. 2026-12-02T14:41:09Z, into buf (at least 21 bytes). */
void store_timestamp(char *buf, size_t cap);

/* ---- the embedded implementation -------------------------------------------------------------- */

/* Opens (creating) the directory store at path.  With owner true the caller becomes the one
 * controller that owns it: an exclusive flock on PATH/.lock held until store_close, failing with
 * -EBUSY and "store PATH is in use by another controller (pid N)"; the owner keeps every object
 * in memory, so get, list and writes cost the same with 10 or 10,000 objects (a process without
 * an index — the CLI, the node role — reads files; its first watch builds one).  Changes made
 * by other processes reach the index and watches through inotify; only when inotify is out of
 * instances or watches does the store rescan the directory every poll_ms (0: 1 s). */
int store_dir_open(const char *path, bool owner, int poll_ms, store **out, struct err *e);
/* True when st is the embedded store and a power cut, or a process killed with lazy writes
 * queued, may have taken lazy writes (store_write_lazy) acknowledged before it: the first
 * process to take the store's lock after the cut found the journal of another boot with entries
 * pending, and noted it in PATH/.lazy-lost (durably, before that journal was retired); or, in
 * the same boot, found the killed holder's lazy flag (dir_journal.c) and entries to apply again.
 * The note stays, across restarts, until
 * store_dir_lazy_recovered removes it: the owner calls that once it has recovered whatever
 * its lazy writes recorded. */
bool store_dir_lazy_lost(store *st);
void store_dir_lazy_recovered(store *st);
/* Makes this process's lazy writes to the embedded store st durable now (one fdatasync, none
 * when nothing is queued): for a caller about to act on what a lazy write recorded in a way a
 * power cut could not take back.  0 at once for any other store; else 0 or the journal's error. */
int store_dir_flush(store *st, struct err *e);

/* ---- opening a store ------------------------------------------------------------------------- */

/* What a role passes along with its --store flag. */
struct store_open_opts {
	const char *kubeconfig; /* --kubeconfig: kube store; NULL: the in-cluster configuration */
	const char
	    *component; /* User-Agent product, e.g. "pillar-csi-controller"; NULL: "pillar-csi" */
	double qps;     /* --kube-api-qps; 0: KUBE_DEFAULT_QPS (5); < 0: unlimited */
	int burst;      /* --kube-api-burst; 0: KUBE_DEFAULT_BURST (10) */
	int list_page;  /* kube: objects per list request; 0: 500 (tests use less) */
	int watch_secs; /* kube: timeoutSeconds of each watch stream; 0: 300 */
	const char *context; /* kube: the kubeconfig's context to use; NULL: its current-context */
};

/* Opens the store named by a --store flag value: "dir:PATH" (the embedded store; owner as for
 * store_dir_open) or "kube" (the Kubernetes API: store_kube_open).  NULL or "" chooses "kube"
 * when KUBERNETES_SERVICE_HOST is set (standalone.md) and is an error otherwise.  o may be NULL
 * (defaults).  0, or a negative errno with the reason in e. */
int store_open(const char *url, bool owner, const struct store_open_opts *o, store **out,
               struct err *e);
/* store_open with default options. */
int store_open_url(const char *url, bool owner, store **out, struct err *e);

/* The API server as the store (store/kube.c): the kubeconfig at o->kubeconfig or the
 * in-cluster configuration (kube/config.h), one client connection, o's rate limits.  Each
 * get/create/update/delete is one API request, list is one per 500 objects (limit/continue,
 * store_list_each holding one page at a time); watches resume
 * across the server's stream ends.  Errors carry the server's Kubernetes reason and message;
 * names and label selectors are checked locally first with the dir store's messages.
 * Unconditional updates (no metadata.resourceVersion) read the current version and retry on
 * Conflict. */
int store_kube_open(const struct store_open_opts *o, store **out, struct err *e);
/* ---- watch-fed caches ------------------------------------------------------------------------- */

/* A store that answers get and list from memory, as client-go's informers do: one thread per
 * kind of kinds (NULL-terminated; NULL: every kind) lists the kind once from backing, then
 * follows its watch (relisting only when the watch says STORE_EXPIRED), so reading the cache
 * costs no request to backing.  Reads are cached only on threads that called
 * store_cache_thread_reads(true) (the controller's reconcilers); every other thread reads
 * through to backing, so the CSI handlers keep their uncached reads (crds.md §7.5).  A cached
 * read waits for its kind's first list while that list is being taken, as client-go's
 * controllers wait for their caches to sync, and reads through while the kind's attempts to
 * list fail (until one succeeds); a get of a name the cache does not hold asks
 * backing (the answer and its NotFound message are backing's).  Writes go to backing; a
 * write's result enters the cache at once (a later event never replaces a newer version; a
 * result with a deletionTimestamp and no finalizer left is the object's deletion).  A watch of
 * a cached kind is served from that kind's informer (backing sees one watch per kind): the
 * events after from_rv among the last 512 received (older: STORE_EXPIRED, relist), or from 0
 * the cached objects as ADDED first; an event comes after the cache absorbed it.  Objects are
 * kept as compact text.  On success the cache owns backing (store_close closes both).  0, or
 * -ENOMEM / -EAGAIN with e. */
int store_cache_open(store *backing, const struct store_kind *const *kinds, store **out,
                     struct err *e);
/* Whether get/list on the calling thread are served from caches (default false); returns the
 * previous setting. */
bool store_cache_thread_reads(bool on);

/* Whether a list on the calling thread (one that reads cached) of a whole cached kind (no
 * namespace, no selector), made while the kind's first list is being taken, joins that list
 * (default false): fn is handed each object as the informer receives it, from the informer's
 * own parse (the objects received before it joined first, from the cache), on the informer's
 * thread while the calling thread waits (with its receiver of unreadable objects), instead of
 * after the whole list, each object parsed again.  fn must not call the store.  A list the
 * informer had to take again (it expired) returns STORE_EXPIRED; one that failed, its error:
 * the caller lists again.  Returns the previous setting. */
bool store_cache_thread_joins(bool on);

struct store_cache_stats {
	unsigned long lists;         /* lists of backing (each kind's first, and relists) */
	unsigned long events;        /* watch events absorbed */
	unsigned long hits;          /* gets and lists answered from memory */
	unsigned long relist_shared; /* listed objects a relist took over from the old map */
};
void store_cache_stats(store *cache, struct store_cache_stats *out);

/* true when st is a kube store. */
bool store_is_kube(const store *st);
/* The API client of a kube store, NULL for any other store: Leases, Events and patches the
 * store interface does not carry go over the store's one connection. */
struct kube_client *store_kube_client(store *st);

#endif
