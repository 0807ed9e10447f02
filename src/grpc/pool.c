#include "grpc/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct job {
	grpc_job_fn fn;
	void *arg;
	struct job *next;
};

struct grpc_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct job *head, *tail;
	bool stop;
	unsigned n;
	pthread_t *thr;
};

static void *worker(void *arg)
{
	struct grpc_pool *p = arg;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		struct job *j;
		while (!p->head && !p->stop)
			pthread_cond_wait(&p->cv, &p->mu);
		j = p->head;
		if (!j)
			break;
		p->head = j->next;
		if (!p->head)
			p->tail = NULL;
		pthread_mutex_unlock(&p->mu);
		j->fn(j->arg);
		free(j);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int grpc_pool_new(struct grpc_pool **out, unsigned n, struct err *e)
{
	struct grpc_pool *p = calloc(1, sizeof(*p));
	unsigned i;

	if (!p || (n && !(p->thr = calloc(n, sizeof(pthread_t))))) {
		free(p);
		return err_set(e, -ENOMEM, "worker pool: out of memory");
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	for (i = 0; i < n; i++) {
		int rc = pthread_create(&p->thr[i], NULL, worker, p);
		if (rc) {
			p->n = i;
			grpc_pool_free(p);
			return err_set(e, -rc, "worker thread: %s", strerror(rc));
		}
	}
	p->n = n;
	*out = p;
	return 0;
}

int grpc_pool_submit(struct grpc_pool *p, grpc_job_fn fn, void *arg)
{
	struct job *j;

	if (p->n == 0) {
		fn(arg);
		return 0;
	}
	j = malloc(sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->fn = fn;
	j->arg = arg;
	j->next = NULL;
	pthread_mutex_lock(&p->mu);
	if (p->tail)
		p->tail->next = j;
	else
		p->head = j;
	p->tail = j;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

void grpc_pool_free(struct grpc_pool *p)
{
	unsigned i;

	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (i = 0; i < p->n; i++)
		pthread_join(p->thr[i], NULL);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p->thr);
	free(p);
}
