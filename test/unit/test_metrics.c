/* The metrics registry (src/metrics): exposition format, histograms, bounded label sets,
 * concurrent updates and the process families. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics.h"
#include "testutil.h"

static const char *const two_labels[] = {"agent", "state", NULL};
static const char *const one_label[] = {"name", NULL};
static const double small_buckets[] = {0.1, 1, 10, -1};

static char *render(struct metrics_family *f)
{
	struct metrics_text t = {0};
	metrics_write_family(&t, f);
	ck_assert(!t.failed);
	return t.buf;
}

START_TEST(test_counter_text)
{
	static struct metrics_family f = METRICS_FAMILY("test_things_total", "Things done.",
	                                                METRICS_COUNTER, two_labels, NULL, 4);
	metrics_inc(&f, (const char *[]){"a1", "up"}, 2);
	metrics_inc(&f, (const char *[]){"a1", "up"}, 3);
	metrics_inc(&f, (const char *[]){"q\"\\\nx", "down"}, 1);
	char *s = render(&f);
	ck_assert_str_eq(s, "# HELP test_things_total Things done.\n"
	                    "# TYPE test_things_total counter\n"
	                    "test_things_total{agent=\"a1\",state=\"up\"} 5\n"
	                    "test_things_total{agent=\"q\\\"\\\\\\nx\",state=\"down\"} 1\n");
	free(s);
	metrics_family_reset(&f);
}
END_TEST

START_TEST(test_unlabelled_gauge_always_written)
{
	static struct metrics_family f =
	    METRICS_FAMILY("test_level", "A level.", METRICS_GAUGE, NULL, NULL, 1);
	char *s = render(&f);
	ck_assert_str_eq(s, "# HELP test_level A level.\n# TYPE test_level gauge\ntest_level 0\n");
	free(s);
	metrics_set(&f, NULL, -7);
	s = render(&f);
	ck_assert_ptr_nonnull(strstr(s, "\ntest_level -7\n"));
	free(s);
	metrics_family_reset(&f);
}
END_TEST

START_TEST(test_histogram_buckets)
{
	static struct metrics_family f = METRICS_FAMILY(
	    "test_wait_seconds", "Waits.", METRICS_HISTOGRAM, one_label, small_buckets, 2);
	const char *v[] = {"q"};
	metrics_observe(&f, v, 0.05);
	metrics_observe(&f, v, 0.1); /* a bound is inclusive (le) */
	metrics_observe(&f, v, 0.5);
	metrics_observe(&f, v, 100);
	char *s = render(&f);
	ck_assert_msg(strstr(s, "test_wait_seconds_bucket{name=\"q\",le=\"0.1\"} 2\n"
	                        "test_wait_seconds_bucket{name=\"q\",le=\"1\"} 3\n"
	                        "test_wait_seconds_bucket{name=\"q\",le=\"10\"} 3\n"
	                        "test_wait_seconds_bucket{name=\"q\",le=\"+Inf\"} 4\n"
	                        "test_wait_seconds_sum{name=\"q\"} 100.65000000000001\n"
	                        "test_wait_seconds_count{name=\"q\"} 4\n"),
	              "%s", s);
	free(s);
	metrics_family_reset(&f);
}
END_TEST

START_TEST(test_label_sets_bounded)
{
	static struct metrics_family f =
	    METRICS_FAMILY("test_bounded_total", "Bounded.", METRICS_COUNTER, one_label, NULL, 3);
	char name[16];
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		metrics_inc(&f, (const char *[]){name}, 1);
	}
	ck_assert_ptr_null(metrics_child(&f, (const char *[]){"n9"}));
	ck_assert_ptr_nonnull(metrics_child(&f, (const char *[]){"n2"}));
	char *s = render(&f);
	ck_assert_ptr_nonnull(strstr(s, "{name=\"n2\"} 1\n"));
	ck_assert_ptr_null(strstr(s, "n3"));
	free(s);
	struct metrics_text t = {0};
	metrics_write(&t);
	ck_assert_ptr_nonnull(strstr(t.buf, "\npillar_csi_metrics_dropped_total 8\n"));
	metrics_text_free(&t);
	metrics_family_reset(&f);
}
END_TEST

static struct metrics_family race =
    METRICS_FAMILY("test_race_total", "Raced.", METRICS_COUNTER, one_label, NULL, 8);
static struct metrics_family race_h =
    METRICS_FAMILY("test_race_seconds", "Raced.", METRICS_HISTOGRAM, NULL, small_buckets, 1);

static void *hammer(void *arg)
{
	char name[16];
	for (int i = 0; i < 20000; i++) {
		snprintf(name, sizeof(name), "k%d", (i + (int)(intptr_t)arg) % 8);
		metrics_inc(&race, (const char *[]){name}, 1);
		metrics_observe(&race_h, NULL, 0.5);
	}
	return NULL;
}

START_TEST(test_concurrent_updates)
{
	pthread_t th[4];
	for (intptr_t i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, hammer, (void *)i);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	uint64_t total = 0;
	for (int i = 0; i < 8; i++) {
		char name[16];
		snprintf(name, sizeof(name), "k%d", i);
		total += atomic_load(&metrics_child(&race, (const char *[]){name})->m.counter.v);
	}
	ck_assert_uint_eq(total, 80000);
	char *s = render(&race_h);
	ck_assert_ptr_nonnull(strstr(s, "test_race_seconds_count 80000\n"));
	ck_assert_ptr_nonnull(strstr(s, "test_race_seconds_sum 40000\n"));
	free(s);
	metrics_family_reset(&race);
	metrics_family_reset(&race_h);
}
END_TEST

static void collect(struct metrics_text *t, void *ctx)
{
	metrics_text_single(t, "test_collected", "From a collector.", METRICS_GAUGE,
	                    *(double *)ctx);
}

START_TEST(test_registry_and_process)
{
	static struct metrics_family f =
	    METRICS_FAMILY("test_registered", "Registered.", METRICS_GAUGE, NULL, NULL, 1);
	double v = 2.5;
	ck_assert_int_eq(metrics_register(&f), 0);
	ck_assert_int_eq(metrics_register(&f), 0);
	ck_assert_int_eq(metrics_register_collector(collect, &v), 0);
	ck_assert_int_eq(metrics_register_collector(metrics_process_collect, NULL), 0);
	struct metrics_text t = {0};
	metrics_write(&t);
	ck_assert_ptr_nonnull(strstr(t.buf, "\ntest_collected 2.5\n"));
	char *first = strstr(t.buf, "# TYPE test_registered gauge");
	ck_assert_ptr_nonnull(first);
	ck_assert_ptr_null(strstr(first + 1, "# TYPE test_registered gauge"));
	const char *names[] = {"process_cpu_seconds_total ",
	                       "process_resident_memory_bytes ",
	                       "process_virtual_memory_bytes ",
	                       "process_start_time_seconds ",
	                       "process_open_fds ",
	                       "process_max_fds "};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		ck_assert_msg(strstr(t.buf, names[i]), "%s missing", names[i]);
	double rss = 0;
	ck_assert_int_eq(sscanf(strstr(t.buf, "\nprocess_resident_memory_bytes "),
	                        "\nprocess_resident_memory_bytes %lf", &rss),
	                 1);
	ck_assert(rss > 1e5);
	metrics_text_free(&t);
	metrics_unregister_collector(collect, &v);
	metrics_write(&t);
	ck_assert_ptr_null(strstr(t.buf, "test_collected"));
	metrics_text_free(&t);
	metrics_family_reset(&f);
}
END_TEST

/* A role without a /metrics endpoint records nothing: no child is made, nothing counts as
 * dropped, and a child handed out before keeps counting (added last: the switch is for the
 * rest of the process). */
START_TEST(test_disabled_records_nothing)
{
	static struct metrics_family f =
	    METRICS_FAMILY("test_off_total", "Off.", METRICS_COUNTER, one_label, NULL, 4);
	static struct metrics_family h =
	    METRICS_FAMILY("test_off_seconds", "Off.", METRICS_HISTOGRAM, NULL, small_buckets, 1);
	ck_assert(metrics_enabled());
	struct metrics_child *before = metrics_child(&f, (const char *[]){"before"});
	ck_assert_ptr_nonnull(before);
	struct metrics_text t = {0};
	metrics_write(&t);
	char *at = strstr(t.buf ? t.buf : "", "\npillar_csi_metrics_dropped_total ");
	ck_assert_ptr_nonnull(at);
	double dropped = atof(at + strlen("\npillar_csi_metrics_dropped_total "));
	metrics_text_free(&t);

	metrics_disable();
	ck_assert(!metrics_enabled());
	ck_assert_ptr_null(metrics_child(&f, (const char *[]){"after"}));
	metrics_inc(&f, (const char *[]){"after"}, 1);
	metrics_observe(&h, NULL, 0.5);
	metrics_counter_add(&before->m.counter, 1);
	char *s = render(&f);
	ck_assert_str_eq(s, "# HELP test_off_total Off.\n"
	                    "# TYPE test_off_total counter\n"
	                    "test_off_total{name=\"before\"} 1\n");
	free(s);
	s = render(&h);
	ck_assert_ptr_nonnull(strstr(s, "\ntest_off_seconds_count 0\n"));
	free(s);
	metrics_write(&t);
	at = strstr(t.buf ? t.buf : "", "\npillar_csi_metrics_dropped_total ");
	ck_assert_ptr_nonnull(at);
	ck_assert(atof(at + strlen("\npillar_csi_metrics_dropped_total ")) == dropped);
	metrics_text_free(&t);
	metrics_family_reset(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("metrics");
	TCase *t = tcase_create("metrics");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_counter_text);
	tcase_add_test(t, test_unlabelled_gauge_always_written);
	tcase_add_test(t, test_histogram_buckets);
	tcase_add_test(t, test_label_sets_bounded);
	tcase_add_test(t, test_concurrent_updates);
	tcase_add_test(t, test_registry_and_process);
	tcase_add_test(t, test_disabled_records_nothing);
	suite_add_tcase(s, t);
	return tu_run(s);
}
