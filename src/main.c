/* pillar-csi: one static executable for every role; see roles/applets.h. */
#include <signal.h>

#include "applets.h"
#include "base/file.h"
#include "grpc/calllog.h"
#include "pbjson/pbjson.h"

int main(int argc, char **argv)
{
	/* A peer that goes away must surface as EPIPE on write, never kill the process. */
	signal(SIGPIPE, SIG_IGN);
	/* every role's per-call log lines write messages as JSON with secrets stripped */
	calllog_set_format(pbjson_log_text);
	file_powercut_from_env(); /* the durability tests' fault point; nothing when unset */
	return applet_dispatch(argc, argv);
}
