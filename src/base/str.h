/* str — bounded string copy.
 *
 * str_copy copies src into dst of cap bytes (cap >= 1), cutting it to cap-1 bytes, and always
 * NUL-terminates.  It returns true when src fitted whole, so a caller that must not cut can
 * refuse.
 */
#ifndef PILLAR_BASE_STR_H
#define PILLAR_BASE_STR_H

#include <stdbool.h>
#include <stddef.h>

bool str_copy(char *dst, size_t cap, const char *src);

#endif
