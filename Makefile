# bench: one build for everything.
#   make            release build: build/bench and build/modules/*.so
#   make test       installs what is missing, builds under ASan+UBSan (build/asan), runs every test
#   make test-slow  the slow tests (tests/slow_*.c: interruptions, memory limits), as CI runs them
#   make run        installs what is missing, builds, makes the default model, runs scenarios/mmap_vs_pread.json
#   make debug      -O0 build in build/debug
#   make asan       the sanitizer build alone
#   make valgrind   runs the test suite's memcheck pass on the release build
#   make archgraph  draws docs/ARCHITECTURE.md's folder graph ($(BUILD)/architecture.svg; needs graphviz)
#   make openai-client  the openai npm package into build/node_modules, for test_openai (needs npm)
#   make tools      the standalone benchmarks and investigations of tools/ in $(BUILD)/tools
#   make fuzz       libFuzzer targets, FUZZ_SECONDS=N each (fuzz/fuzz.mk, docs/reliability.md)
#   make install   PREFIX=/usr/local DESTDIR=: bench, its modules, include/bench/*.h and bench.pc (docs/modules.md)
#   make clean
# Switches: CC=..., BUILD=dir, SAN=1 (sanitizers), OPT=-O0, CUDA=0 to skip nvcc even when present
#   (CUDA=1 insists on it), NVCC=path, CUDA_ARCH='-gencode ...' (default: sm_80, sm_90 + compute_90 PTX).
#   Changing a switch rebuilds everything of that BUILD dir ($(BUILD)/flags.stamp).

ifeq ($(origin CC),default)
  CC = gcc
endif
BUILD   ?= build
OPT     ?= -O2
SHARED  ?= $(abspath ../shared)
SAN     ?= 0

WARN     = -Wall -Wextra -Werror -Wno-unused-parameter
CPPFLAGS = -D_GNU_SOURCE -MMD -MP -I. -I/usr/include/cjson
# Hidden by default: a module's shared object exports only what BENCH_MODULE_EXPORT marks.
CFLAGS   = -std=c17 $(OPT) -g -fno-omit-frame-pointer -fPIC -fvisibility=hidden -pthread $(WARN)
LDFLAGS  = -pthread
LDLIBS   = -lcjson -lpfm -ldl -lm -lutf8proc
# bench serve's server and the http target's client (harness/net)
# libcurl and libmicrohttpd: their headers at build time; the libraries are dlopen'd at first
# use (harness/net/netlib.h), not linked, so that no worker maps them unless it talks HTTP
NET_PKGS = libmicrohttpd libcurl
CPPFLAGS += $(shell pkg-config --cflags $(NET_PKGS) 2>/dev/null)
ifeq ($(SAN),1)
  CFLAGS  += -fsanitize=address,undefined -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
else ifneq ($(OPT),-O0)
  # Release builds drop the allocators' debug checks, which double their cost.
  CPPFLAGS += -DNDEBUG
endif

UTIL_SRC    := $(wildcard util/*.c)
CORE_SRC    := $(wildcard engines/core/*/*.c)
ALLOC_SRC   := $(wildcard allocators/*.c)
HARNESS_SRC := $(filter-out harness/cli/main.c,$(wildcard harness/*/*.c))
MODULE_SRC  := $(wildcard engines/modules/*.c)
MODCOMMON_SRC := $(wildcard engines/modules/common/*.c)
CUDAHOST_SRC := $(wildcard engines/cuda/host/*.c)
TEST_SRC    := $(wildcard tests/test_*.c)
SLOW_SRC    := $(wildcard tests/slow_*.c)
TESTLIB_SRC := $(wildcard tests/lib/*.c)
TOOL_SRC    := $(wildcard tools/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

# ---- CUDA (docs/cuda.md): the device module and the cuda loader/KV modules, built when
# nvcc is found. The bench binary never links the CUDA runtime: the engine dlopens
# modules/device_cuda.so for --device cuda, and the modules under modules/cuda/.
ifeq ($(origin NVCC),undefined)
  NVCC := $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
endif
CUDA ?= $(if $(NVCC),1,0)
ifeq ($(CUDA),1)
  ifeq ($(NVCC),)
    $(error CUDA=1 but no nvcc found: put it on the PATH or give NVCC=/path/to/nvcc)
  endif
  CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
  # machine code for Ampere (sm_80; runs on 8.x) and Hopper (sm_90), and PTX the driver compiles for newer GPUs
  CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
  NVCCFLAGS = -std=c++17 -O3 -lineinfo $(CUDA_ARCH) -MMD -MP -I. --Werror all-warnings \
              -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Wno-unused-parameter,-Werror
  # nvcc objects are C++: their exception tables want libstdc++
  CUDA_LIBS = -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lstdc++
  CU_C_SRC   := $(wildcard engines/cuda/*.c engines/cuda/modules/*.c)
  CU_COMMON  := $(call obj,engines/cuda/cu_util.c $(CUDAHOST_SRC))
  CU_PAGED   := kv_block kv_token
  CU_MODULES := $(BUILD)/modules/device_cuda.so \
                $(patsubst engines/cuda/modules/%.c,$(BUILD)/modules/cuda/%.so,$(wildcard engines/cuda/modules/*.c)) \
                $(CU_PAGED:%=$(BUILD)/modules/cuda/%.so)
endif
LIB_OBJ      := $(call obj,$(UTIL_SRC) $(CORE_SRC) $(ALLOC_SRC) $(HARNESS_SRC))
MODULES      := $(patsubst engines/modules/%.c,$(BUILD)/modules/%.so,$(MODULE_SRC)) $(CU_MODULES)
TESTS        := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
SLOW_TESTS   := $(patsubst tests/%.c,$(BUILD)/tests/%,$(SLOW_SRC))
TESTLIB_OBJ  := $(call obj,$(TESTLIB_SRC))

# make run, test and test-slow build with one job per core unless -j was given (make 4.3
# cannot raise the jobs of the make already running, only of the sub-makes it starts)
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
SUBMAKE_J = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(JOBS))

.PHONY: all test test-slow run debug asan valgrind clean deps deps-run tests-build slow-tests-build tools archgraph install openai-client FORCE
all: $(BUILD)/bench $(MODULES)

# The flags stamp: every object depends on it, and it is rewritten only when the flags
# change, so `make OPT=-O0` after `make` (or SAN=, CC=) rebuilds everything.
FLAGS_SIG := $(CC) | $(CPPFLAGS) | $(CFLAGS) | $(LDFLAGS) | $(LDLIBS) | $(NVCC) $(NVCCFLAGS)
FLAGS_STAMP := $(BUILD)/flags.stamp
# (A dry run, make -n, leaves it alone.)
ifeq ($(filter clean,$(MAKECMDGOALS))$(findstring n,$(firstword -$(MAKEFLAGS))),)
  $(shell mkdir -p $(BUILD) && { printf '%s\n' '$(FLAGS_SIG)' | cmp -s - $(FLAGS_STAMP) || printf '%s\n' '$(FLAGS_SIG)' > $(FLAGS_STAMP); })
endif

# Debian packages (scripts/deps.sh; it returns at once when they are there): deps-run what
# building and running uses, deps what the tests use too.
deps:
	@bash scripts/deps.sh test
deps-run:
	@bash scripts/deps.sh run

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# results.json and the default results folder name record the commit the binary was built
# from, not the current directory's: commit.stamp changes only when the commit or its
# dirtiness does, and only then is locations.o rebuilt.
BENCH_COMMIT := $(shell git rev-parse HEAD 2>/dev/null)
BENCH_DIRTY  := $(if $(BENCH_COMMIT),$(if $(shell git status --porcelain --untracked-files=no 2>/dev/null),1,0),0)
$(BUILD)/commit.stamp: FORCE
	@mkdir -p $(dir $@)
	@echo '$(BENCH_COMMIT) $(BENCH_DIRTY)' | cmp -s - $@ || echo '$(BENCH_COMMIT) $(BENCH_DIRTY)' > $@
$(BUILD)/obj/harness/report/locations.o: $(BUILD)/commit.stamp
$(BUILD)/obj/harness/report/locations.o: CPPFLAGS += -DBENCH_COMMIT_SHA='"$(BENCH_COMMIT)"' -DBENCH_COMMIT_DIRTY=$(BENCH_DIRTY)
FORCE:

# Objects are intermediate files of the libraries and modules; kept, so make neither
# rebuilds nor deletes them (no "rm build/obj/..." after a run).
.SECONDARY:

# results.json records how the binary was built.
BUILD_FLAGS := $(CC) $(CFLAGS) $(filter -DNDEBUG,$(CPPFLAGS))
$(BUILD)/obj/harness/report/results.o: CPPFLAGS += -DBENCH_CFLAGS='"$(BUILD_FLAGS)"'

# The tokenizers' Unicode classes, generated from the Unicode Character Database
# (Debian's unicode-data, installed by scripts/deps.sh) rather than committed.
UCD ?= /usr/share/unicode/UnicodeData.txt
$(BUILD)/gen/unicode_tab.h: scripts/gen_unicode.awk $(UCD)
	@mkdir -p $(dir $@)
	awk -f scripts/gen_unicode.awk $(UCD) > $@.tmp && mv $@.tmp $@
$(UCD):
	@echo "$@ is missing: make deps (scripts/deps.sh) installs Debian's unicode-data" >&2; exit 1
$(BUILD)/obj/engines/core/tokenizer/unicode.o: $(BUILD)/gen/unicode_tab.h
$(BUILD)/obj/engines/core/tokenizer/unicode.o: CPPFLAGS += -I$(BUILD)/gen

$(BUILD)/libbench.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# -rdynamic is not needed: modules link nothing of the driver's.
$(BUILD)/bench: $(call obj,harness/cli/main.c) $(BUILD)/libbench.a
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# Each module links the objects it uses and nothing else.
$(BUILD)/modules/%.so: $(call obj,engines/modules/%.c)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared $^ -o $@ -lm $(if $(findstring jemalloc,$*),-ljemalloc) $(if $(findstring mimalloc,$*),-lmimalloc)
$(BUILD)/modules/kv_prealloc.so $(BUILD)/modules/kv_dynamic.so: $(call obj,engines/modules/common/kv_contig.c)
$(BUILD)/modules/kv_block.so $(BUILD)/modules/kv_token.so: $(call obj,engines/modules/common/kv_paged.c)
$(BUILD)/modules/alloc_arena.so: $(call obj,allocators/arena.c)
$(BUILD)/modules/alloc_slab.so: $(call obj,allocators/slab.c)
$(BUILD)/modules/alloc_buddy.so: $(call obj,allocators/buddy.c)

ifeq ($(CUDA),1)
# Host C of the CUDA modules sees the runtime's C headers; kernels go through nvcc.
$(call obj,$(CU_C_SRC)): CPPFLAGS += -isystem $(CUDA_HOME)/include
$(BUILD)/obj/%.o: %.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

# kv block and token: the CPU modules' own sources over a device pool (common/kv_paged.h)
$(BUILD)/obj/cuda/engines/modules/%.o: engines/modules/%.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -DKVP_DEVICE='"cuda"' $(CFLAGS) -c $< -o $@

$(BUILD)/modules/device_cuda.so: $(call obj,engines/cuda/device_cuda.c) $(BUILD)/obj/engines/cuda/kernels.o $(CU_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared $^ -o $@ $(CUDA_LIBS) -lcublas -lm

$(BUILD)/modules/cuda/loader_%.so: $(call obj,engines/cuda/modules/loader_%.c engines/cuda/ld_cuda.c) $(CU_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared $^ -o $@ $(CUDA_LIBS)

$(BUILD)/modules/cuda/kv_%.so: $(call obj,engines/cuda/modules/kv_%.c engines/cuda/kvc_cuda.c) $(BUILD)/obj/engines/cuda/attn.o $(CU_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared $^ -o $@ $(CUDA_LIBS)

$(CU_PAGED:%=$(BUILD)/modules/cuda/%.so): $(BUILD)/modules/cuda/%.so: $(BUILD)/obj/cuda/engines/modules/%.o \
		$(call obj,engines/cuda/kvp_cuda.c engines/cuda/kvc_cuda.c) $(BUILD)/obj/engines/cuda/attn.o $(CU_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared $^ -o $@ $(CUDA_LIBS)
endif

$(BUILD)/tests/%: $(call obj,tests/%.c) $(TESTLIB_OBJ) $(BUILD)/libbench.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) -lcmocka

# test_net speaks HTTP to bench serve with libcurl directly, as a client independent of bench's
test_net_libs := $(shell pkg-config --libs libcurl 2>/dev/null || echo -lcurl)
$(BUILD)/tests/test_net: LDLIBS += $(test_net_libs)
$(BUILD)/tests/test_openai: LDLIBS += $(test_net_libs)

# The CUDA modules' host-side logic is plain C: built and tested on every machine.
$(BUILD)/tests/test_cuda_host: $(call obj,$(CUDAHOST_SRC))

# Modules only the tests load: a family interface version no bench takes (tests/modules/badver.c),
# and modules that test the ABI's declared rules (tests/modules/broken.c, tests/test_abi.c).
RULE_MODULES := kv_v1 kv_nomem kv_pooled kv_capnoslot kv_slotnocap kv_nomemslot alloc_badopt alloc_baddefault loader_wrongcap loader_v2
TEST_MODULES := $(BUILD)/test-modules/kv_badver.so $(BUILD)/test-modules/alloc_badver.so \
                $(RULE_MODULES:%=$(BUILD)/test-modules/%.so)
$(BUILD)/test-modules/%_badver.so: tests/modules/badver.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -DBADVER_FAMILY='"$*"' $(LDFLAGS) -shared $< -o $@
$(RULE_MODULES:%=$(BUILD)/test-modules/%.so): $(BUILD)/test-modules/%.so: tests/modules/broken.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -DBROKEN='"$*"' $(LDFLAGS) -shared $< -o $@
# two built-in modules under other names: the host must know them by their capabilities
TEST_MODULES += $(BUILD)/test-modules/loader_mapped.so $(BUILD)/test-modules/alloc_libc2.so
$(BUILD)/test-modules/loader_mapped.so: engines/modules/loader_mmap.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -DLOADER_MMAP_NAME='"mapped"' $(LDFLAGS) -shared $< -o $@
$(BUILD)/test-modules/alloc_libc2.so: engines/modules/alloc_libc.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -DALLOC_LIBC_NAME='"libc2"' $(LDFLAGS) -shared $< -o $@

# NVML as the tests script it (tests/modules/fake_nvml.c): the energy reader's GPU path without a GPU
TEST_MODULES += $(BUILD)/test-modules/nvml/libnvidia-ml.so.1
$(BUILD)/test-modules/nvml/libnvidia-ml.so.1: tests/modules/fake_nvml.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -shared $< -o $@

tests-build: $(BUILD)/bench $(MODULES) $(TESTS) $(TEST_MODULES)

# Standalone programs: benchmarks and investigations (tools/*.c), not tests.
TOOLS := $(patsubst tools/%.c,$(BUILD)/tools/%,$(TOOL_SRC))
tools: $(TOOLS) $(MODULES)
$(BUILD)/tools/%: $(call obj,tools/%.c) $(BUILD)/libbench.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# The openai npm package, for tests/test_openai.c's client test (tests/openai/client.mjs), into
# build/node_modules (not in git). Needs npm and the npm registry; make test tries it and goes
# on without it (that test then skips, naming what is missing). Short time-outs: a machine
# without the registry must not wait npm's five minutes a request.
OPENAI_NPM = openai@^6
openai-client:
	@command -v npm >/dev/null || { echo "openai-client: npm is not installed (Debian: apt-get install nodejs npm)" >&2; exit 1; }
	@test -f build/node_modules/openai/package.json || timeout 180 npm install --prefix build --no-save --no-audit --no-fund \
	    --loglevel=error --fetch-timeout=20000 --fetch-retries=1 $(OPENAI_NPM)

# The test suite runs on the sanitizer build.
test: deps
	-@$(MAKE) --no-print-directory openai-client || echo "make test: going on without the openai npm package (test_openai's client test will skip)" >&2
	@$(MAKE) --no-print-directory $(SUBMAKE_J) BUILD=build/asan SAN=1 OPT=-O1 tests-build
	@$(MAKE) --no-print-directory $(SUBMAKE_J) all
	@bash scripts/depcheck.sh build/asan
	@bash scripts/funclen.sh
	@BENCH_SHARED=$(SHARED) bash tests/run.sh build/asan

# The slow tests (tests/slow_*.c, a few minutes: docs/reliability.md), which CI runs after make test.
slow-tests-build: $(BUILD)/bench $(MODULES) $(SLOW_TESTS)
test-slow: deps
	@$(MAKE) --no-print-directory $(SUBMAKE_J) BUILD=build/asan SAN=1 OPT=-O1 slow-tests-build
	@$(MAKE) --no-print-directory $(SUBMAKE_J) all
	@BENCH_SHARED=$(SHARED) BENCH_TEST_GLOB='slow_*' bash tests/run.sh build/asan

# The main job: release build, the default model (synth llama-110m, cached), the mmap vs pread scenario.
# The build is a sub-make, read after deps-run has installed pkg-config and the -dev packages:
# this make's flags were computed before (without pkg-config's -I flags), and a stamp written
# from them would make the next `make test` rebuild every object.
run: deps-run
	@$(MAKE) --no-print-directory $(SUBMAKE_J) all
	$(BUILD)/bench run scenarios/mmap_vs_pread.json

debug:
	@$(MAKE) --no-print-directory BUILD=build/debug OPT=-O0 all

# the test binaries link cmocka: the test set of packages first
asan: deps
	@$(MAKE) --no-print-directory $(SUBMAKE_J) BUILD=build/asan SAN=1 OPT=-O1 tests-build

valgrind: all
	@BENCH_SHARED=$(SHARED) bash tests/valgrind.sh $(BUILD)

# The folder graph of docs/ARCHITECTURE.md, drawn by graphviz (not a build dependency).
archgraph:
	@mkdir -p $(BUILD)
	bash scripts/depcheck.sh --dot > $(BUILD)/architecture.dot
	@command -v dot >/dev/null || { echo "make archgraph: graphviz's dot is not installed (apt-get install graphviz); the graph is in $(BUILD)/architecture.dot"; exit 1; }
	dot -Tsvg $(BUILD)/architecture.dot -o $(BUILD)/architecture.svg
	@echo "$(BUILD)/architecture.svg"

# The SDK (docs/modules.md): the bench binary, its modules, the module ABI headers and a
# pkg-config file, so that a module written outside the tree builds with
#   cc $$(pkg-config --cflags bench) -shared -fPIC kv_mine.c -o kv_mine.so
# and runs with BENCH_MODULE_PATH=its/folder:$$(pkg-config --variable=moduledir bench).
PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
INCDIR  ?= $(PREFIX)/include
MODDIR  := $(LIBDIR)/bench/modules
PCDIR   ?= $(LIBDIR)/pkgconfig
# The paths go into shell words ('...') and bench.pc; a quote, backtick or backslash would
# break those words half way through an install, and a ':' the moduledir that
# BENCH_MODULE_PATH (':'-separated) must hold: refused before anything is built or copied.
# Spaces are fine (quoted here, and Cflags quotes includedir for pkg-config).
INSTALL_PATHS = $(DESTDIR)|$(PREFIX)|$(BINDIR)|$(LIBDIR)|$(INCDIR)|$(PCDIR)
INSTALL_BAD = $(or $(findstring ',$(INSTALL_PATHS)),$(findstring ",$(INSTALL_PATHS)),$(findstring `,$(INSTALL_PATHS)),$(findstring \,$(INSTALL_PATHS)),$(findstring :,$(INSTALL_PATHS)))
ifneq ($(filter install,$(MAKECMDGOALS)),)
  ifneq ($(INSTALL_BAD),)
    $(error make install: PREFIX, DESTDIR, BINDIR, LIBDIR, INCDIR and PCDIR may not hold a quote, backtick, backslash or ':' (found $(INSTALL_BAD)); nothing was installed)
  endif
endif
install: all
	install -d '$(DESTDIR)$(BINDIR)' '$(DESTDIR)$(MODDIR)' '$(DESTDIR)$(INCDIR)/bench' '$(DESTDIR)$(PCDIR)'
	install -m 755 $(BUILD)/bench '$(DESTDIR)$(BINDIR)/bench'
	cd $(BUILD)/modules && for m in $$(find . -name '*.so' | sort); do \
	  install -D -m 755 "$$m" '$(DESTDIR)$(MODDIR)'/"$$m" || exit 1; done
	install -m 644 engines/abi/*.h '$(DESTDIR)$(INCDIR)/bench/'
	printf '%s\n' 'prefix=$(PREFIX)' 'includedir=$(INCDIR)' 'libdir=$(LIBDIR)' 'moduledir=$(MODDIR)' '' \
	  'Name: bench' 'Description: module ABI of bench, the LLM inference benchmarking harness (docs/modules.md)' \
	  'Version: 0.3.0' 'Cflags: -I"$${includedir}"' > '$(DESTDIR)$(PCDIR)/bench.pc'
	@echo "installed bench in $(DESTDIR)$(BINDIR), its modules in $(DESTDIR)$(MODDIR), the ABI headers in $(DESTDIR)$(INCDIR)/bench"

clean:
	rm -rf build

include fuzz/fuzz.mk

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
