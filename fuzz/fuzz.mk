# libFuzzer targets (fuzz/*.c, docs/reliability.md), included by the Makefile.
#   make fuzz FUZZ_SECONDS=N     builds them and runs each for N seconds (default 60)
#   make fuzz-build              builds them alone (build/fuzz/fuzz_*)
# Each target starts from its committed seeds (fuzz/corpus/NAME) and keeps what it
# finds in build/fuzz/corpus/NAME; crashes land in build/fuzz/crash/NAME.
# The library is rebuilt with clang, instrumented for coverage and the sanitizers.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_DIR     := build/fuzz
FUZZ_FLAGS   := -std=c17 -O1 -g -fno-omit-frame-pointer -pthread -Wall -Wextra -Werror -Wno-unused-parameter -Wno-string-concatenation \
                -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_SRC     := $(UTIL_SRC) $(CORE_SRC) $(ALLOC_SRC) $(HARNESS_SRC)
FUZZ_OBJ     := $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(FUZZ_SRC))
FUZZ_TARGETS := $(patsubst fuzz/%.c,$(FUZZ_DIR)/%,$(wildcard fuzz/fuzz_*.c))

.PHONY: fuzz fuzz-build
FUZZ_CPPFLAGS = $(filter-out -DNDEBUG,$(CPPFLAGS))
$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

# the Unicode tables are generated (Makefile): the fuzz build uses the release build's
$(FUZZ_DIR)/obj/engines/core/tokenizer/unicode.o: $(BUILD)/gen/unicode_tab.h
$(FUZZ_DIR)/obj/engines/core/tokenizer/unicode.o: FUZZ_CPPFLAGS += -I$(BUILD)/gen

# The kernels use gcc's per-function target pragmas and cpu-feature names, which
# clang does not take; no parser lives there, so they are built by gcc, uninstrumented.
# So is the engine, which reads the KV element-type table (kv_types.h asks for "f16c").
$(FUZZ_DIR)/obj/engines/core/compute/%.o: engines/core/compute/%.c
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_CPPFLAGS) -std=c17 -O2 -g -fno-omit-frame-pointer -pthread $(WARN) -c $< -o $@
$(FUZZ_DIR)/obj/engines/core/runtime/engine.o: engines/core/runtime/engine.c
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_CPPFLAGS) -std=c17 -O2 -g -fno-omit-frame-pointer -pthread $(WARN) -c $< -o $@

$(FUZZ_DIR)/libbench.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/fuzz/fuzz_%.o $(FUZZ_DIR)/libbench.a
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer $^ -o $@ $(LDLIBS)

fuzz-build: $(FUZZ_TARGETS)

# The scenario target validates module names against the release build's CPU modules
# (the CUDA runtime, dlopen'ed and unloaded, leaves allocations LeakSanitizer blames on the input).
fuzz: deps all fuzz-build
	@mkdir -p $(FUZZ_DIR)/modules && for m in $(BUILD)/modules/*.so; do case $$m in */device_*) ;; \
	  *) ln -sf "$(abspath .)/$$m" $(FUZZ_DIR)/modules/ ;; esac; done
	@for t in $(FUZZ_TARGETS); do \
	  n=$${t##*/}; mkdir -p $(FUZZ_DIR)/corpus/$$n $(FUZZ_DIR)/crash/$$n; \
	  echo "fuzz: $$n for $(FUZZ_SECONDS) s"; \
	  GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384 FUZZ_MODULE_DIR=$(FUZZ_DIR)/modules ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    $$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -close_fd_mask=1 \
	      -artifact_prefix=$(FUZZ_DIR)/crash/$$n/ $(FUZZ_DIR)/corpus/$$n fuzz/corpus/$$n >$(FUZZ_DIR)/$$n.make.log 2>&1; \
	  rc=$$?; grep -E '^stat::number_of_executed_units|^SUMMARY|Test unit written' $(FUZZ_DIR)/$$n.make.log; \
	  [ $$rc -eq 0 ] || { echo "fuzz: $$n failed (exit $$rc): $(FUZZ_DIR)/$$n.make.log, input in $(FUZZ_DIR)/crash/$$n"; exit 1; }; \
	done

# The model seeds in fuzz/corpus were written by this (bench's own writers, a micro model).
.PHONY: fuzz-seeds
$(FUZZ_DIR)/mkseeds: fuzz/mkseeds.c $(BUILD)/libbench.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(filter %.c %.a,$^) -o $@ $(LDFLAGS) $(LDLIBS)
fuzz-seeds: $(FUZZ_DIR)/mkseeds
	$(FUZZ_DIR)/mkseeds fuzz/corpus
