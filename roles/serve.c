#include "serve.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"

static sigset_t shutdown_set(void)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGTERM);
	sigaddset(&s, SIGINT);
	return s;
}

void serve_block_signals(void)
{
	sigset_t s = shutdown_set();
	sigaddset(&s, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
}

int serve_wait_signal(void)
{
	sigset_t s = shutdown_set();
	int sig = 0;
	while (sigwait(&s, &sig) != 0)
		;
	return sig;
}

int serve_sleep_or_signal(int64_t ms)
{
	sigset_t s = shutdown_set();
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	int r;
	if (ms <= 0)
		return 0;
	do {
		r = sigtimedwait(&s, NULL, &ts);
	} while (r < 0 && errno == EINTR);
	return r > 0;
}

static void *second_signal(void *arg)
{
	(void)arg;
	int sig = serve_wait_signal();
	log_warn("second shutdown signal: exiting at once", "signal",
	         sig == SIGINT ? "SIGINT" : "SIGTERM");
	_exit(1);
	return NULL;
}

void serve_exit_on_second_signal(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, second_signal, NULL) == 0)
		pthread_detach(t);
}
