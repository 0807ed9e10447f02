/* node — `pillar-csi node`: the CSI node service on a worker. */
#ifndef PILLAR_ROLES_NODE_H
#define PILLAR_ROLES_NODE_H

int node_main(int argc, char **argv);

#endif
