/* modprobe — `pillar-csi modprobe <module>...` for init containers (spec/deploy.md §1.6):
 * runs kmod's modprobe for each module in order, logs the result of each, and always exits 0 so
 * a missing module never blocks the pod (the role reports the problem itself). */
#ifndef PILLAR_ROLES_MODPROBE_H
#define PILLAR_ROLES_MODPROBE_H

int modprobe_main(int argc, char **argv);

#endif
