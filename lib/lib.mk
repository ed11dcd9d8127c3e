# lib/lib.mk - libshoal, its C tests and the checkpoint cost benchmark. Included by the
# top-level Makefile; paths are relative to the repository root.
#
#   make lib           $(BUILD)/lib/libshoal.{so,a}, $(BUILD)/include/shoal.h,
#                      $(BUILD)/lib/pkgconfig/shoal.pc
#   make test-c        builds and runs lib/tests (on 1, 2 and 4 ranks)
#   make ckpt-cost     $(BUILD)/bench/ckpt-cost-prog (run it with bench/ckpt-cost)
#   make snapshot-cost $(BUILD)/bench/snapshot-cost-prog (run it with bench/snapshot-cost)
#   make traffic-cost  $(BUILD)/bench/traffic-cost-prog (run it with bench/traffic-cost)
#   make writer-cost   $(BUILD)/bench/writer-cost-prog (run it with bench/writer-cost)
#   make resize-cost   $(BUILD)/bench/resize-cost-prog (run it with bench/resize-cost)
#
# Needs Open MPI's mpicc.openmpi (or MPICC) and libxxhash-dev.

BUILD ?= build
MPICC ?= mpicc.openmpi
MPIRUN ?= mpirun.openmpi
CFLAGS ?= -O2 -g

SHOAL_BUILD_ABS := $(abspath $(BUILD))
SHOAL_VERSION := $(shell sed -n 's/^\#define SHOAL_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$$/\2/p' \
	lib/include/shoal.h | paste -sd. -)

LIB_SRCS := $(wildcard lib/src/*.c)
# pmpi_wrappers.inc, the MPI calls pmpi.c defines, is written from lib/src/pmpi.list by
# lib/src/pmpi_generate.py and committed, as lib/fortran/shoal.f90 is: building needs no
# Python, and make test-c checks that the file is current.
LIB_HDRS := lib/include/shoal.h lib/src/internal.h lib/src/shard.h lib/src/resize.h lib/src/alive.h \
	lib/src/pmpi_wrappers.inc
LIB_OBJS := $(patsubst lib/src/%.c,$(BUILD)/lib/obj/%.o,$(LIB_SRCS))
LIB_CFLAGS := -std=c99 -Wall -Wextra -fvisibility=hidden -fPIC -pthread \
	-D_POSIX_C_SOURCE=200809L -Ilib/include
LIB_LDLIBS := -lxxhash -pthread -ldl -lm

.PHONY: lib test-c ckpt-cost snapshot-cost traffic-cost writer-cost resize-cost

LIB_OUTPUTS := $(BUILD)/lib/libshoal.so $(BUILD)/lib/libshoal.a $(BUILD)/include/shoal.h \
	$(BUILD)/lib/pkgconfig/shoal.pc

lib: $(LIB_OUTPUTS)

$(BUILD)/lib/obj/%.o: lib/src/%.c $(LIB_HDRS)
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) $(LIB_CFLAGS) -c $< -o $@

$(BUILD)/lib/libshoal.so: $(LIB_OBJS)
	$(MPICC) -shared -Wl,-soname,libshoal.so -o $@ $(LIB_OBJS) $(LIB_LDLIBS)

$(BUILD)/lib/libshoal.a: $(LIB_OBJS)
	@rm -f $@
	$(AR) rcs $@ $(LIB_OBJS)

$(BUILD)/include/shoal.h: lib/include/shoal.h
	@mkdir -p $(@D)
	cp $< $@

# prefix is the absolute build directory, so that programs built against an
# uninstalled tree find the library at run time too (hence the rpath).
$(BUILD)/lib/pkgconfig/shoal.pc: lib/lib.mk lib/include/shoal.h
	@mkdir -p $(@D)
	printf '%s\n' \
	  'prefix=$(SHOAL_BUILD_ABS)' \
	  'includedir=$${prefix}/include' \
	  'libdir=$${prefix}/lib' \
	  "mpicc=$$(command -v $(MPICC))" \
	  "mpifort=$$(command -v $(MPIFC))" \
	  '' \
	  'Name: shoal' \
	  'Description: application-level checkpointing for MPI programs that survive node loss' \
	  'Version: $(SHOAL_VERSION)' \
	  'Cflags: -I$${includedir}' \
	  'Libs: -L$${libdir} -Wl,-rpath,$${libdir} -lshoal' \
	  'Libs.private: -lxxhash -pthread -ldl -lm' > $@

# ---- tests ----
#
# The library's own code is compiled into the test programs with AddressSanitizer and
# UBSan. Open MPI works under ASan, but it leaks by design at MPI_Finalize, so the MPI
# tests run with LeakSanitizer off (lib/tests/run.sh); the shard-format test uses no MPI
# and keeps leak checks. test_resume links the built libshoal.so through shoal.pc, to
# test the artifact users get.

TEST_DIR := $(BUILD)/lib/tests
TEST_CFLAGS := -std=c99 -Wall -Wextra -g -O1 -pthread -D_POSIX_C_SOURCE=200809L \
	-Ilib/include -Ilib/src -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=undefined
TEST_COMMON := lib/tests/json.c lib/tests/check.c
TEST_HDRS := lib/tests/json.h lib/tests/check.h $(LIB_HDRS)

$(TEST_DIR)/test_shard: lib/tests/test_shard.c lib/src/shard.c lib/src/portable.c lib/src/error.c \
		$(TEST_COMMON) $(TEST_HDRS)
	@mkdir -p $(@D)
	$(MPICC) $(TEST_CFLAGS) -o $@ lib/tests/test_shard.c lib/src/shard.c lib/src/portable.c \
		lib/src/error.c $(TEST_COMMON) -lxxhash

$(TEST_DIR)/test_traffic_file: lib/tests/test_traffic_file.c lib/src/traffic.c lib/src/store.c lib/src/memory.c \
		lib/src/shard.c lib/src/error.c lib/src/jobdir.c $(TEST_COMMON) $(TEST_HDRS)
	@mkdir -p $(@D)
	$(MPICC) $(TEST_CFLAGS) -o $@ lib/tests/test_traffic_file.c lib/src/traffic.c \
		lib/src/store.c lib/src/memory.c lib/src/shard.c lib/src/error.c lib/src/jobdir.c \
		$(TEST_COMMON) -lxxhash

$(TEST_DIR)/test_jobdir: lib/tests/test_jobdir.c lib/src/jobdir.c lib/src/alive.c lib/src/error.c \
		$(TEST_COMMON) $(TEST_HDRS)
	@mkdir -p $(@D)
	$(MPICC) $(TEST_CFLAGS) -o $@ lib/tests/test_jobdir.c lib/src/jobdir.c lib/src/alive.c \
		lib/src/error.c $(TEST_COMMON)

$(TEST_DIR)/test_interval: lib/tests/test_interval.c lib/src/interval.c lib/src/env.c \
		lib/src/error.c $(TEST_COMMON) $(TEST_HDRS)
	@mkdir -p $(@D)
	$(MPICC) $(TEST_CFLAGS) -o $@ lib/tests/test_interval.c lib/src/interval.c lib/src/env.c \
		lib/src/error.c $(TEST_COMMON) -lm

$(TEST_DIR)/test_api: lib/tests/test_api.c lib/tests/test_when.c lib/tests/test_epochs.c lib/tests/test_corrupt.c lib/tests/testutil.c \
		lib/tests/testutil.h $(LIB_SRCS) $(TEST_COMMON) $(TEST_HDRS)
	@mkdir -p $(@D)
	$(MPICC) $(TEST_CFLAGS) -o $@ lib/tests/test_api.c lib/tests/test_when.c lib/tests/test_epochs.c lib/tests/test_corrupt.c \
		lib/tests/testutil.c $(LIB_SRCS) $(TEST_COMMON) -lxxhash -lm

$(TEST_DIR)/test_resize: lib/tests/test_resize.c lib/tests/testutil.c lib/tests/testutil.h \
		$(LIB_SRCS) $(TEST_COMMON) $(TEST_HDRS)
	@mkdir -p $(@D)
	$(MPICC) $(TEST_CFLAGS) -o $@ lib/tests/test_resize.c lib/tests/testutil.c $(LIB_SRCS) \
		$(TEST_COMMON) -lxxhash -lm

$(TEST_DIR)/test_layout: lib/tests/test_layout.c lib/src/layout.c lib/src/shard.c \
		$(TEST_COMMON) $(TEST_HDRS)
	@mkdir -p $(@D)
	$(MPICC) $(TEST_CFLAGS) -o $@ lib/tests/test_layout.c lib/src/layout.c lib/src/shard.c \
		$(TEST_COMMON) -lxxhash

$(TEST_DIR)/test_resume: lib/tests/test_resume.c lib/tests/check.c lib/tests/check.h \
		$(LIB_OUTPUTS)
	@mkdir -p $(@D)
	$(MPICC) -std=c99 -Wall -Wextra $(CFLAGS) -Ilib/tests -o $@ lib/tests/test_resume.c \
		lib/tests/check.c $$(PKG_CONFIG_PATH=$(BUILD)/lib/pkgconfig \
		pkg-config --cflags --libs shoal)

# The machine-written shard vectors and their restore on the other instruction set
# (scripts/abi-shards.sh: make abi-vectors writes them, make test-arm64 checks them).
$(TEST_DIR)/abi_shard: lib/tests/abi_shard.c $(LIB_OUTPUTS)
	@mkdir -p $(@D)
	$(MPICC) -std=c99 -Wall -Wextra -O1 -g -D_POSIX_C_SOURCE=200809L -o $@ lib/tests/abi_shard.c \
		$$(PKG_CONFIG_PATH=$(BUILD)/lib/pkgconfig pkg-config --cflags --libs shoal)

# Like test_resume, a program built the way users build theirs: it must see its sends
# counted through libshoal.so with nothing but -lshoal (pmpi.c).
$(TEST_DIR)/test_traffic: lib/tests/test_traffic.c lib/tests/check.c lib/tests/check.h \
		$(LIB_OUTPUTS)
	@mkdir -p $(@D)
	$(MPICC) -std=c99 -Wall -Wextra $(CFLAGS) -D_POSIX_C_SOURCE=200809L -Ilib/tests -o $@ \
		lib/tests/test_traffic.c lib/tests/check.c $$(PKG_CONFIG_PATH=$(BUILD)/lib/pkgconfig \
		pkg-config --cflags --libs shoal)

# shoal.h from C++, with the MPI's own C++ wrapper (mpicxx.openmpi, mpicxx.mpich).
# -Wno-cast-function-type: Open MPI's own C++ bindings, which mpi.h pulls in, trip it.
MPICXX ?= $(subst mpicc,mpicxx,$(MPICC))

$(TEST_DIR)/test_cxx: lib/tests/test_cxx.cpp $(LIB_OUTPUTS)
	@mkdir -p $(@D)
	$(MPICXX) -std=c++11 -Wall -Wextra -pedantic -Werror -Wno-cast-function-type -O1 -I$(BUILD)/include -o $@ $< \
		-L$(BUILD)/lib -lshoal -Wl,-rpath,$(abspath $(BUILD))/lib

test-c: lib $(TEST_DIR)/test_shard $(TEST_DIR)/test_interval $(TEST_DIR)/test_api \
		$(TEST_DIR)/test_resize $(TEST_DIR)/test_layout $(TEST_DIR)/test_resume $(TEST_DIR)/test_cxx $(TEST_DIR)/test_traffic_file \
		$(TEST_DIR)/test_traffic $(TEST_DIR)/test_jobdir $(BUILD)/examples/heat
	BUILD=$(BUILD) MPIRUN=$(MPIRUN) lib/tests/run.sh

# ---- benchmark ----

ckpt-cost: $(BUILD)/bench/ckpt-cost-prog
snapshot-cost: $(BUILD)/bench/snapshot-cost-prog
traffic-cost: $(BUILD)/bench/traffic-cost-prog
writer-cost: $(BUILD)/bench/writer-cost-prog
resize-cost: $(BUILD)/bench/resize-cost-prog

$(BUILD)/bench/%-prog: bench/%-prog.c bench/stats.h $(LIB_OUTPUTS)
	@mkdir -p $(@D)
	$(MPICC) -std=c99 -Wall -Wextra -O2 -D_POSIX_C_SOURCE=200809L -o $@ \
		$< $$(PKG_CONFIG_PATH=$(BUILD)/lib/pkgconfig pkg-config --cflags --libs shoal)
