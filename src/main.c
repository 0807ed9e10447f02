/* pillar-csi: one static executable for every role; see roles/applets.h. */
#include <signal.h>

#include "applets.h"

int main(int argc, char **argv)
{
	/* A peer that goes away must surface as EPIPE on write, never kill the process. */
	signal(SIGPIPE, SIG_IGN);
	return applet_dispatch(argc, argv);
}
