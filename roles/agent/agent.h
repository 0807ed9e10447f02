/* agent — `pillar-csi agent`: backends and the kernel NVMe target on a storage node. */
#ifndef PILLAR_ROLES_AGENT_H
#define PILLAR_ROLES_AGENT_H

int agent_main(int argc, char **argv);

#endif
