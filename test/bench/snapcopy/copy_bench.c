/* copy_bench — the file backend's snapshot copy (src/backend/file_copy.c) on one file.
 *
 *   copy_bench SRC DST   copies SRC to DST as CreateSnapshot does (reflink where the filesystem
 *                        has it, else the data extents only; temp name, fsync, rename, fsync of
 *                        the directory) and prints "seconds=S bytes=B": wall seconds of the copy
 *                        and SRC's length.  DST must not exist.  Exit status 1 on failure. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "backend/backend.h"

int main(int argc, char **argv)
{
	struct backend_config c = {.kind = BACKEND_FILE, .pool = "bench", .directory = "."};
	struct err e = {0};
	struct timespec t0, t1;
	struct stat st;
	backend *b;
	if (argc != 3 || stat(argv[1], &st) < 0) {
		fprintf(stderr, "usage: copy_bench SRC DST\n");
		return 1;
	}
	if (backend_new(&c, &b, &e) < 0) {
		fprintf(stderr, "copy_bench: %s\n", e.msg);
		return 1;
	}
	b->copy_wait_ms = 3600 * 1000; /* one call: wait for the whole copy */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int r = backend_file_copy(b, argv[1], argv[2], 0400, 0, &e);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	backend_free(b);
	if (r < 0) {
		fprintf(stderr, "copy_bench: %s\n", e.msg);
		return 1;
	}
	printf("seconds=%.6f bytes=%lld\n",
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
	       (long long)st.st_size);
	return 0;
}
