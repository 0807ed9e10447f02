# image.mk - the container image; included by the top-level Makefile.
#   make image        $(IMAGE): an OCI archive built by buildah from an mmdebstrap root filesystem
#                     (image/build.sh; the root filesystem is cached outside the clone)
#   make image-check  unpack it and run from it with chroot (test/image/check.sh): every program
#                     the roles execute (scanned from the code) is there and runs; sizes
#   make image-e2e    the real-kernel scenario `image` with every role chrooted in the image
#   make image-test   image-check, then image-e2e (part of `make test`)
IMAGE        := $(BUILD)/image/pillar-csi-$(VERSION).oci.tar
IMAGE_ROOT   := $(BUILD)/image/root
GIT_REVISION := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
IMAGE_SOURCE ?= $(or $(shell git remote get-url origin 2>/dev/null),https://github.com/bhyoo/pillar-csi)

.PHONY: image image-check image-e2e image-test
image: $(BUILD)/pillar-csi.stripped
	@bash image/build.sh $(BUILD)/pillar-csi.stripped $(IMAGE) '$(VERSION)' '$(GIT_REVISION)' '$(IMAGE_SOURCE)' >/dev/null

image-check: image
	@bash test/image/check.sh $(IMAGE) $(IMAGE_ROOT) '$(VERSION)' '$(GIT_REVISION)'

image-e2e: e2e-deps
	@E2E_SKIP_DEPS=1 E2E_IMAGE_ROOT=$(abspath $(IMAGE_ROOT)) E2E_OUT=$(abspath $(BUILD)/e2e) \
	  bash test/e2e/run.sh image

image-test: image-check
	@$(MAKE) --no-print-directory image-e2e
