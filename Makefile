# bench: one build for everything.
#   make            release build: build/bench and build/modules/*.so
#   make test       installs what is missing, builds under ASan+UBSan (build/asan), runs every test
#   make run        installs what is missing, builds, makes the default model, runs scenarios/mmap_vs_pread.json
#   make debug      -O0 build in build/debug
#   make asan       the sanitizer build alone
#   make valgrind   runs the test suite's memcheck pass on the release build
#   make clean
# Switches: CC=..., BUILD=dir, SAN=1 (sanitizers), OPT=-O0, CUDA=0 to skip nvcc even when present.

ifeq ($(origin CC),default)
  CC = gcc
endif
BUILD   ?= build
OPT     ?= -O2
SHARED  ?= $(abspath ../shared)
SAN     ?= 0

WARN     = -Wall -Wextra -Werror -Wno-unused-parameter
CPPFLAGS = -D_GNU_SOURCE -MMD -MP -I. -I/usr/include/cjson
CFLAGS   = -std=c17 $(OPT) -g -fno-omit-frame-pointer -fPIC -pthread $(WARN)
LDFLAGS  = -pthread
LDLIBS   = -lcjson -lpfm -ldl -lm
ifeq ($(SAN),1)
  CFLAGS  += -fsanitize=address,undefined -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
else ifneq ($(OPT),-O0)
  # Release builds drop the allocators' debug checks, which double their cost.
  CPPFLAGS += -DNDEBUG
endif

CORE_SRC    := $(wildcard engines/core/*.c)
ALLOC_SRC   := $(wildcard allocators/*.c)
HARNESS_SRC := $(filter-out harness/main.c,$(wildcard harness/*.c))
MODULE_SRC  := $(wildcard engines/modules/*.c)
MODCOMMON_SRC := $(wildcard engines/modules/common/*.c)
CUDAHOST_SRC := $(wildcard engines/cuda/host/*.c)
TEST_SRC    := $(wildcard tests/test_*.c)
TESTLIB_SRC := $(wildcard tests/lib/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
LIB_OBJ      := $(call obj,$(CORE_SRC) $(ALLOC_SRC) $(HARNESS_SRC))
MODCOMMON_OBJ := $(call obj,$(MODCOMMON_SRC) $(ALLOC_SRC))
MODULES      := $(patsubst engines/modules/%.c,$(BUILD)/modules/%.so,$(MODULE_SRC))
TESTS        := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
TESTLIB_OBJ  := $(call obj,$(TESTLIB_SRC))

.PHONY: all test run debug asan valgrind clean deps tests-build
all: $(BUILD)/bench $(MODULES)

# Debian packages the build needs; deps.sh returns at once when they are there.
deps:
	@bash scripts/deps.sh

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# results.json records how the binary was built.
BUILD_FLAGS := $(CC) $(CFLAGS) $(filter -DNDEBUG,$(CPPFLAGS))
$(BUILD)/obj/harness/results.o: CPPFLAGS += -DBENCH_CFLAGS='"$(BUILD_FLAGS)"'

$(BUILD)/libbench.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# -rdynamic is not needed: modules link nothing of the driver's.
$(BUILD)/bench: $(call obj,harness/main.c) $(BUILD)/libbench.a
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/modules/%.so: $(call obj,engines/modules/%.c) $(MODCOMMON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared $^ -o $@ -lm $(if $(findstring jemalloc,$*),-ljemalloc) $(if $(findstring mimalloc,$*),-lmimalloc)

$(BUILD)/tests/%: $(call obj,tests/%.c) $(TESTLIB_OBJ) $(BUILD)/libbench.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) -lcmocka

# The CUDA modules' host-side logic is plain C: built and tested on every machine.
$(BUILD)/tests/test_cuda_host: $(call obj,$(CUDAHOST_SRC))

tests-build: $(BUILD)/bench $(MODULES) $(TESTS)

# The test suite runs on the sanitizer build.
test: deps
	@$(MAKE) --no-print-directory BUILD=build/asan SAN=1 OPT=-O1 tests-build
	@$(MAKE) --no-print-directory all
	@BENCH_SHARED=$(SHARED) bash tests/run.sh build/asan

# The main job: release build, the default model (synth llama-110m, cached), the mmap vs pread scenario.
run: deps all
	$(BUILD)/bench run scenarios/mmap_vs_pread.json

debug:
	@$(MAKE) --no-print-directory BUILD=build/debug OPT=-O0 all

asan:
	@$(MAKE) --no-print-directory BUILD=build/asan SAN=1 OPT=-O1 tests-build

valgrind: all
	@BENCH_SHARED=$(SHARED) bash tests/valgrind.sh $(BUILD)

clean:
	rm -rf build

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
