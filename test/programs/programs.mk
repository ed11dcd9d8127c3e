# Programs the integration tests run, included by the top-level Makefile (which sets
# BUILD, MPICC, CFLAGS). Plain MPI, not linked with libshoal.
#
#   $(BUILD)/test/filecheck   every rank reads a file staged with `shoal run --file`

TEST_PROGRAMS := $(BUILD)/test/filecheck

test-programs: $(TEST_PROGRAMS)

$(BUILD)/test/%: test/programs/%.c
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) -std=c99 -Wall -Wextra -o $@ $<
