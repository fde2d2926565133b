# moejit — the only build entry.
#
#   make            library (static + shared), CLI, compile worker
#   make test       every CPU test, then again under AddressSanitizer + UBSan
#   make test-gpu   the GPU suites (skip with "no CUDA device" where there is none)
#   make run        build, then the main job: `moejit demo` on its embedded default
#   make bundle     copy the non-toolkit shared libraries beside the binaries (for the GPU host)
#
# The CUDA toolkit is found from CUDA_HOME, then nvcc on PATH, then /usr/local/cuda.

SHELL := /bin/bash
.DEFAULT_GOAL := all
.DELETE_ON_ERROR:

# ---- toolkit ---------------------------------------------------------------------------
NVCC_ON_PATH := $(shell command -v nvcc 2>/dev/null)
CUDA_HOME ?= $(if $(NVCC_ON_PATH),$(patsubst %/bin/nvcc,%,$(realpath $(NVCC_ON_PATH))),$(wildcard /usr/local/cuda))
ifeq ($(strip $(CUDA_HOME)),)
$(error no CUDA toolkit found: set CUDA_HOME, put nvcc on PATH, or install it at /usr/local/cuda)
endif
ifeq ($(wildcard $(CUDA_HOME)/include/nvrtc.h),)
$(error CUDA toolkit at $(CUDA_HOME) has no include/nvrtc.h: set CUDA_HOME to a full toolkit)
endif
CUDA_LIB := $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib))

# ---- Debian packages -----------------------------------------------------------------------
DEB_PACKAGES := check libcjson-dev pkg-config libssl-dev clang libhiredis-dev redis-server libxxhash-dev
PKGS := check libcjson libcrypto hiredis libxxhash

BUILD := build

# ---- install locations (make install PREFIX=... DESTDIR=...) -----------------------------
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
LIBEXECDIR ?= $(PREFIX)/libexec
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DEPS_STAMP := $(BUILD)/.deps-ok

# Re-checked when the Makefile (its package list) changes.
$(DEPS_STAMP): Makefile
	@mkdir -p $(BUILD)
	@if ! command -v pkg-config >/dev/null || ! pkg-config --exists $(PKGS) || ! command -v redis-server >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian packages: $(DEB_PACKAGES)"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(DEB_PACKAGES)) >$(BUILD)/apt.log 2>&1 \
	      || { cat $(BUILD)/apt.log; echo "error: apt-get install failed"; exit 1; }; \
	  else \
	    echo "error: missing packages; run: sudo apt-get install -y $(DEB_PACKAGES)"; exit 1; \
	  fi; \
	fi
	@touch $@

# pkg-config is only asked once the stamp exists (it may have just been installed).
# hiredis_ssl (hiredis >= 1.0) enables MOEJIT_REMOTE_TLS=1; without it the remote tier refuses TLS.
HIREDIS_SSL = $(shell pkg-config --exists hiredis_ssl 2>/dev/null && echo hiredis_ssl)
PKG_CFLAGS = $(shell pkg-config --cflags libcjson libcrypto hiredis libxxhash $(HIREDIS_SSL) 2>/dev/null) $(if $(HIREDIS_SSL),-DMJ_HAVE_HIREDIS_SSL)
PKG_LIBS = $(shell pkg-config --libs libcjson libcrypto hiredis libxxhash $(HIREDIS_SSL) 2>/dev/null)
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null)

# ---- flags ---------------------------------------------------------------------------------
CC ?= gcc
OPT ?= -O2
WARN := -Wall -Wextra -Werror -Wno-missing-field-initializers
# Includes name their layer ("core/spec.h"), so the include graph shows the layering.
CPPFLAGS := -D_GNU_SOURCE -I. -Iinclude -isystem $(CUDA_HOME)/include
TEST_CPPFLAGS := -Itests
CFLAGS := -std=c11 $(OPT) -g $(WARN) -fPIC -pthread -fvisibility=hidden
# GCC's undefined leaves out float-cast-overflow, float-divide-by-zero (no code divides floats
# by zero on purpose) and bounds-strict (trailing arrays too); each is asked for by name.
SAN_FLAGS := -fsanitize=address,undefined,float-cast-overflow,float-divide-by-zero,bounds-strict -fno-omit-frame-pointer -fno-sanitize-recover=all
RPATH := -Wl,-rpath,'$$ORIGIN/../lib' -Wl,-rpath,$(CUDA_LIB)
LDLIBS = $(PKG_LIBS) -L$(CUDA_LIB) -lnvrtc -ldl -lpthread -lm

# ---- sources -------------------------------------------------------------------------------
WORKER_SRC := codegen/compile_worker.c
# The library's layers, bottom up: each includes only from those before it (make test checks).
LIB_SRCS := $(sort $(filter-out $(WORKER_SRC),$(wildcard core/*.c codegen/*.c cache/*.c reference/*.c runtime/*.c)))
TEMPLATES := $(sort $(wildcard templates/*.cuh templates/*/*.cuh templates/*/*.h))
TOOL_SRCS := $(sort $(wildcard tools/*.c))
TEST_LIB_SRCS := $(sort $(wildcard tests/lib/*.c))
CHECK_SRCS := $(sort $(wildcard tests/check_*.c))
GPU_SRCS := $(sort $(wildcard tests/gpu/*.c))

EMBED_TOOL := $(BUILD)/host/embed_templates
EMBED_C := $(BUILD)/gen/templates_embedded.c

obj = $(patsubst %.c,$(1)/obj/%.o,$(2))
LIB_OBJS := $(call obj,$(BUILD),$(LIB_SRCS)) $(BUILD)/obj/gen/templates_embedded.o
ASAN_OBJS := $(call obj,$(BUILD)/asan,$(LIB_SRCS)) $(BUILD)/asan/obj/gen/templates_embedded.o

VERSION := $(shell sed -n 's/^\#define MOEJIT_VERSION_STRING "\(.*\)"/\1/p' include/moejit.h)
SONAME := libmoejit.so.0
REALNAME := libmoejit.so.$(VERSION)
LIB_A := $(BUILD)/lib/libmoejit.a
LIB_SO := $(BUILD)/lib/$(REALNAME)
ASAN_LIB_A := $(BUILD)/asan/lib/libmoejit.a
CLI := $(BUILD)/bin/moejit
WORKER := $(BUILD)/libexec/moejit-compile-worker
CHECK_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(CHECK_SRCS))
ASAN_CHECK_BINS := $(patsubst tests/%.c,$(BUILD)/asan/tests/%,$(CHECK_SRCS))
GPU_BIN := $(BUILD)/tests/gpu_suite

.PHONY: all test test-cpu test-asan test-gpu run install bundle clean deps readme-example readme-matrix readme sass-digest install-check FORCE
all: $(DEPS_STAMP) $(LIB_A) $(LIB_SO) $(BUILD)/lib/$(SONAME) $(BUILD)/lib/libmoejit.so $(CLI) $(WORKER)
deps: $(DEPS_STAMP)

# ---- embedded templates ----------------------------------------------------------------------
$(EMBED_TOOL): codegen/embed/embed_templates.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O1 $(WARN) -o $@ $<

$(EMBED_C): $(EMBED_TOOL) $(TEMPLATES)
	@mkdir -p $(dir $@)
	$(EMBED_TOOL) templates $@ $(TEMPLATES)

$(BUILD)/obj/gen/templates_embedded.o: $(EMBED_C) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<
$(BUILD)/asan/obj/gen/templates_embedded.o: $(EMBED_C) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(SAN_FLAGS) -c -o $@ $<

# ---- library -------------------------------------------------------------------------------
$(BUILD)/obj/tests/%.o $(BUILD)/asan/obj/tests/%.o: CPPFLAGS += $(TEST_CPPFLAGS)
$(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<
$(BUILD)/asan/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) $(SAN_FLAGS) -MMD -MP -c -o $@ $<

$(LIB_A): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^
$(ASAN_LIB_A): $(ASAN_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^
# The shared library names the toolkit's directory only where the dynamic linker cannot find
# NVRTC by itself (a toolkit installed without an ld.so.conf entry).
SO_RPATH := $(if $(shell /sbin/ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so\.' && echo found),,-Wl,-rpath,$(CUDA_LIB))
$(LIB_SO): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,$(SONAME) $(SO_RPATH) -o $@ $^ $(LDLIBS)
$(BUILD)/lib/$(SONAME): $(LIB_SO)
	ln -sf $(REALNAME) $@
$(BUILD)/lib/libmoejit.so: $(BUILD)/lib/$(SONAME)
	ln -sf $(SONAME) $@

# The library looks for its compile worker in LIBEXECDIR after the places beside itself; the
# object is rebuilt when LIBEXECDIR changes (the stamp's content is the directory).
INSTALL_DIR_STAMP := $(BUILD)/gen/libexecdir
$(INSTALL_DIR_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(LIBEXECDIR)' | cmp -s - $@ || echo '$(LIBEXECDIR)' > $@
$(BUILD)/obj/codegen/nvrtc_compile.o $(BUILD)/asan/obj/codegen/nvrtc_compile.o: $(INSTALL_DIR_STAMP)
$(BUILD)/obj/codegen/nvrtc_compile.o $(BUILD)/asan/obj/codegen/nvrtc_compile.o: \
  CPPFLAGS += -DMJ_WORKER_INSTALL_DIR='"$(LIBEXECDIR)"'
FORCE:

# ---- programs ------------------------------------------------------------------------------
$(CLI): $(call obj,$(BUILD),$(TOOL_SRCS)) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(RPATH) $(LDLIBS)
$(WORKER): $(BUILD)/obj/$(WORKER_SRC:.c=.o) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(RPATH) $(LDLIBS)

# ---- tests ---------------------------------------------------------------------------------
$(BUILD)/tests/check_%: $(BUILD)/obj/tests/check_%.o $(call obj,$(BUILD),$(TEST_LIB_SRCS)) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(filter-out %.a,$^) $(filter %.a,$^) $(RPATH) $(CHECK_LIBS) $(LDLIBS)
$(BUILD)/asan/tests/check_%: $(BUILD)/asan/obj/tests/check_%.o $(call obj,$(BUILD)/asan,$(TEST_LIB_SRCS)) $(ASAN_LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN_FLAGS) -o $@ $(filter-out %.a,$^) $(filter %.a,$^) $(RPATH) $(CHECK_LIBS) $(LDLIBS)
# check_bench_floor tests a module of the CLI (tools/bench_floor.c): linked in beside the suite.
$(BUILD)/tests/check_bench_floor: $(BUILD)/obj/tools/bench_floor.o
$(BUILD)/asan/tests/check_bench_floor: $(BUILD)/asan/obj/tools/bench_floor.o
# tests/lib's emit checks use Check's assertions, so the GPU suite links Check too.
$(GPU_BIN): $(call obj,$(BUILD),$(GPU_SRCS) $(TEST_LIB_SRCS) tools/gpu_harness.c) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(RPATH) $(CHECK_LIBS) $(LDLIBS)

# The README's C example is compiled and linked, so the documentation cannot rot.
README_EXAMPLE := $(BUILD)/readme/example
$(BUILD)/readme/example.c: README.md
	@mkdir -p $(dir $@)
	sed -n '/<!-- example:begin -->/,/<!-- example:end -->/p' $< | sed '/^```/d;/<!--/d' > $@
	@test -s $@ || { echo "error: README.md has no example block"; exit 1; }
$(README_EXAMPLE): $(BUILD)/readme/example.c $(LIB_A)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LIB_A) $(RPATH) $(LDLIBS)
readme-example: $(README_EXAMPLE)

# The SASS checks (HGMMA in the wgmma kernels) need a disassembler, which this toolkit lacks;
# PyPI's NVIDIA packages carry nvdisasm and cuobjdump. Without network the checks say SKIP.
DISASM_DIR := $(BUILD)/pytools
NVDISASM := $(DISASM_DIR)/nvidia/cu13/bin/nvdisasm
$(NVDISASM):
	@python3 -m pip install -q --disable-pip-version-check --target $(DISASM_DIR) \
	  nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump >$(BUILD)/pip.log 2>&1 \
	  || echo "note: could not install nvidia-cuda-nvdisasm (see $(BUILD)/pip.log); SASS checks will skip"
	@test -x $@ && echo "disassembler: $@" || true

TEST_ENV := MOEJIT_NVDISASM=$(abspath $(NVDISASM)) MOEJIT_CUOBJDUMP=$(abspath $(DISASM_DIR))/nvidia/cu13/bin/cuobjdump \
            MOEJIT_COMPILE_WORKER=$(abspath $(WORKER)) CK_DEFAULT_TIMEOUT=1200 \
            MOEJIT_TEST_BUILD=$(abspath $(BUILD)) MOEJIT_CLI=$(abspath $(CLI)) \
            MOEJIT_SOURCE_DIR=$(CURDIR) MOEJIT_CACHE_DIR=$(abspath $(BUILD))/test-cache

test: test-cpu test-asan

# The suites run TEST_JOBS at a time (tests/run_suites.sh; default: the cores, at most 4), the
# longest first: most compile kernels on one core, so one at a time left a core of CI idle.
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)
LONG_CHECKS := check_wgmma_emit check_compile_matrix check_w4_emit check_mma_emit check_wgmma_fp8
ordered = $(foreach c,$(LONG_CHECKS),$(filter %/$(c),$(1))) $(filter-out $(addprefix %/,$(LONG_CHECKS)),$(1))

test-cpu: all $(CHECK_BINS) $(GPU_BIN) $(README_EXAMPLE) $(NVDISASM) install-check fuzz-smoke
	@env $(TEST_ENV) bash tests/run_suites.sh cpu $(TEST_JOBS) $(call ordered,$(CHECK_BINS)) \
	  $(foreach b,mma wgmma,"MOEJIT_GPU_SEED=1 $(GPU_BIN) --dry-run --backend $(b) --only fuzz --fuzz 60 | tail -1") \
	  "$(PYENV)/bin/python tests/check_bench_scripts.py"

# Sanitizers: the same suites against the ASan+UBSan build of the library. Suites that
# only repeat NVRTC compiles (MOEJIT_TEST_QUICK) keep a sample of their matrix.
test-asan: all $(ASAN_CHECK_BINS)
	@env $(TEST_ENV) MOEJIT_TEST_QUICK=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 CK_FORK=no \
	  bash tests/run_suites.sh asan $(TEST_JOBS) $(call ordered,$(ASAN_CHECK_BINS))

# The GPU suite (simt against the float64 reference: every activation, every format, fuzz; then
# the same on wgmma and mma, with 320 fuzz configurations each), then the tensor-core backends
# against the reference (small shapes, every routing method; then the W1 layouts, biases and
# per-expert overrides, with their negative controls) and against simt (model shapes), then
# the Python package's GPU tests. Each prints "no CUDA device" and succeeds where there is
# none. tests/gpu/run_device.sh runs the same on a device machine from a carried build.
test-gpu: all $(GPU_BIN) python
	$(TEST_ENV) $(GPU_BIN)
	$(TEST_ENV) $(GPU_BIN) --backend wgmma --fuzz 320
	$(TEST_ENV) $(GPU_BIN) --backend mma --fuzz 320
	@if $(CLI) --version | grep -q '^CUDA driver [0-9]'; then \
	  $(TEST_ENV) $(CLI) bench layer --check --no-time --backend mma,wgmma --routing all --batches 1,2,64,512,4096 && \
	  $(TEST_ENV) $(CLI) bench layer --check --no-time --backend mma,wgmma --routing all --quant w4a16,mxfp4 \
	    --batches 1,4,64,512,4096 && \
	  $(TEST_ENV) $(CLI) bench layer --check --no-time --backend mma,wgmma --extras --batches 1,2,5,64,512,4096; \
	else echo "no CUDA device: skipping the tensor-core backend checks"; fi
	cd $(BUILD) && PYTHONPATH=$(PYSITE) MOEJIT_CACHE_DIR=$(abspath $(BUILD))/pytest-cache $(PYENV)/bin/python \
	  -m pytest -q -p no:cacheprovider $(CURDIR)/python/tests/test_gpu.py

run: all
	$(CLI) demo

# ---- fuzzing (libFuzzer) ------------------------------------------------------------------------
# fuzz/<target>.c against the library (and the CLI's modules) built with clang's fuzzer, ASan and
# UBSan. `make fuzz` runs each target FUZZ_SECONDS; `make test` (fuzz-smoke) replays each seed
# corpus (fuzz/corpus/<target>/) and fuzzes FUZZ_SMOKE_SECONDS. New inputs go to build/fuzz/corpus.
.PHONY: fuzz fuzz-smoke
FUZZ_TARGETS := spec_parse spec_json activation_parse entry_decode pack_import manifest
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 10
FUZZ_CC ?= clang
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_CFLAGS := -std=c11 -g -O1 -pthread -fno-omit-frame-pointer -fno-sanitize-recover=all
FUZZ_SAN := address,undefined,float-cast-overflow,float-divide-by-zero
FUZZ_OBJS := $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(LIB_SRCS) $(filter-out tools/moejit.c,$(TOOL_SRCS))) \
             $(FUZZ_DIR)/obj/gen/templates_embedded.o
FUZZ_LIB := $(FUZZ_DIR)/libmoejit-fuzz.a
FUZZ_BINS := $(addprefix $(FUZZ_DIR)/bin/,$(FUZZ_TARGETS))
FUZZ_CLANG := $(FUZZ_DIR)/.clang-ok
$(FUZZ_CLANG):
	@mkdir -p $(dir $@)
	@if ! command -v $(FUZZ_CC) >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing clang for the fuzz targets"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang) >$(FUZZ_DIR)/apt.log 2>&1 \
	      || { cat $(FUZZ_DIR)/apt.log; echo "error: apt-get install clang failed"; exit 1; }; \
	  else echo "error: the fuzz targets need clang; run: sudo apt-get install -y clang"; exit 1; fi; \
	fi
	@touch $@
$(FUZZ_DIR)/obj/gen/templates_embedded.o: $(EMBED_C) | $(FUZZ_CLANG)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,$(FUZZ_SAN) -c -o $@ $<
$(FUZZ_DIR)/obj/%.o: %.c | $(DEPS_STAMP) $(FUZZ_CLANG)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(PKG_CFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,$(FUZZ_SAN) -MMD -MP -c -o $@ $<
# An archive, so that each target links only the objects it reaches.
$(FUZZ_LIB): $(FUZZ_OBJS)
	rm -f $@ && ar rcs $@ $^
$(FUZZ_DIR)/bin/%: fuzz/%.c fuzz/fuzz_util.h $(FUZZ_LIB)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(PKG_CFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer,$(FUZZ_SAN) -o $@ $< $(FUZZ_LIB) \
	  $(RPATH) $(LDLIBS)
# One target: its work corpus (new inputs) first, then the seeds; crashes land in $(FUZZ_DIR).
FUZZ_RUN = mkdir -p $(FUZZ_DIR)/corpus/$$t && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  $(FUZZ_DIR)/bin/$$t -max_total_time=$$secs -dict=fuzz/$$t.dict -close_fd_mask=3 -timeout=20 -rss_limit_mb=4096 \
  -artifact_prefix=$(FUZZ_DIR)/crash-$$t- $(FUZZ_DIR)/corpus/$$t fuzz/corpus/$$t
fuzz: $(FUZZ_BINS)
	@set -e; secs=$(FUZZ_SECONDS); for t in $(FUZZ_TARGETS); do echo "== fuzz $$t ($$secs s)"; $(FUZZ_RUN); done
fuzz-smoke: $(FUZZ_BINS)
	@set -e; secs=$(FUZZ_SMOKE_SECONDS); for t in $(FUZZ_TARGETS); do echo "== fuzz-smoke $$t ($$secs s)"; \
	  $(FUZZ_RUN) 2>$(FUZZ_DIR)/$$t.log || { tail -60 $(FUZZ_DIR)/$$t.log; exit 1; }; tail -1 $(FUZZ_DIR)/$$t.log; done

# ---- install -------------------------------------------------------------------------------
# install-check: `make install` into a prefix under build/ from a build of its own, then
# examples/forward.c built against it the way a user would (pkg-config, shared and static)
# and run with no environment at all: the installed library must find its worker by itself.
INSTALL_CHECK := $(BUILD)/install-check
INSTALL_PREFIX := $(abspath $(INSTALL_CHECK))/prefix
INSTALL_PC = env PKG_CONFIG_PATH=$(INSTALL_PREFIX)/lib/pkgconfig pkg-config
EXAMPLE_CUDART := -isystem $(CUDA_HOME)/include -L$(CUDA_LIB) -lcudart_static -lrt -ldl -lpthread -lm
install-check: $(DEPS_STAMP)
	@mkdir -p $(INSTALL_CHECK)
	@$(MAKE) --no-print-directory BUILD=$(INSTALL_CHECK)/build PREFIX=$(INSTALL_PREFIX) install \
	  >$(INSTALL_CHECK)/install.log 2>&1 || { cat $(INSTALL_CHECK)/install.log; exit 1; }
	@mkdir -p $(INSTALL_CHECK)/examples
	$(CC) -std=c11 $(WARN) -o $(INSTALL_CHECK)/examples/forward examples/forward.c \
	  $$($(INSTALL_PC) --cflags --libs moejit) -Wl,-rpath,$(INSTALL_PREFIX)/lib $(EXAMPLE_CUDART)
	$(CC) -std=c11 $(WARN) -o $(INSTALL_CHECK)/examples/forward-static examples/forward.c \
	  $$($(INSTALL_PC) --cflags moejit) $(INSTALL_PREFIX)/lib/libmoejit.a \
	  $$($(INSTALL_PC) --static --libs moejit | sed 's/-lmoejit//') $(EXAMPLE_CUDART)
	env -i $(INSTALL_CHECK)/examples/forward
	env -i MOEJIT_CACHE_MODE=off $(INSTALL_CHECK)/examples/forward-static
	@# Without its worker the static program fails, naming the installed location among those tried.
	@mv $(INSTALL_PREFIX)/libexec/moejit-compile-worker $(INSTALL_CHECK)/worker.moved
	@! env -i MOEJIT_CACHE_MODE=off $(INSTALL_CHECK)/examples/forward-static 2>$(INSTALL_CHECK)/noworker.err
	@mv $(INSTALL_CHECK)/worker.moved $(INSTALL_PREFIX)/libexec/moejit-compile-worker
	@grep -q 'tried .*$(INSTALL_PREFIX)/libexec/moejit-compile-worker' $(INSTALL_CHECK)/noworker.err \
	  || { cat $(INSTALL_CHECK)/noworker.err; echo "error: the missing-worker message does not name the installed path"; exit 1; }
	@cat $(INSTALL_CHECK)/noworker.err
	@echo "install-check: the installed library, shared and static, compiles a layer with no environment"
$(BUILD)/moejit.pc: Makefile include/moejit.h
	@mkdir -p $(dir $@)
	@printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' \
	  'Name: moejit' 'Description: JIT-compiled, cached fused Mixture-of-Experts GPU kernels' \
	  'Version: $(VERSION)' 'Requires.private: libcjson libcrypto hiredis libxxhash $(HIREDIS_SSL)' \
	  'Libs: -L$${libdir} -lmoejit' 'Libs.private: -L$(CUDA_LIB) -lnvrtc -ldl -lpthread -lm' \
	  'Cflags: -I$${includedir}' > $@

install: all $(BUILD)/moejit.pc
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(INCLUDEDIR) \
	  $(DESTDIR)$(PKGCONFIGDIR)
	install -m 0644 include/moejit.h $(DESTDIR)$(INCLUDEDIR)/moejit.h
	install -m 0644 $(LIB_A) $(DESTDIR)$(LIBDIR)/libmoejit.a
	install -m 0755 $(LIB_SO) $(DESTDIR)$(LIBDIR)/$(REALNAME)
	ln -sf $(REALNAME) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libmoejit.so
	install -m 0755 $(WORKER) $(DESTDIR)$(LIBEXECDIR)/moejit-compile-worker
	install -m 0755 $(CLI) $(DESTDIR)$(BINDIR)/moejit
	install -m 0644 $(BUILD)/moejit.pc $(DESTDIR)$(PKGCONFIGDIR)/moejit.pc

# One line per spec of tests/sass_specs.txt: a digest of its SASS and the spec. A change meant
# to keep the machine code (a refactor of templates, of code generation or of the build) shows
# the same lines before and after: `make sass-digest > a`, change, `make sass-digest > b`,
# `diff a b`. Compiles into its own cache directory, so nothing stale is compared.
sass-digest: all $(NVDISASM)
	@rm -rf $(BUILD)/sass-cache
	@grep -v '^#' tests/sass_specs.txt | grep . | while IFS= read -r spec; do \
	  h=$$(MOEJIT_NVDISASM=$(abspath $(NVDISASM)) $(CLI) inspect "$$spec" --sass --cache-dir $(BUILD)/sass-cache \
	       | sha256sum | cut -c1-16) && echo "$$h $$spec" || exit 1; \
	done

# Libraries the GPU host lacks (no cJSON there), copied beside libmoejit.
bundle: all $(GPU_BIN)
	@for l in libcjson.so.1 libcrypto.so.3 libhiredis.so.0.14 libxxhash.so.0; do \
	  p=$$(ldconfig -p | awk -v l=$$l '$$1==l && /x86-64/ {print $$NF; exit}'); \
	  test -n "$$p" && cp -L $$p $(BUILD)/lib/ && echo "bundled $$p"; \
	done

# Regenerates the README's generated blocks (tests/check_readme.c fails when they drift): the
# support matrix from the backends' declarations, the settings table from the one settings
# table, and each command's synopsis from its --help.
README_COMMANDS := demo warm inspect cache matrix "bench jit" "bench layer" tune config
readme: $(CLI)
	$(CLI) matrix --format markdown > $(BUILD)/readme-matrix.md
	$(CLI) config --markdown > $(BUILD)/readme-settings.md
	{ echo '```'; for c in $(README_COMMANDS); do $(CLI) $$c --help | sed -n '1,/^$$/p' \
	  | sed '/^$$/d; s/^usage: //; s/^       //'; done; echo '```'; } > $(BUILD)/readme-usage.md
	for b in matrix settings usage; do \
	  awk -v f=$(BUILD)/readme-$$b.md -v b=$$b '$$0 == "<!-- " b ":begin -->" {print; while ((getline l < f) > 0) print l; skip=1; next} \
	    $$0 == "<!-- " b ":end -->" {skip=0} !skip' README.md > $(BUILD)/README.new && mv $(BUILD)/README.new README.md; \
	done
readme-matrix: readme

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# ---- python ----------------------------------------------------------------------------------
# The Python package (python/) in a virtual environment: pytest and torch from PyPI (about 5 GB
# with torch's CUDA libraries, so the environment is kept once per user, outside the build
# folder, and shared by every clone), then ./python built from this tree's $(BUILD) and its
# tests run (the GPU tests skip with "no CUDA device" where there is none).
PY_REQUIREMENTS := 'setuptools>=70' wheel pytest torch
PYENV ?= $(if $(HOME),$(HOME)/.cache/moejit-build/pyenv,$(abspath $(BUILD))/pyenv)
$(PYENV)/.deps-ok:
	python3 -m venv $(PYENV)
	$(PYENV)/bin/python -m pip install -q --disable-pip-version-check $(PY_REQUIREMENTS)
	@touch $@
# The package itself goes into this build's own folder (the shared environment holds only its
# dependencies), so two trees never test each other's build.
PYSITE := $(abspath $(BUILD))/pysite
python: all $(PYENV)/.deps-ok
	rm -rf $(PYSITE)
	MOEJIT_BUILD_DIR=$(abspath $(BUILD)) $(PYENV)/bin/python -m pip install -q --disable-pip-version-check \
	  --no-build-isolation --no-deps --target $(PYSITE) ./python
test-python: python
	cd $(BUILD) && PYTHONPATH=$(PYSITE) PYTHONDONTWRITEBYTECODE=1 MOEJIT_CACHE_DIR=$(abspath $(BUILD))/pytest-cache \
	  $(PYENV)/bin/python -m pytest -q -p no:cacheprovider $(CURDIR)/python/tests
test-cpu: test-python
.PHONY: python test-python
