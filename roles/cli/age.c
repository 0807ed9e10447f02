/* cli: kubectl's age format. */
#include <stdio.h>
#include <time.h>

#include "cli/cli.h"

void cli_age(const char *timestamp, long long now, char *buf, size_t cap)
{
	struct tm tm = {0};
	buf[0] = '\0';
	if (!timestamp || !strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ", &tm)) {
		snprintf(buf, cap, "<unknown>");
		return;
	}
	long long d = now - (long long)timegm(&tm);
	if (d < 0)
		d = 0;
	if (d < 120)
		snprintf(buf, cap, "%llds", d);
	else if (d < 600)
		snprintf(buf, cap, "%lldm%llds", d / 60, d % 60);
	else if (d < 3 * 3600)
		snprintf(buf, cap, "%lldm", d / 60);
	else if (d < 8 * 3600 && d % 3600 >= 60)
		snprintf(buf, cap, "%lldh%lldm", d / 3600, (d % 3600) / 60);
	else if (d < 48 * 3600)
		snprintf(buf, cap, "%lldh", d / 3600);
	else if (d < 8 * 86400 && d % 86400 >= 3600)
		snprintf(buf, cap, "%lldd%lldh", d / 86400, (d % 86400) / 3600);
	else if (d < 2 * 365 * 86400LL)
		snprintf(buf, cap, "%lldd", d / 86400);
	else
		snprintf(buf, cap, "%lldy", d / (365 * 86400LL));
}
