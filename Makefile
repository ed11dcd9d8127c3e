# Shoal: `make demo` and `make test` work on a fresh Debian machine (they install what
# is missing through scripts/deps.sh).
SHELL := /bin/bash
BUILD ?= build
# Each MPI's own tools, never Debian's mpicc/mpirun alternatives, which point at whichever
# MPI was installed last.
MPICC ?= mpicc.openmpi
MPIFC ?= mpifort.openmpi
MPIRUN ?= mpirun.openmpi
CFLAGS ?= -O2 -g
GO ?= go
PYTHON ?= python3
VENV := $(BUILD)/venv

.PHONY: all build deps go-build lib examples kernels test-programs test test-go test-c test-fortran test-python test-integration demo clean

all: build

deps:
	@scripts/deps.sh

build: deps go-build lib fortran examples fortran-examples kernels test-programs

go-build:
	$(GO) build -o bin/shoal ./cmd/shoal

include lib/lib.mk
include lib/fortran/fortran.mk
include examples/examples.mk
include bench/kernels/kernels.mk
include test/programs/programs.mk

test: build
	$(GO) vet ./...
	$(MAKE) test-c
	$(MAKE) test-fortran
	$(MAKE) test-python
	SHOAL_REQUIRE_BUILD=1 $(GO) test ./... -count=1 -p 1 -timeout 40m

# The Python shard reader (python/), checked against the same test vectors as Go and C;
# its one dependency, xxhash, comes from PyPI into a virtual environment under $(BUILD).
$(VENV)/.installed: python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check 'xxhash>=3.0'
	touch $@

test-python: $(VENV)/.installed
	$(VENV)/bin/python -m unittest discover -s python/tests

demo: build
	scripts/demo.sh

clean:
	rm -rf bin $(BUILD)
