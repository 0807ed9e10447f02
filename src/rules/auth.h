/* rules/auth — NVMe in-band authentication (DH-HMAC-CHAP) messages the roles agree on
 * (docs/authentication.md). */
#ifndef PILLAR_RULES_AUTH_H
#define PILLAR_RULES_AUTH_H

/* CreateVolume's FAILED_PRECONDITION (with the PillarAgent's name, "%s") when the storage
 * node's kernel has no target authentication (PillarAgent status.capabilities.nvmeTargetAuth
 * not true). */
#define RULES_DHCHAP_AGENT_MISSING_FMT                                                            \
	"PillarAgent \"%s\": the storage node's kernel has no NVMe in-band authentication "       \
	"(CONFIG_NVME_TARGET_AUTH); the PillarProtocol asks for nvmeofTcp.dhchap: use a storage " \
	"node whose kernel has it (Debian 12: bookworm-backports' 6.12) or a protocol without "   \
	"dhchap"

#endif
