/* mem — keeping a long-running process's heap close to what it uses.
 *
 * glibc's malloc gives threads their own arenas (up to 8 per core), and memory freed in one
 * arena is reused by no other; it returns freed memory to the kernel only from the top of the
 * main heap.  A controller that briefly decodes every object of a large store (a resync pass,
 * a restore) would otherwise keep the high-water mark of every arena resident for good.  mem_tune() limits the
 * arenas to MEM_ARENAS and serves blocks of 64 KiB and more from their own mappings (released
 * on free); mem_release() hands the freed pages inside the heaps back (malloc_trim) when more
 * than MEM_RELEASE_MIN bytes are free, and is cheap to call periodically.
 *
 * mem_tune returns 0, or -EINVAL when the allocator refused a setting; mem_release returns the
 * free heap bytes found before releasing. */
#ifndef PILLAR_BASE_MEM_H
#define PILLAR_BASE_MEM_H

#include <stddef.h>

#define MEM_ARENAS      2
#define MEM_RELEASE_MIN (1u << 20)

int mem_tune(void);
size_t mem_release(void);

#endif
