/* mem — arenas limited, freed heap pages released (mem.h). */
#include "base/mem.h"

#include <errno.h>
#include <malloc.h>

int mem_tune(void)
{
	int ok = mallopt(M_ARENA_MAX, MEM_ARENAS);
	ok &= mallopt(M_MMAP_THRESHOLD, 64 * 1024); /* also stops glibc raising it on each free */
	return ok ? 0 : -EINVAL;
}

size_t mem_release(void)
{
	struct mallinfo2 mi = mallinfo2();
	if (mi.fordblks >= MEM_RELEASE_MIN)
		malloc_trim(0);
	return mi.fordblks;
}
