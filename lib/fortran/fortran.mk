# lib/fortran/fortran.mk - the Fortran interface to libshoal. Included by the top-level
# Makefile after lib/lib.mk; paths are relative to the repository root.
#
#   make fortran   $(BUILD)/include/shoal.mod, shoal_f08.mod (use shoal / use shoal_f08),
#                  $(BUILD)/lib/libshoalf.{so,a} (the module's code and its C shims),
#                  $(BUILD)/lib/pkgconfig/shoal-fortran.pc,
#                  $(BUILD)/examples/fortran/heat
#
# A .mod file belongs to one compiler, and shoal_f08.mod to one MPI too: they are built
# per tree, like the library (build/ for Open MPI, build/mpich/ for MPICH).

MPIFC ?= mpifort.openmpi
FFLAGS ?= -O2 -g

FORTRAN_OBJ := $(BUILD)/fortran/obj
FORTRAN_FFLAGS := -std=f2018 -Wall -fPIC -J $(BUILD)/include
FORTRAN_OUTPUTS := $(BUILD)/include/shoal.mod $(BUILD)/include/shoal_f08.mod \
	$(BUILD)/lib/libshoalf.so $(BUILD)/lib/libshoalf.a $(BUILD)/lib/pkgconfig/shoal-fortran.pc

.PHONY: fortran fortran-examples

fortran: $(FORTRAN_OUTPUTS)
fortran-examples: $(BUILD)/examples/fortran/heat

# gfortran writes the .mod beside compiling the object: the object stands for both.
$(FORTRAN_OBJ)/shoal.o: lib/fortran/shoal.f90
	@mkdir -p $(@D) $(BUILD)/include
	$(MPIFC) $(FFLAGS) $(FORTRAN_FFLAGS) -c $< -o $@
$(BUILD)/include/shoal.mod: $(FORTRAN_OBJ)/shoal.o

$(FORTRAN_OBJ)/shoal_f08.o: lib/fortran/shoal_f08.f90 $(FORTRAN_OBJ)/shoal.o
	$(MPIFC) $(FFLAGS) $(FORTRAN_FFLAGS) -c $< -o $@
$(BUILD)/include/shoal_f08.mod: $(FORTRAN_OBJ)/shoal_f08.o

$(FORTRAN_OBJ)/shoal_f.o: lib/fortran/shoal_f.c lib/include/shoal.h
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) -std=c99 -Wall -Wextra -fvisibility=hidden -fPIC -Ilib/include -c $< -o $@

FORTRAN_LIB_OBJS := $(FORTRAN_OBJ)/shoal.o $(FORTRAN_OBJ)/shoal_f08.o $(FORTRAN_OBJ)/shoal_f.o

$(BUILD)/lib/libshoalf.so: $(FORTRAN_LIB_OBJS) $(BUILD)/lib/libshoal.so
	$(MPIFC) -shared -Wl,-soname,libshoalf.so -o $@ $(FORTRAN_LIB_OBJS) \
		-L$(BUILD)/lib -lshoal -Wl,-rpath,'$$ORIGIN'

$(BUILD)/lib/libshoalf.a: $(FORTRAN_LIB_OBJS)
	@rm -f $@
	$(AR) rcs $@ $(FORTRAN_LIB_OBJS)

$(BUILD)/lib/pkgconfig/shoal-fortran.pc: lib/fortran/fortran.mk lib/include/shoal.h
	@mkdir -p $(@D)
	printf '%s\n' \
	  'prefix=$(SHOAL_BUILD_ABS)' \
	  'includedir=$${prefix}/include' \
	  'libdir=$${prefix}/lib' \
	  "mpicc=$$(command -v $(MPICC))" \
	  "mpifort=$$(command -v $(MPIFC))" \
	  '' \
	  'Name: shoal-fortran' \
	  'Description: Fortran module (use shoal) over libshoal' \
	  'Version: $(SHOAL_VERSION)' \
	  'Requires: shoal' \
	  'Cflags: -I$${includedir}' \
	  'Libs: -L$${libdir} -Wl,-rpath,$${libdir} -lshoalf' > $@

$(BUILD)/examples/fortran/heat: examples/fortran/heat.f90 $(FORTRAN_OUTPUTS)
	@mkdir -p $(@D)
	$(MPIFC) $(FFLAGS) -I$(BUILD)/include -o $@ $< \
		-L$(BUILD)/lib -lshoalf -lshoal -Wl,-rpath,$(abspath $(BUILD))/lib

# ---- tests (make test-fortran) ----

$(BUILD)/lib/tests/test_fortran: lib/tests/test_fortran.f90 $(FORTRAN_OUTPUTS)
	@mkdir -p $(@D)
	$(MPIFC) $(FFLAGS) -Wall -I$(BUILD)/include -J $(@D) -o $@ $< \
		-L$(BUILD)/lib -lshoalf -lshoal -Wl,-rpath,$(abspath $(BUILD))/lib

test-fortran: $(BUILD)/lib/tests/test_fortran $(BUILD)/examples/fortran/heat
	BUILD=$(BUILD) MPIRUN=$(MPIRUN) lib/fortran/test.sh
