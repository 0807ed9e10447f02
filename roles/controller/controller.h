/* controller — `pillar-csi controller`: CSI controller service and reconcilers. */
#ifndef PILLAR_ROLES_CONTROLLER_H
#define PILLAR_ROLES_CONTROLLER_H

int controller_main(int argc, char **argv);

#endif
