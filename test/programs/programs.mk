# Programs the integration tests run, included by the top-level Makefile (which sets
# BUILD, MPICC, CFLAGS) after examples/examples.mk, whose flags the ones linked with
# libshoal take.
#
#   $(BUILD)/test/filecheck   plain MPI: every rank reads a file staged with `shoal run --file`
#   $(BUILD)/test/subcomm     libshoal given a communicator of the first ranks, the others
#                             parked, as NAS MG does

TEST_PROGRAMS := $(BUILD)/test/filecheck
TEST_SHOAL_PROGRAMS := $(BUILD)/test/subcomm

test-programs: $(TEST_PROGRAMS) $(TEST_SHOAL_PROGRAMS)

$(TEST_SHOAL_PROGRAMS): $(BUILD)/test/%: test/programs/%.c $(SHOAL_LIB) $(SHOAL_HEADER)
	@mkdir -p $(@D)
	$(MPICC) $(SHOAL_PROGRAM_CFLAGS) $(SHOAL_CPPFLAGS) -o $@ $< $(SHOAL_LDFLAGS)

$(BUILD)/test/%: test/programs/%.c
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) -std=c99 -Wall -Wextra -o $@ $<
