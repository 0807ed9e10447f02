# pillar-csi — one static executable for every role.
#
#   make deps    install every build and test dependency from Debian packages (idempotent)
#   make         build/pillar-csi, fully static
#   make test    unit tests under ASan+UBSan (Check), brief fuzz runs, then the interop suites
#   make fuzz    every libFuzzer target for FUZZ_S seconds (default 300)
#   make e2e     real-kernel scenarios in QEMU (test/e2e)
#   make bench   benchmarks against peers measured in the same run
#   make fmt     clang-format every C file
#   make size    stripped size of the shipped binary
#
# Sources are found by wildcard: a new file under src/<layer>/ or roles/<role>/ is built, and a
# new test/unit/test_<name>.c becomes its own test program.

.DEFAULT_GOAL := all

# Debian packages.  BUILD_DEBS build the binary; TEST_DEBS run unit, interop and bench suites.
# Every list is defined before a list that names it (`:=` expands at once; an undefined name is
# empty): test/tools/deps-check.sh, run by `make unit`, holds `make deps` to the programs the
# suites run.
BUILD_DEBS := gcc make libc6-dev libprotobuf-c-dev protobuf-c-compiler libprotobuf-dev \
              libnghttp2-dev libmbedtls-dev libcjson-dev libyaml-dev libnvme-dev libjson-c-dev \
              libssl-dev \
              pkg-config dpkg-dev apt file binutils git ca-certificates
# test/chart's renderer: Go's text/template with Sprig, built offline from Debian's Go packages.
CHART_DEBS := golang-go golang-github-masterminds-sprig-dev golang-github-ghodss-yaml-dev \
              golang-github-xeipuuv-gojsonschema-dev
# test/kube drives kubectl; Debian's kubernetes-client only where no kubectl is installed
# (KUBECTL_PROGRAM: the program looked for).
KUBECTL_PROGRAM ?= kubectl
KUBECTL_DEB := $(if $(shell command -v $(KUBECTL_PROGRAM) 2>/dev/null),,kubernetes-client)
TEST_DEBS  := check python3 python3-grpcio python3-protobuf protobuf-compiler \
              protobuf-compiler-grpc nghttp2-client curl libgrpc++-dev clang libclang-rt-14-dev \
              openssl valgrind jq iproute2 etcd-server python3-hypercorn python3-h2 python3-yaml python3-jwt \
              python3-cryptography strace linux-perf prometheus $(KUBECTL_DEB) $(CHART_DEBS)
# IMAGE_DEBS build the container image (`make image`: image/build.sh).
IMAGE_DEBS := mmdebstrap buildah

# `make deps GOAL...` (the README's `make deps demo`): make looks at the filesystem once and
# remembers it, so rules whose inputs `deps` is about to install (the protobuf well-known types
# under /usr/include, the pkg-config files) would be judged missing for the rest of this run.
# The other goals therefore run in a second make, started after `deps` has finished.
AFTER_DEPS := $(if $(filter deps,$(MAKECMDGOALS)),$(filter-out deps,$(MAKECMDGOALS)))
ifneq ($(AFTER_DEPS),)
.PHONY: deps $(AFTER_DEPS)
deps:
	@sh test/tools/deps.sh $(BUILD_DEBS) $(TEST_DEBS) $(IMAGE_DEBS)
$(AFTER_DEPS): deps
	@$(MAKE) --no-print-directory $@
else

VERSION    ?= 0.1.0
BUILD      ?= build
CC         ?= gcc
ifeq ($(origin CC),default)
CC := gcc
endif
PROTOC_C   ?= protoc-c
Q          ?= @

WARN       := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
              -Wformat=2 -Wno-format-nonliteral -Wvla
STD        := -std=c11 -D_GNU_SOURCE
INC        := -I$(BUILD)/include -I$(BUILD)/gen -Isrc -Iroles -I.
CFLAGS_REL := $(STD) $(WARN) -O2 -g -fno-strict-aliasing -ffunction-sections -fdata-sections \
              -fstack-protector-strong -D_FORTIFY_SOURCE=2 $(INC)
CFLAGS_SAN := $(STD) $(WARN) -O1 -g -fno-omit-frame-pointer -fno-strict-aliasing \
              -fsanitize=address,undefined -fno-sanitize-recover=all $(INC) -DPILLAR_TEST
# libnvme (host NQN/ID files, DH-HMAC-CHAP keys): Debian's libnvme-dev ships libnvme.a, which
# needs libjson-c.a (libjson-c-dev) and libcrypto.a (libssl-dev) after it.
STATIC_LIBS := -lprotobuf-c -lnghttp2 -lmbedtls -lmbedx509 -lmbedcrypto -lyaml -lnvme -ljson-c \
               -lcrypto -lm -pthread -ldl
DYN_LIBS   := -lprotobuf-c -lnghttp2 -lmbedtls -lmbedx509 -lmbedcrypto -lyaml -lnvme -lm -pthread
CHECK_LIBS  = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lm -pthread)

# ---- generated protobuf code -------------------------------------------------------------
PROTOS     := proto/csi.proto proto/pillar_csi/agent/v1/agent.proto proto/grpc/health/v1/health.proto
WKT_DIR    := /usr/include
WKT_PROTOS := google/protobuf/wrappers.proto google/protobuf/timestamp.proto
PB_C       := $(patsubst proto/%.proto,$(BUILD)/gen/%.pb-c.c,$(PROTOS)) \
              $(patsubst %.proto,$(BUILD)/gen/%.pb-c.c,$(WKT_PROTOS))
PB_H       := $(PB_C:.c=.h)

$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: proto/%.proto
	@mkdir -p $(BUILD)/gen
	$(PROTOC_C) -Iproto -I$(WKT_DIR) --c_out=$(BUILD)/gen $<

$(BUILD)/gen/google/protobuf/%.pb-c.c $(BUILD)/gen/google/protobuf/%.pb-c.h: $(WKT_DIR)/google/protobuf/%.proto
	@mkdir -p $(BUILD)/gen
	$(PROTOC_C) -I$(WKT_DIR) --c_out=$(BUILD)/gen google/protobuf/$*.proto

# ---- cJSON from Debian's own source package ----------------------------------------------
# Debian ships no libcjson.a.  We fetch the `cjson` source package of this machine's Debian
# release with a private apt configuration (deb-src of the machine's own sources), apply
# Debian's patches (dpkg-source) and compile cJSON.c into the build directory.
CJSON_DIR  := $(BUILD)/cjson
CJSON_SRC  := $(CJSON_DIR)/src/cJSON.c
CJSON_HDR  := $(BUILD)/include/cjson/cJSON.h

$(CJSON_SRC):
	@sh test/tools/fetch-cjson.sh $(CJSON_DIR)

$(CJSON_HDR): $(CJSON_SRC)
	@mkdir -p $(dir $@)
	cp $(CJSON_DIR)/src/cJSON.h $@

# ---- sources ------------------------------------------------------------------------------
# LIB_EXCLUDE (patterns) leaves work in progress out of a local build: make LIB_EXCLUDE='src/h2/%'
LIB_SRC    := $(filter-out $(LIB_EXCLUDE),$(sort $(wildcard src/*/*.c) $(wildcard roles/*.c) $(wildcard roles/*/*.c)))
MAIN_SRC   := src/main.c
BUILDINFO  := $(BUILD)/gen/buildinfo.h

REL_OBJ    := $(patsubst %.c,$(BUILD)/rel/%.o,$(LIB_SRC) $(MAIN_SRC)) \
              $(patsubst $(BUILD)/gen/%.c,$(BUILD)/rel/gen/%.o,$(PB_C)) $(BUILD)/rel/cjson.o
SAN_OBJ    := $(patsubst %.c,$(BUILD)/san/%.o,$(LIB_SRC)) \
              $(patsubst $(BUILD)/gen/%.c,$(BUILD)/san/gen/%.o,$(PB_C)) $(BUILD)/san/cjson.o

GENERATED  := $(PB_H) $(CJSON_HDR) $(BUILDINFO)

# Generated sources are kept (never treated as intermediate files to delete).
.SECONDARY:

.PHONY: all deps test unit interop crash rbac-mutations bench demo fmt size clean FORCE
all: $(BUILD)/pillar-csi

# Build identity, rewritten only when it changes so that a rebuild stays incremental.
GIT_COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
BUILD_DATE := $(shell date -u -d @$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null || date +%s)} +%Y-%m-%dT%H:%M:%SZ)
$(BUILDINFO): FORCE
	@mkdir -p $(dir $@)
	@printf '#define PILLAR_VERSION "%s"\n#define PILLAR_GIT_COMMIT "%s"\n#define PILLAR_BUILD_DATE "%s"\n' \
	  '$(VERSION)' '$(GIT_COMMIT)' '$(BUILD_DATE)' > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@

$(BUILD)/rel/%.o: %.c | $(GENERATED)
	@mkdir -p $(dir $@)
	@echo '  CC      $<'
	$(Q)$(CC) $(CFLAGS_REL) -MMD -MP -c $< -o $@
$(BUILD)/rel/gen/%.o: $(BUILD)/gen/%.c | $(GENERATED)
	@mkdir -p $(dir $@)
	@echo '  CC      $<'
	$(Q)$(CC) $(CFLAGS_REL) -Wno-missing-prototypes -c $< -o $@
$(BUILD)/rel/cjson.o: $(CJSON_SRC)
	@mkdir -p $(dir $@)
	$(CC) -std=c89 -O2 -g -fstack-protector-strong -c $< -o $@

$(BUILD)/san/%.o: %.c | $(GENERATED)
	@mkdir -p $(dir $@)
	@echo '  CC san  $<'
	$(Q)$(CC) $(CFLAGS_SAN) -MMD -MP -c $< -o $@
$(BUILD)/san/gen/%.o: $(BUILD)/gen/%.c | $(GENERATED)
	@mkdir -p $(dir $@)
	@echo '  CC san  $<'
	$(Q)$(CC) $(CFLAGS_SAN) -Wno-missing-prototypes -c $< -o $@
$(BUILD)/san/cjson.o: $(CJSON_SRC)
	@mkdir -p $(dir $@)
	$(CC) -std=c89 -O1 -g -fsanitize=address,undefined -c $< -o $@

$(BUILD)/pillar-csi: $(REL_OBJ)
	@echo '  LD      $@ (static)'
	$(Q)$(CC) -static -Wl,--gc-sections -o $@ $(REL_OBJ) $(STATIC_LIBS) 2>&1 | \
	  grep -vE 'statically linked applications requires at runtime|: in function .(dlfcn_globallookup|BIO_lookup_ex|BIO_gethostbyname|DSO_dlfcn|h2_addr_parse|h2_)' || true
	@test -x $@

# The shipped binary (the image's /usr/bin/pillar-csi); build/pillar-csi keeps its symbols for debugging.
$(BUILD)/pillar-csi.stripped: $(BUILD)/pillar-csi
	$(Q)strip -o $@.tmp $< && mv $@.tmp $@

size: $(BUILD)/pillar-csi.stripped
	@bytes=$$(stat -c %s $(BUILD)/pillar-csi.stripped); \
	  printf 'pillar-csi stripped: %d bytes (%.2f MiB; goal <= 8 MiB)\n' $$bytes \
	    $$(echo "$$bytes" | awk '{printf "%.2f", $$1/1048576}'); \
	  test $$bytes -le 8388608

# ---- unit tests (Check, ASan+UBSan) -------------------------------------------------------
UNIT_SRC   := $(filter-out $(UNIT_EXCLUDE),$(sort $(wildcard test/unit/test_*.c)))
UNIT_BIN   := $(patsubst test/unit/%.c,$(BUILD)/unit/%,$(UNIT_SRC))
UNIT_HELP  := $(filter-out test/unit/test_%,$(wildcard test/unit/*.c))
UNIT_HOBJ  := $(patsubst %.c,$(BUILD)/san/%.o,$(UNIT_HELP))

$(BUILD)/unit/%: $(BUILD)/san/test/unit/%.o $(UNIT_HOBJ) $(SAN_OBJ)
	@mkdir -p $(dir $@)
	@echo '  LD san  $@'
	$(Q)$(CC) -fsanitize=address,undefined $(UNIT_LDFLAGS) -o $@ $^ $(DYN_LIBS) $(CHECK_LIBS)

# the allocation-failure sweep counts (and fails) allocations through wrappers of its own; with
# libyaml and mbedtls linked statically, --wrap reaches their allocations too
ALLOCFAIL_BIN := $(BUILD)/unit/test_allocfail $(BUILD)/unit/test_allocfail_ctl $(BUILD)/unit/test_allocfail_tls
$(ALLOCFAIL_BIN): UNIT_LDFLAGS := \
  -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup
$(ALLOCFAIL_BIN): DYN_LIBS := -Wl,-Bstatic -lyaml \
  -lmbedtls -lmbedx509 -lmbedcrypto -Wl,-Bdynamic -lprotobuf-c -lnghttp2 -lnvme -lm -pthread

unit: $(UNIT_BIN) $(BUILD)/pillar-csi
	@sh test/tools/layers.sh
	@sh test/tools/deps-check.sh
	@PILLAR_BIN=$(abspath $(BUILD)/pillar-csi) sh test/tools/run-unit.sh $(UNIT_BIN)

INTEROP_SUITES := $(sort $(wildcard test/interop/*/run.sh))
interop: $(BUILD)/pillar-csi $(BUILD)/unit/test_store_contract $(BUILD)/san/lib.a $(BUILD)/rel/lib.a
	@PILLAR_BIN=$(abspath $(BUILD)/pillar-csi) BUILD=$(abspath $(BUILD)) \
	  sh test/tools/run-suites.sh interop $(INTEROP_SUITES)

# The controller crash suite's long run (`make interop` runs 10 rounds): make crash ROUNDS=60,
# CRASH_SEED=N replays a run's random choices, CRASH_STORE=kube uses the test API server.
ROUNDS ?= 60
crash: $(BUILD)/pillar-csi
	@PILLAR_BIN=$(abspath $(BUILD)/pillar-csi) BUILD=$(abspath $(BUILD)) CRASH_ROUNDS=$(ROUNDS) \
	  sh test/interop/controller-crash/run.sh

# RBAC proven by use with every used rule of the chart removed in turn (make interop: a sample).
rbac-mutations: $(BUILD)/pillar-csi
	@PILLAR_BIN=$(abspath $(BUILD)/pillar-csi) BUILD=$(abspath $(BUILD)) RBAC_MUTATIONS=all \
	  sh test/interop/rbac/run.sh

# The README's test command is `make deps test`: unit tests, a few seconds of every fuzz target,
# interop suites, the fast real-kernel scenarios (test/e2e/e2e.mk), the scale scenario (200
# exports, storage reboot: e2e-scale) and the container image (image/image.mk).
test: unit fuzz-brief interop e2e e2e-scale image-test

# The README's main-job command is `make deps demo`: boots the real-kernel test bed (test/e2e,
# topology a; it installs its own host packages and downloads Debian's kernel on first use), runs
# the agent, controller and node roles, provisions a volume over NVMe/TCP, mounts it, writes,
# reboots the storage side and shows the data intact, narrating live (scenario demo).
# BACKEND=file|lvm|zfs picks the agent's backend (zfs builds OpenZFS for the test bed's
# kernel on first use, about 6 min, cached outside the clone).
BACKEND ?= file
demo: $(BUILD)/pillar-csi
	@case "$(BACKEND)" in file|lvm|zfs) ;; *) echo "BACKEND must be file, lvm or zfs" >&2; exit 2;; esac
	@E2E_FOLLOW='@@(SAY|E2E-FAIL)' E2E_BIN=$(abspath $(BUILD)/pillar-csi) E2E_BACKEND=$(BACKEND) \
	  E2E_OUT=$(abspath $(BUILD)/e2e) bash test/e2e/run.sh demo

# ---- fuzzing (libFuzzer, clang, ASan+UBSan; test/fuzz) -------------------------------------
# Every library source is built again with clang (warnings shown, not fatal: gcc is the
# compiler of record) and libFuzzer's coverage instrumentation into
# $(BUILD)/fuzz/lib.a; each test/fuzz/fuzz_<name>.c becomes $(BUILD)/fuzz/fuzz_<name> (helpers:
# the other test/fuzz/*.c).  `make fuzz` runs every target for FUZZ_S seconds from its seed
# corpus test/fuzz/corpus/<name>/; `make test` runs each for FUZZ_BRIEF_S seconds.
FUZZ_CC      ?= clang
FUZZ_S       ?= 300
FUZZ_BRIEF_S ?= 3
FUZZ_CFLAGS  := $(STD) -g -O1 -fno-omit-frame-pointer -fno-strict-aliasing \
                -fsanitize=address,undefined -fno-sanitize-recover=undefined $(INC) -I$(BUILD)/fuzz/gen \
                -Itest/unit -Itest/fuzz
FUZZ_SRC     := $(sort $(wildcard test/fuzz/fuzz_*.c))
FUZZ_BIN     := $(patsubst test/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
FUZZ_HELP    := $(filter-out test/fuzz/fuzz_%,$(wildcard test/fuzz/*.c)) test/unit/fake_agent.c \
                $(BUILD)/fuzz/gen/echo.pb-c.c
FUZZ_OBJ     := $(patsubst %.c,$(BUILD)/fuzz/obj/%.o,$(LIB_SRC)) \
                $(patsubst $(BUILD)/gen/%.c,$(BUILD)/fuzz/obj/gen/%.o,$(PB_C)) $(BUILD)/fuzz/obj/cjson.o
FUZZ_HOBJ    := $(patsubst %.c,$(BUILD)/fuzz/obj/%.o,$(filter-out $(BUILD)/%,$(FUZZ_HELP))) \
                $(BUILD)/fuzz/obj/echo.pb-c.o

$(BUILD)/fuzz/gen/%.pb-c.c $(BUILD)/fuzz/gen/%.pb-c.h: test/interop/grpc/%.proto
	@mkdir -p $(BUILD)/fuzz/gen
	$(PROTOC_C) -Itest/interop/grpc --c_out=$(BUILD)/fuzz/gen $<
$(BUILD)/fuzz/obj/echo.pb-c.o: $(BUILD)/fuzz/gen/echo.pb-c.c
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(BUILD)/fuzz/obj/%.o: %.c | $(GENERATED) $(BUILD)/fuzz/gen/echo.pb-c.h
	@mkdir -p $(dir $@)
	@echo '  CC fuzz $<'
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(filter-out -Werror,$(WARN)) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@
$(BUILD)/fuzz/obj/gen/%.o: $(BUILD)/gen/%.c | $(GENERATED)
	@mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(BUILD)/fuzz/obj/cjson.o: $(CJSON_SRC)
	@mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) -std=c89 -g -O1 -fsanitize=address,undefined,fuzzer-no-link -c $< -o $@
$(BUILD)/fuzz/lib.a: $(FUZZ_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^
$(BUILD)/fuzz/fuzz_%: $(BUILD)/fuzz/obj/test/fuzz/fuzz_%.o $(FUZZ_HOBJ) $(BUILD)/fuzz/lib.a
	@echo '  LD fuzz $@'
	$(Q)$(FUZZ_CC) -fsanitize=fuzzer,address,undefined $(FUZZ_LDFLAGS) -o $@ $^ $(DYN_LIBS)

# the node's target confines the node's file changes to its scratch directory (its header says why)
$(BUILD)/fuzz/fuzz_csi_node: FUZZ_LDFLAGS := -Wl,--wrap=open,--wrap=mkdir,--wrap=rmdir,--wrap=unlink,--wrap=rename,--wrap=openat,--wrap=mkdirat,--wrap=unlinkat

.PHONY: fuzz fuzz-brief
fuzz: $(FUZZ_BIN)
	@FUZZ_S=$(FUZZ_S) sh test/fuzz/run.sh $(abspath $(BUILD)/fuzz) $(FUZZ_BIN)
fuzz-brief: $(FUZZ_BIN)
	@FUZZ_S=$(FUZZ_BRIEF_S) sh test/fuzz/run.sh $(abspath $(BUILD)/fuzz) $(FUZZ_BIN)

BENCH_SUITES := $(sort $(wildcard test/bench/*/run.sh))
# Bench drivers: test/bench/<suite>/*_bench.c linked -O2 with the library objects.
BENCH_BIN  := $(patsubst test/bench/%.c,$(BUILD)/bench/%,$(sort $(wildcard test/bench/*/*_bench.c)))
LIB_REL_OBJ := $(filter-out $(BUILD)/rel/$(MAIN_SRC:.c=.o),$(REL_OBJ))
$(BUILD)/bench/%: $(BUILD)/rel/test/bench/%.o $(LIB_REL_OBJ)
	@mkdir -p $(dir $@)
	@echo '  LD      $@'
	$(Q)$(CC) -o $@ $^ $(DYN_LIBS)
bench: $(BUILD)/pillar-csi $(BENCH_BIN)
	@PILLAR_BIN=$(abspath $(BUILD)/pillar-csi) BUILD=$(abspath $(BUILD)) \
	  sh test/tools/run-suites.sh bench $(BENCH_SUITES)

# ---- the library as archives, for test drivers built outside make --------------------------
# The interop drivers (test/interop/kube-client, test/interop/grpc) link one of these through
# test/tools/lib-link.sh: the linker takes the objects a driver uses, so no suite keeps a list
# of source files.  san: compiled as for the unit tests (ASan+UBSan); rel: as the shipped binary.
LIB_SAN_A  := $(BUILD)/san/lib.a
LIB_REL_A  := $(BUILD)/rel/lib.a
$(LIB_SAN_A): $(SAN_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^
$(LIB_REL_A): $(LIB_REL_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^

# make print-VAR prints a variable's value on one line (test/tools/lib-link.sh).
print-%:
	@echo '$($*)'

deps:
	@sh test/tools/deps.sh $(BUILD_DEBS) $(TEST_DEBS) $(IMAGE_DEBS)

# The packages `make deps` installs, one line (test/tools/deps-check.sh).
deps-list:
	@echo $(BUILD_DEBS) $(TEST_DEBS) $(IMAGE_DEBS)

fmt:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD)

include test/e2e/e2e.mk
include image/image.mk
-include $(shell find $(BUILD)/rel $(BUILD)/san $(BUILD)/fuzz/obj -name '*.d' 2>/dev/null)

endif # AFTER_DEPS
