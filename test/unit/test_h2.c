/* Unit tests of src/h2: address forms, unix socket replacement rules, the event loop's timers and
 * cross-thread posts, leader/follower threads and job groups, and TLS configuration errors
 * (missing files, mismatched pairs). */
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "h2/loop.h"
#include "h2/net.h"
#include "h2/tls.h"
#include "testutil.h"

START_TEST(test_addr_forms)
{
	struct h2_addr a;
	struct err e = {0};

	ck_assert_int_eq(h2_addr_parse("unix:///run/pillar/csi.sock", true, &a, &e), 0);
	ck_assert_int_eq(a.family, AF_UNIX);
	ck_assert_str_eq(((struct sockaddr_un *)&a.sa)->sun_path, "/run/pillar/csi.sock");
	ck_assert_int_eq(h2_addr_parse("unix:/run/x.sock", true, &a, &e), 0);
	ck_assert_int_eq(h2_addr_parse("tcp://127.0.0.1:9500", false, &a, &e), 0);
	ck_assert_int_eq(a.family, AF_INET);
	ck_assert_int_eq(ntohs(((struct sockaddr_in *)&a.sa)->sin_port), 9500);
	ck_assert_str_eq(a.host, "127.0.0.1");
	ck_assert_int_eq(h2_addr_parse("[::1]:9500", false, &a, &e), 0);
	ck_assert_int_eq(a.family, AF_INET6);
	ck_assert_str_eq(a.host, "::1");
	ck_assert_int_eq(h2_addr_parse(":9500", true, &a, &e), 0);
	ck_assert_int_eq(a.family, AF_INET6); /* dual-stack wildcard */

	ck_assert_int_eq(h2_addr_parse("unix://relative.sock", true, &a, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "absolute"));
	ck_assert_int_eq(h2_addr_parse("localhost", false, &a, &e), -EINVAL);
	ck_assert_int_eq(h2_addr_parse("127.0.0.1:70000", false, &a, &e), -EINVAL);
	ck_assert_int_eq(h2_addr_parse(":9500", false, &a, &e), -EINVAL); /* dial needs a host */
	ck_assert_int_eq(h2_addr_parse("::1:9500", false, &a, &e), -EINVAL);
	ck_assert_int_eq(h2_addr_parse("", false, &a, &e), -EINVAL);
}
END_TEST

START_TEST(test_unix_stale_socket)
{
	const char *dir = tu_mkdtemp();
	char url[600], path[512];
	struct h2_addr a;
	struct err e = {0};
	struct stat st;
	int fd, fd2;

	snprintf(path, sizeof(path), "%s/s.sock", dir);
	snprintf(url, sizeof(url), "unix://%s", path);
	ck_assert_int_eq(h2_addr_parse(url, true, &a, &e), 0);
	fd = h2_listen(&a, 0600, &e);
	ck_assert_msg(fd >= 0, "%s", e.msg);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	/* a live listener is not replaced */
	ck_assert_int_eq(h2_listen(&a, 0600, &e), -EADDRINUSE);
	close(fd);
	/* now stale: replaced */
	fd2 = h2_listen(&a, 0660, &e);
	ck_assert_msg(fd2 >= 0, "%s", e.msg);
	close(fd2);
	unlink(path);
	/* a regular file is never removed */
	tu_write(dir, "s.sock", "data");
	ck_assert_int_eq(h2_listen(&a, 0600, &e), -EEXIST);
	ck_assert_str_eq(tu_read(dir, "s.sock"), "data");
	tu_rmtree(dir);
}
END_TEST

static int order[8], norder;
static void note(void *arg)
{
	order[norder++] = (int)(intptr_t)arg;
}

START_TEST(test_loop_timers_and_posts)
{
	struct h2_loop *l;
	struct h2_timer t1 = {0}, t2 = {0}, t3 = {0};
	struct err e = {0};
	uint64_t now = h2_now_ms();

	ck_assert_int_eq(h2_loop_new(&l, &e), 0);
	norder = 0;
	h2_timer_arm(l, &t1, now + 30, note, (void *)1);
	h2_timer_arm(l, &t2, now, note, (void *)2);
	h2_timer_arm(l, &t3, now + 10, note, (void *)3);
	h2_timer_cancel(l, &t1);
	h2_loop_post(l, note, (void *)4);
	usleep(20000);
	h2_loop_run_pending(l);
	ck_assert_int_eq(norder, 3);
	ck_assert_int_eq(order[0], 4); /* posts first, then due timers in time order */
	ck_assert_int_eq(order[1], 2);
	ck_assert_int_eq(order[2], 3);
	/* a started loop runs posts from other threads */
	ck_assert_int_eq(h2_loop_start(l, &e), 0);
	ck_assert_int_eq(h2_loop_run_sync(l, note, (void *)5), 0);
	ck_assert_int_eq(order[3], 5);
	h2_loop_free(l);
	h2_loop_free(NULL);
}
END_TEST

/* ---- leader/follower threads and job groups ---- */

struct lf {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t cb_thread, job_thread;
	int pfd[2], qfd[2];
	bool job_started, release, second_seen, job_done;
	struct h2_jobs *g;
};

static void lf_job(void *arg)
{
	struct lf *s = arg;

	pthread_mutex_lock(&s->mu);
	s->job_thread = pthread_self();
	s->job_started = true;
	pthread_cond_broadcast(&s->cv);
	while (!s->release)
		pthread_cond_wait(&s->cv, &s->mu); /* a slow handler */
	s->job_done = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static void lf_first(void *arg, uint32_t ev)
{
	struct lf *s = arg;
	char b[8];
	(void)ev;

	ck_assert_int_eq(read(s->pfd[0], b, sizeof(b)), 1);
	ck_assert(h2_loop_in_thread(h2_loop_default()));
	s->cb_thread = pthread_self();
	ck_assert_int_eq(h2_jobs_submit(s->g, lf_job, s), 0);
}

static void lf_second(void *arg, uint32_t ev)
{
	struct lf *s = arg;
	char b[8];
	(void)ev;

	ck_assert_int_eq(read(s->qfd[0], b, sizeof(b)), 1);
	pthread_mutex_lock(&s->mu);
	s->second_seen = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static bool wait_flag(struct lf *s, bool *flag, int ms)
{
	struct timespec ts;
	bool v;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&s->mu);
	while (!*flag && pthread_cond_timedwait(&s->cv, &s->mu, &ts) == 0)
		;
	v = *flag;
	pthread_mutex_unlock(&s->mu);
	return v;
}

static void add_fds(void *arg)
{
	struct lf *s = arg;
	ck_assert(h2_loop_in_thread(h2_loop_default()));
	ck_assert_int_eq(h2_loop_add_fd(h2_loop_default(), s->pfd[0], EPOLLIN, lf_first, s), 0);
	ck_assert_int_eq(h2_loop_add_fd(h2_loop_default(), s->qfd[0], EPOLLIN, lf_second, s), 0);
}

static void del_fds(void *arg)
{
	struct lf *s = arg;
	h2_loop_del_fd(h2_loop_default(), s->pfd[0]);
	h2_loop_del_fd(h2_loop_default(), s->qfd[0]);
}

/* A job submitted from loop work runs on the thread that did the work (no hand-off), and while it
 * blocks another thread keeps polling: a second fd's event is still handled. */
START_TEST(test_jobs_run_where_submitted)
{
	struct h2_loop *l = h2_loop_default();
	struct lf s = {0};
	struct err e = {0};

	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cv, NULL);
	ck_assert_int_eq(pipe(s.pfd), 0);
	ck_assert_int_eq(pipe(s.qfd), 0);
	ck_assert_int_eq(h2_jobs_new(&s.g, l, 2, &e), 0);
	ck_assert(!h2_loop_in_thread(l));
	ck_assert_int_eq(h2_loop_run_sync(l, add_fds, &s), 0);
	ck_assert_int_eq(write(s.pfd[1], "x", 1), 1);
	ck_assert_msg(wait_flag(&s, &s.job_started, 5000), "the job did not start");
	ck_assert_msg(pthread_equal(s.cb_thread, s.job_thread),
	              "the job ran on another thread than the loop work that submitted it");
	ck_assert_int_eq(write(s.qfd[1], "y", 1), 1);
	ck_assert_msg(wait_flag(&s, &s.second_seen, 5000),
	              "a blocked job stopped the loop from polling");
	ck_assert(!s.job_done);
	pthread_mutex_lock(&s.mu);
	s.release = true;
	pthread_cond_broadcast(&s.cv);
	pthread_mutex_unlock(&s.mu);
	h2_jobs_free(s.g); /* waits for the job */
	ck_assert(s.job_done);
	h2_loop_run_sync(l, del_fds, &s);
	close(s.pfd[0]);
	close(s.pfd[1]);
	close(s.qfd[0]);
	close(s.qfd[1]);
	pthread_cond_destroy(&s.cv);
	pthread_mutex_destroy(&s.mu);
}
END_TEST

static int n_tasks(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* counted_job waits until want_jobs have run at once (0: no wait) */
static atomic_int cur_jobs, max_jobs, ran_jobs, want_jobs;

static void counted_job(void *arg)
{
	int now = atomic_fetch_add(&cur_jobs, 1) + 1, m;
	(void)arg;
	while ((m = atomic_load(&max_jobs)) < now &&
	       !atomic_compare_exchange_weak(&max_jobs, &m, now))
		;
	/* at most 10 s: the verdict does not depend on how soon the group's threads run */
	for (int i = 0; i < 1000 && atomic_load(&max_jobs) < atomic_load(&want_jobs); i++)
		usleep(10000);
	usleep(1000);
	atomic_fetch_sub(&cur_jobs, 1);
	atomic_fetch_add(&ran_jobs, 1);
}

static void inline_job(void *arg)
{
	*(pthread_t *)arg = pthread_self();
}

/* A group runs at most `limit` jobs at once, h2_jobs_free runs the queue to the end, its threads
 * are given back, and limit 0 runs jobs inline. */
START_TEST(test_jobs_limit_and_threads)
{
	struct h2_loop *l = h2_loop_default();
	struct h2_jobs *g, *g0;
	struct err e = {0};
	pthread_t who;
	int base, i;

	ck_assert_ptr_nonnull(l);
	base = n_tasks();
	ck_assert_int_eq(h2_jobs_new(&g, l, 3, &e), 0);
	ck_assert_int_eq(n_tasks(), base + 3);
	atomic_store(&cur_jobs, 0);
	atomic_store(&max_jobs, 0);
	atomic_store(&ran_jobs, 0);
	atomic_store(&want_jobs, 3);
	for (i = 0; i < 9; i++)
		ck_assert_int_eq(h2_jobs_submit(g, counted_job, NULL), 0);
	h2_jobs_free(g);
	atomic_store(&want_jobs, 0);
	ck_assert_int_eq(atomic_load(&ran_jobs), 9);
	ck_assert_int_eq(atomic_load(&max_jobs), 3);
	ck_assert_int_eq(n_tasks(), base);

	ck_assert_int_eq(h2_jobs_new(&g0, l, 0, &e), 0);
	ck_assert_int_eq(h2_jobs_submit(g0, inline_job, &who), 0);
	ck_assert(pthread_equal(who, pthread_self()));
	h2_jobs_free(g0);
	h2_jobs_free(NULL);
}
END_TEST

/* A loop that was never started still runs a group's jobs on the group's threads. */
START_TEST(test_jobs_unstarted_loop)
{
	struct h2_loop *l;
	struct h2_jobs *g;
	struct err e = {0};

	ck_assert_int_eq(h2_loop_new(&l, &e), 0);
	ck_assert_int_eq(h2_jobs_new(&g, l, 1, &e), 0);
	atomic_store(&ran_jobs, 0);
	ck_assert_int_eq(h2_jobs_submit(g, counted_job, NULL), 0);
	ck_assert_int_eq(h2_jobs_submit(g, counted_job, NULL), 0);
	h2_jobs_free(g);
	ck_assert_int_eq(atomic_load(&ran_jobs), 2);
	h2_loop_free(l);
}
END_TEST

struct runnow {
	struct h2_loop *l;
	struct h2_timer t;
	pthread_t ran_on;
	bool held, posted;
	atomic_bool fired;
};

static void rn_post(void *arg)
{
	((struct runnow *)arg)->posted = true;
}

static void rn_timer(void *arg)
{
	atomic_store(&((struct runnow *)arg)->fired, true);
}

static void rn_fn(void *arg)
{
	struct runnow *r = arg;
	r->ran_on = pthread_self();
	r->held = h2_loop_in_thread(r->l);
	ck_assert_int_eq(h2_loop_post(r->l, rn_post, r), 0);
	ck_assert(!r->posted); /* a post from loop work runs after it */
	h2_timer_arm(r->l, &r->t, h2_now_ms() + 30, rn_timer, r);
}

/* h2_loop_run from a thread that is not the loop's runs at once on that thread, holding the loop;
 * its posts run before it returns; a timer it arms wakes the sleeping poller in time. */
START_TEST(test_loop_run_on_caller)
{
	struct runnow r = {0};
	struct err e = {0};
	uint64_t t0;

	ck_assert_int_eq(h2_loop_new(&r.l, &e), 0);
	ck_assert_int_eq(h2_loop_start(r.l, &e), 0);
	usleep(20000); /* let the poller go to sleep with no timer */
	t0 = h2_now_ms();
	ck_assert_int_eq(h2_loop_run(r.l, rn_fn, &r), 0);
	ck_assert(pthread_equal(r.ran_on, pthread_self()));
	ck_assert(r.held);
	ck_assert(r.posted);
	ck_assert(!h2_loop_in_thread(r.l));
	while (!atomic_load(&r.fired) && h2_now_ms() - t0 < 2000)
		usleep(1000);
	ck_assert_msg(atomic_load(&r.fired), "the timer armed by h2_loop_run did not fire");
	ck_assert_uint_lt(h2_now_ms() - t0, 1000);
	h2_loop_free(r.l);
}
END_TEST

START_TEST(test_tls_config_errors)
{
	const char *dir = tu_mkdtemp();
	struct h2_tls_cfg *c = NULL;
	struct err e = {0};
	char junk[512];

	ck_assert_int_eq(
	    h2_tls_server_cfg_new(&c, "/nonexistent/cert.pem", "/nonexistent/key.pem", NULL, &e),
	    -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "/nonexistent/cert.pem"));
	ck_assert_int_eq(h2_tls_server_cfg_new(&c, NULL, "/k", NULL, &e), -EINVAL);
	ck_assert_int_eq(h2_tls_client_cfg_new(&c, NULL, NULL, NULL, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "CA"));
	ck_assert_int_eq(h2_tls_client_cfg_new(&c, "/ca", "/cert", NULL, &e), -EINVAL);
	tu_write(dir, "junk.pem",
	         "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n");
	snprintf(junk, sizeof(junk), "%s/junk.pem", dir);
	ck_assert_int_eq(h2_tls_client_cfg_new(&c, junk, NULL, NULL, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "junk.pem"));
	h2_tls_cfg_free(NULL);
	tu_rmtree(dir);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("h2");
	TCase *t = tcase_create("h2");
	tcase_add_test(t, test_addr_forms);
	tcase_add_test(t, test_unix_stale_socket);
	tcase_add_test(t, test_loop_timers_and_posts);
	tcase_add_test(t, test_jobs_run_where_submitted);
	tcase_add_test(t, test_jobs_limit_and_threads);
	tcase_add_test(t, test_jobs_unstarted_loop);
	tcase_add_test(t, test_loop_run_on_caller);
	tcase_add_test(t, test_tls_config_errors);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
