/* grpc/pool — a fixed pool of worker threads running handler jobs in FIFO order.
 * grpc_pool_new returns 0 or a negative errno; grpc_pool_free runs the queued jobs to the end and
 * joins the threads.  n == 0 makes a pool that runs each job inline in grpc_pool_submit. */
#ifndef PILLAR_GRPC_POOL_H
#define PILLAR_GRPC_POOL_H

#include "base/err.h"

struct grpc_pool;
typedef void (*grpc_job_fn)(void *arg);

int grpc_pool_new(struct grpc_pool **out, unsigned n, struct err *e);
/* Returns 0 or -ENOMEM. */
int grpc_pool_submit(struct grpc_pool *p, grpc_job_fn fn, void *arg);
void grpc_pool_free(struct grpc_pool *p);

#endif
