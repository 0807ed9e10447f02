/* rules/auth — NVMe in-band authentication (DH-HMAC-CHAP) messages the roles agree on
 * (docs/authentication.md). */
#ifndef PILLAR_RULES_AUTH_H
#define PILLAR_RULES_AUTH_H

/* CreateVolume's FAILED_PRECONDITION while the keys' distribution is not built: a volume whose
 * protocol asks for authentication is never exported without it. */
#define RULES_DHCHAP_NOT_ENFORCED_MSG                                                             \
	"the PillarProtocol asks for NVMe in-band authentication (nvmeofTcp.dhchap), which this " \
	"release validates but does not enforce yet; remove dhchap from the PillarProtocol or "   \
	"use "                                                                                    \
	"another one (docs/authentication.md)"

#endif
