# Example programs, included by the top-level Makefile (which sets BUILD, MPICC, CFLAGS).
#
#   $(BUILD)/examples/heat, nqueens              linked with libshoal
#   $(BUILD)/examples/heat-plain, nqueens-plain  the same sources with -DSHOAL_OFF: plain MPI
#   $(BUILD)/examples/mandelbrot                 plain C, no MPI: one tile per task of a farm
#
# Every Shoal program in this repository builds with these flags; bench/kernels uses them too.

SHOAL_LIB ?= $(BUILD)/lib/libshoal.so
SHOAL_HEADER ?= $(BUILD)/include/shoal.h
SHOAL_PROGRAM_CFLAGS = $(CFLAGS) -std=c99 -Wall -Wextra -Iexamples
SHOAL_CPPFLAGS = -I$(BUILD)/include
SHOAL_LDFLAGS = -L$(BUILD)/lib -lshoal -Wl,-rpath,$(abspath $(BUILD))/lib

EXAMPLES := heat nqueens
EXAMPLE_BINS := $(addprefix $(BUILD)/examples/,$(EXAMPLES))
EXAMPLE_PLAIN_BINS := $(addsuffix -plain,$(EXAMPLE_BINS))

examples: $(EXAMPLE_BINS) $(EXAMPLE_PLAIN_BINS) $(BUILD)/examples/mandelbrot

$(EXAMPLE_BINS): $(BUILD)/examples/%: examples/%.c examples/shoal_off.h examples/pace.h $(SHOAL_LIB) $(SHOAL_HEADER)
	@mkdir -p $(@D)
	$(MPICC) $(SHOAL_PROGRAM_CFLAGS) $(SHOAL_CPPFLAGS) -o $@ $< $(SHOAL_LDFLAGS)

$(EXAMPLE_PLAIN_BINS): $(BUILD)/examples/%-plain: examples/%.c examples/shoal_off.h examples/pace.h
	@mkdir -p $(@D)
	$(MPICC) $(SHOAL_PROGRAM_CFLAGS) -DSHOAL_OFF -o $@ $<

# Each task of a farm is an ordinary process, so this one is built with the C compiler.
$(BUILD)/examples/mandelbrot: examples/mandelbrot.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -std=c99 -Wall -Wextra -o $@ $<
