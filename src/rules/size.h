/* rules/size — the bounds of a volume's size and the checked rounding every role applies to it
 * (csi.md §4.1, §4.5; agent-api.md §5.4, §5.6).
 *
 * RULES_CAPACITY_MAX, 8 EiB − 1 GiB, is the largest capacity any role accepts: a multiple of
 * every power-of-two granule up to 1 GiB (the controller's MiB, a zvol's volblocksize, an LVM
 * extent), so a size within it rounds up to such a granule without leaving int64_t.  A larger
 * request is OUT_OF_RANGE before any arithmetic and before anything is recorded.
 */
#ifndef PILLAR_RULES_SIZE_H
#define PILLAR_RULES_SIZE_H

#include <stdint.h>

#define RULES_SIZE_MIB     (1LL << 20)
#define RULES_CAPACITY_MAX (INT64_MAX - (1LL << 30) + 1)

/* The largest size that rounds up to a multiple of granule within RULES_CAPACITY_MAX
 * (RULES_CAPACITY_MAX itself for granule ≤ 1 or any power of two up to 1 GiB). */
int64_t rules_size_largest(int64_t granule);

/* bytes rounded up to a multiple of granule (≤ 1: unchanged) into *out: 0, or -ERANGE when
 * bytes is below 1 or above rules_size_largest(granule) (*out unchanged). */
int rules_size_round_up(int64_t bytes, int64_t granule, int64_t *out);

/* The message of the OUT_OF_RANGE answer to a size rules_size_round_up refused:
 * "capacity <n> bytes cannot be rounded up to a multiple of <g> bytes; the largest size
 * accepted is <max> bytes" (granule ≤ 1: "capacity <n> bytes exceeds the largest size
 * accepted, <max> bytes").  Returns buf. */
const char *rules_size_refusal(int64_t bytes, int64_t granule, char *buf, unsigned cap);

#endif
