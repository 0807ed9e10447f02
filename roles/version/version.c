#include "version/version.h"

#include <mbedtls/version.h>
#include <nghttp2/nghttp2.h>
#include <nvme/util.h>
#include <protobuf-c/protobuf-c.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "applets.h"
#include "base/json.h"
#include "buildinfo.h"
#include "model/docs.h"

const char *version_string(void)
{
	return PILLAR_VERSION;
}
const char *version_commit(void)
{
	return PILLAR_GIT_COMMIT;
}
const char *version_build_date(void)
{
	return PILLAR_BUILD_DATE;
}

void version_print_line(FILE *out)
{
	fprintf(out, "pillar-csi %s (%s)\n", PILLAR_VERSION, PILLAR_GIT_COMMIT);
}

struct libver {
	const char *name;
	char version[32];
};

#define LIBRARIES 6

static void linked_versions(struct libver v[LIBRARIES])
{
	char mbed[18] = {0};
	mbedtls_version_get_string(mbed);
	v[0] = (struct libver){"protobuf-c", ""};
	v[1] = (struct libver){"nghttp2", ""};
	v[2] = (struct libver){"mbedtls", ""};
	v[3] = (struct libver){json_lib_name(), ""};
	v[4] = (struct libver){"libyaml", ""};
	v[5] = (struct libver){"libnvme", ""};
	snprintf(v[0].version, sizeof(v[0].version), "%s", protobuf_c_version());
	snprintf(v[1].version, sizeof(v[1].version), "%s", nghttp2_version(0)->version_str);
	snprintf(v[2].version, sizeof(v[2].version), "%s", mbed);
	snprintf(v[3].version, sizeof(v[3].version), "%s", json_lib_version());
	snprintf(v[4].version, sizeof(v[4].version), "%s", yaml_get_version_string());
	snprintf(v[5].version, sizeof(v[5].version), "%s", nvme_get_version(NVME_VERSION_PROJECT));
}

int version_main(int argc, char **argv)
{
	const char *output = "text";
	const struct flag_def defs[] = {
	    {"output", FLAG_STRING, &output, "output format: text or json", false},
	};
	struct libver v[LIBRARIES];
	int r = role_parse_flags("pillar-csi version",
	                         "Print the version, the git commit, the build date and the "
	                         "versions of the libraries linked into this binary.",
	                         defs, 1, argc, argv);

	if (r >= 0)
		return r;
	linked_versions(v);
	if (strcmp(output, "json") == 0) {
		struct model_version d = {0};
		char *s = NULL;
		int ok = model_str_set(&d.version, PILLAR_VERSION) == 0 &&
		         model_str_set(&d.git_commit, PILLAR_GIT_COMMIT) == 0 &&
		         model_str_set(&d.build_date, PILLAR_BUILD_DATE) == 0;
		for (int i = 0; ok && i < LIBRARIES; i++)
			ok = model_map_set(&d.libraries, v[i].name, v[i].version) == 0;
		if (ok && (s = model_type_encode_pretty(&model_version_type, &d)))
			printf("%s\n", s);
		free(s);
		model_type_clear(&model_version_type, &d);
		return s ? 0 : 1;
	}
	if (strcmp(output, "text") != 0) {
		fprintf(stderr,
		        "pillar-csi version: unknown --output \"%s\"; accepted: text, json\n",
		        output);
		return 2;
	}
	version_print_line(stdout);
	printf("build date: %s\n", PILLAR_BUILD_DATE);
	for (int i = 0; i < LIBRARIES; i++)
		printf("%s: %s\n", v[i].name, v[i].version);
	return 0;
}
