/* serve — what every serving role does around its gRPC server: block the shutdown signals in
 * every thread, wait for SIGTERM/SIGINT, run the role's graceful shutdown, and exit at once on a
 * second signal (deploy.md §1.2). */
#ifndef PILLAR_ROLES_SERVE_H
#define PILLAR_ROLES_SERVE_H

#include <stdint.h>

/* Call first in a role's main, before any thread exists: SIGTERM, SIGINT and SIGHUP are then
 * delivered only to serve_wait_signal. */
void serve_block_signals(void);

/* Waits for SIGTERM or SIGINT and returns its number. */
int serve_wait_signal(void);

/* Sleeps for up to ms; returns early (non-zero) when a second shutdown signal arrives. */
int serve_sleep_or_signal(int64_t ms);

/* Starts a thread that exits the process with status 1 on the next shutdown signal: the
 * "second signal exits at once" rule while a graceful shutdown runs. */
void serve_exit_on_second_signal(void);

#endif
