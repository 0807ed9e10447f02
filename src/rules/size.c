/* rules/size — see size.h. */
#include "rules/size.h"

#include <errno.h>
#include <stdio.h>

int64_t rules_size_largest(int64_t granule)
{
	if (granule <= 1)
		return RULES_CAPACITY_MAX;
	return RULES_CAPACITY_MAX / granule * granule;
}

int rules_size_round_up(int64_t bytes, int64_t granule, int64_t *out)
{
	int64_t t;
	if (bytes < 1 || bytes > rules_size_largest(granule))
		return -ERANGE;
	if (granule <= 1) {
		*out = bytes;
		return 0;
	}
	if (__builtin_add_overflow(bytes, granule - 1, &t))
		return -ERANGE;
	*out = t / granule * granule;
	return 0;
}

const char *rules_size_refusal(int64_t bytes, int64_t granule, char *buf, unsigned cap)
{
	if (granule <= 1)
		snprintf(buf, cap,
		         "capacity %lld bytes exceeds the largest size accepted, %lld bytes",
		         (long long)bytes, (long long)RULES_CAPACITY_MAX);
	else
		snprintf(
		    buf, cap,
		    "capacity %lld bytes cannot be rounded up to a multiple of %lld bytes; the "
		    "largest size accepted is %lld bytes",
		    (long long)bytes, (long long)granule, (long long)rules_size_largest(granule));
	return buf;
}
