/* The process_* families as the Prometheus client libraries name them, read from /proc/self at
 * scrape time.  A figure that cannot be read is left out rather than reported as 0. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics/metrics.h"

/* Seconds since the epoch at which the machine booted (btime in /proc/stat), or -1. */
static double boot_time(void)
{
	FILE *f = fopen("/proc/stat", "re");
	char line[256];
	double bt = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "btime %lf", &bt) == 1)
			break;
	fclose(f);
	return bt;
}

static double open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	double n = 0;
	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory stream's own descriptor */
}

static double max_fds(void)
{
	FILE *f = fopen("/proc/self/limits", "re");
	char line[256], val[32];
	double soft = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "Max open files", 14) == 0 &&
		    sscanf(line + 14, " %31s", val) == 1) {
			soft = strcmp(val, "unlimited") == 0 ? -1 : strtod(val, NULL);
			break;
		}
	}
	fclose(f);
	return soft;
}

/* Fields of /proc/self/stat after the command name: utime (14), stime (15), starttime (22),
 * vsize (23), rss (24) — numbered as proc(5) numbers them. */
static int read_stat(double *cpu_s, double *start_ticks, double *vsize, double *rss_pages)
{
	FILE *f = fopen("/proc/self/stat", "re");
	char buf[1024];
	size_t n;
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
	unsigned long long ut, st, start, vs;
	long long rss;
	if (!p || sscanf(p + 2,
	                 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
	                 "%*d %*d %llu %llu %lld",
	                 &ut, &st, &start, &vs, &rss) != 5)
		return -1;
	long hz = sysconf(_SC_CLK_TCK);
	*cpu_s = (double)(ut + st) / (double)(hz > 0 ? hz : 100);
	*start_ticks = (double)start / (double)(hz > 0 ? hz : 100);
	*vsize = (double)vs;
	*rss_pages = (double)rss;
	return 0;
}

void metrics_process_collect(struct metrics_text *t, void *ctx)
{
	double cpu, start, vsize, rss, v;
	(void)ctx;
	if (read_stat(&cpu, &start, &vsize, &rss) == 0) {
		metrics_text_single(t, "process_cpu_seconds_total",
		                    "Total user and system CPU time spent in seconds.",
		                    METRICS_COUNTER, cpu);
		metrics_text_single(t, "process_resident_memory_bytes",
		                    "Resident memory size in bytes.", METRICS_GAUGE,
		                    rss * (double)sysconf(_SC_PAGESIZE));
		metrics_text_single(t, "process_virtual_memory_bytes",
		                    "Virtual memory size in bytes.", METRICS_GAUGE, vsize);
		if ((v = boot_time()) >= 0)
			metrics_text_single(
			    t, "process_start_time_seconds",
			    "Start time of the process since unix epoch in seconds.", METRICS_GAUGE,
			    v + start);
	}
	if ((v = open_fds()) >= 0)
		metrics_text_single(t, "process_open_fds", "Number of open file descriptors.",
		                    METRICS_GAUGE, v);
	if ((v = max_fds()) >= 0)
		metrics_text_single(t, "process_max_fds",
		                    "Maximum number of open file descriptors.", METRICS_GAUGE, v);
}
