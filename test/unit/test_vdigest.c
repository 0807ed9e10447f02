/* The loop's table of volume digests (controller/vdigest.h): a resync is queued only when a
 * volume's exportSpec or publishedNodes changed, the table follows deletions and relists, and
 * it keeps working past its first bucket count (it grows); a volume whose recorded confirmed
 * digest is not its own is unconfirmed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/vdigest.h"
#include "testutil.h"

static void vol(struct model_pvst *v, int port, const char *node)
{
	memset(v, 0, sizeof(*v));
	v->status.has_export_spec = v->status.export_spec.has_port = true;
	v->status.export_spec.port = port;
	if (node) {
		v->status.has_published = true;
		v->status.n_published = 1;
		v->status.published = calloc(1, sizeof(*v->status.published));
		ck_assert_ptr_nonnull(v->status.published);
		v->status.published[0].node_id = (char *)node;
	}
}

static void unvol(struct model_pvst *v)
{
	free(v->status.published);
}

START_TEST(test_changes)
{
	struct vdigests t = {0};
	struct model_pvst a, b, c;
	vol(&a, 4420, NULL);
	vol(&b, 4420, "node-a");
	vol(&c, 4421, NULL);
	ck_assert(vdigests_update(&t, "v1", &a));  /* new */
	ck_assert(!vdigests_update(&t, "v1", &a)); /* unchanged */
	ck_assert(vdigests_update(&t, "v1", &b));  /* published */
	ck_assert(vdigests_update(&t, "v1", &a));  /* unpublished */
	ck_assert(vdigests_update(&t, "v1", &c));  /* another port */
	ck_assert(vdigests_update(&t, "v2", &c));  /* another volume: its own entry */
	ck_assert(!vdigests_update(&t, "v1", &c));
	vdigests_drop(&t, "v1");
	ck_assert_uint_eq(t.n, 1);
	ck_assert(vdigests_update(&t, "v1", &c)); /* dropped: new again */
	/* a relist that lists v2 only forgets v1 */
	vdigests_unsee(&t);
	ck_assert(!vdigests_update(&t, "v2", &c));
	vdigests_drop_unseen(&t);
	ck_assert_uint_eq(t.n, 1);
	ck_assert(vdigests_update(&t, "v1", &c));
	vdigests_free(&t);
	ck_assert_uint_eq(t.n, 0);
	vdigests_free(&t); /* empty: nothing */
	vdigests_free(NULL);
	unvol(&a);
	unvol(&b);
	unvol(&c);
}
END_TEST

START_TEST(test_many)
{
	struct vdigests t = {0};
	struct model_pvst a, b;
	char name[32];
	vol(&a, 4420, NULL);
	vol(&b, 4420, "node-b");
	for (int i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "pvc-%d", i);
		ck_assert(vdigests_update(&t, name, &a));
	}
	ck_assert_uint_eq(t.n, 5000);
	ck_assert_uint_ge(t.nb, 5000); /* grown: chains stay short */
	for (int i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "pvc-%d", i);
		ck_assert(!vdigests_update(&t, name, &a));
		ck_assert(vdigests_update(&t, name, i % 2 ? &b : &a) == (i % 2 == 1));
	}
	for (int i = 0; i < 5000; i += 2) {
		snprintf(name, sizeof(name), "pvc-%d", i);
		vdigests_drop(&t, name);
	}
	ck_assert_uint_eq(t.n, 2500);
	vdigests_free(&t);
	unvol(&a);
	unvol(&b);
}
END_TEST

/* status.reconciledDigest: a volume is unconfirmed only when it records another digest than its
 * own; none recorded is no resync (its CreateVolume built the export). */
START_TEST(test_unconfirmed)
{
	struct model_pvst a, b;
	char text[VDIGEST_TEXT];
	vol(&a, 4420, NULL);
	vol(&b, 4420, "node-a");
	ck_assert(!vdigest_unconfirmed(&a)); /* none recorded */
	vdigest_text(vdigest_of(&a), text);
	ck_assert_uint_eq(strlen(text), 16);
	ck_assert_uint_eq(strspn(text, "0123456789abcdef"), 16);
	a.status.reconciled_digest = b.status.reconciled_digest = text;
	ck_assert(!vdigest_unconfirmed(&a)); /* confirmed */
	ck_assert(vdigest_unconfirmed(&b));  /* published since */
	b.status.reconciled_digest = "not a digest";
	ck_assert(vdigest_unconfirmed(&b));
	ck_assert_uint_ne(vdigest_of(&a), vdigest_of(&b));
	unvol(&a);
	unvol(&b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("vdigest");
	TCase *t = tcase_create("vdigest");
	tcase_add_test(t, test_changes);
	tcase_add_test(t, test_many);
	tcase_add_test(t, test_unconfirmed);
	suite_add_tcase(s, t);
	return tu_run(s);
}
