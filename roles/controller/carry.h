/* carry — the entries a pass over a list of objects keeps for the next pass, so that an object
 * listed again at the same resourceVersion is carried over instead of decoded again
 * (model_list_each_skip): the agents' status counts (agent_counts.c) and the volume metrics
 * (metrics.c).
 *
 * An entry type starts with a struct carry_head.  A pass holds the previous pass's entries
 * (old, sorted by name) and builds the new ones; carry_move moves a matching old entry into the
 * new list and marks the old one moved (its name stays, so that old stays sorted for the
 * search, but the new list owns everything it points to).  carry_entries_free frees a list
 * through the entry type's clear function, skipping moved entries.
 */
#ifndef PILLAR_CONTROLLER_CARRY_H
#define PILLAR_CONTROLLER_CARRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct carry_head {
	char *name; /* malloc'd */
	uint64_t rv;
	bool moved; /* carried into the next pass's list, which owns it now */
};

struct carry_pass {
	size_t size; /* of one entry */
	void *old, *v;
	size_t n_old, n, cap;
	int err; /* -ENOMEM once a move failed */
};

/* A zeroed entry after the n new ones (the caller counts it: p->n++), NULL when out of
 * memory. */
void *carry_slot(struct carry_pass *p);
/* Moves the old entry named name at resourceVersion rv (rv 0 never matches) to the end of the
 * new list: true when it was moved; false when there is none, or when out of memory (p->err is
 * then -ENOMEM). */
bool carry_move(struct carry_pass *p, const char *name, uint64_t rv);
/* Sorts the new entries by name, for the next pass's search. */
void carry_sort(struct carry_pass *p);
/* Frees the n entries of size bytes at v (and v): each one not moved gets clear (which frees
 * what the entry points to besides its name), then its name is freed. */
void carry_entries_free(void *v, size_t n, size_t size, void (*clear)(void *entry));

#endif
