/* The floor under a unary call on a unix socket: two processes pass a message of SIZE bytes back
 * and forth over a connected unix stream socket, one blocking read and one write a side per
 * trip, with no protocol at all.  Prints the round trips' "p50_us= p99_us= rps=" like the bench
 * clients.
 *   pingpong N SIZE */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Reads or writes exactly len bytes; 0, or -1 on an error or end of file. */
static int move_all(int fd, char *buf, size_t len, int writing)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n =
		    writing ? write(fd, buf + done, len - done) : read(fd, buf + done, len - done);
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000;
	size_t size = argc > 2 ? (size_t)atol(argv[2]) : 100;
	int sv[2];
	char *buf = calloc(1, size ? size : 1);
	uint64_t *lat = calloc((size_t)(n > 0 ? n : 1), sizeof(*lat));
	pid_t child;

	if (n <= 0 || !buf || !lat || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return 1;
	child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		close(sv[0]);
		for (long i = 0; i < n + 100; i++)
			if (move_all(sv[1], buf, size, 0) < 0 || move_all(sv[1], buf, size, 1) < 0)
				_exit(0);
		_exit(0);
	}
	close(sv[1]);
	for (long i = 0; i < 100; i++) /* warm-up */
		if (move_all(sv[0], buf, size, 1) < 0 || move_all(sv[0], buf, size, 0) < 0)
			return 1;
	uint64_t start = now_ns();
	for (long i = 0; i < n; i++) {
		uint64_t t0 = now_ns();
		if (move_all(sv[0], buf, size, 1) < 0 || move_all(sv[0], buf, size, 0) < 0)
			return 1;
		lat[i] = now_ns() - t0;
	}
	uint64_t total = now_ns() - start;
	close(sv[0]);
	waitpid(child, NULL, 0);
	qsort(lat, (size_t)n, sizeof(*lat), cmp);
	printf("p50_us=%.1f p99_us=%.1f rps=%.0f\n", (double)lat[n / 2] / 1000.0,
	       (double)lat[n * 99 / 100] / 1000.0, (double)n * 1e9 / (double)total);
	free(lat);
	free(buf);
	return 0;
}
