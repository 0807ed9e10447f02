/* crc32c — CRC-32C (Castagnoli) of data, continuing from crc (0 to start): the journal's
 * checksum (base/journal.h).  Thread-safe. */
#ifndef PILLAR_BASE_CRC32C_H
#define PILLAR_BASE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t crc32c(uint32_t crc, const void *data, size_t len);

#endif
