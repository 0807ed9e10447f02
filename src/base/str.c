/* str — bounded string copy. */
#include "base/str.h"

#include <string.h>

bool str_copy(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap);
	bool whole = n < cap;
	if (!whole)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
	return whole;
}
