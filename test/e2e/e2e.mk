# e2e.mk - real-kernel VM test bed; included by the top-level Makefile.
#   make e2e               every fast scenario (test/e2e/scenarios/*.sh with "# e2e-fast: yes")
#   make e2e E2E=smoke2    one (or several: E2E="smoke smoke2")
#   make e2e-deps          only the host packages (idempotent)
#   make e2e-scale         the scale scenario (scale200: 200 exports, storage reboot, figures)
# Artefacts and serial logs: $(BUILD)/e2e/ (logs in $(BUILD)/e2e/logs/).
E2E ?=
E2E_BIN_DEP ?= $(BUILD)/pillar-csi

.PHONY: e2e e2e-deps e2e-scale
e2e: e2e-deps $(E2E_BIN_DEP)
	E2E_SKIP_DEPS=1 E2E_BIN=$(abspath $(BUILD)/pillar-csi) E2E_OUT=$(abspath $(BUILD)/e2e) \
	  bash test/e2e/run.sh $(E2E)

e2e-deps:
	bash test/e2e/deps.sh

e2e-scale:
	$(MAKE) e2e E2E=scale200
