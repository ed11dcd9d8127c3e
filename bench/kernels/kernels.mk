# Benchmark kernels, included by the top-level Makefile after examples/examples.mk, whose
# SHOAL_* variables they share.
#
#   $(BUILD)/bench/kernels/cg, mg, ft, is, ep      linked with libshoal
#   $(BUILD)/bench/kernels/cg-plain, ...           -DSHOAL_OFF: plain MPI, the baseline

KERNELS := cg mg ft is ep
KERNEL_BINS := $(addprefix $(BUILD)/bench/kernels/,$(KERNELS))
KERNEL_PLAIN_BINS := $(addsuffix -plain,$(KERNEL_BINS))
KERNEL_COMMON := bench/kernels/common/kernel.c
KERNEL_DEPS := $(KERNEL_COMMON) bench/kernels/common/kernel.h examples/shoal_off.h
KERNEL_CFLAGS = $(SHOAL_PROGRAM_CFLAGS) -Ibench/kernels

kernels: $(KERNEL_BINS) $(KERNEL_PLAIN_BINS)

$(KERNEL_BINS): $(BUILD)/bench/kernels/%: bench/kernels/%.c $(KERNEL_DEPS) $(SHOAL_LIB) $(SHOAL_HEADER)
	@mkdir -p $(@D)
	$(MPICC) $(KERNEL_CFLAGS) $(SHOAL_CPPFLAGS) -o $@ $< $(KERNEL_COMMON) $(SHOAL_LDFLAGS) -lm

$(KERNEL_PLAIN_BINS): $(BUILD)/bench/kernels/%-plain: bench/kernels/%.c $(KERNEL_DEPS)
	@mkdir -p $(@D)
	$(MPICC) $(KERNEL_CFLAGS) -DSHOAL_OFF -o $@ $< $(KERNEL_COMMON) -lm

# bench/placement's ring over a shuffled rank order (bench/ring.c), linked with libshoal.
kernels: $(BUILD)/bench/ring

$(BUILD)/bench/ring: bench/ring.c examples/shoal_off.h $(SHOAL_LIB) $(SHOAL_HEADER)
	@mkdir -p $(@D)
	$(MPICC) $(SHOAL_PROGRAM_CFLAGS) $(SHOAL_CPPFLAGS) -o $@ $< $(SHOAL_LDFLAGS)
