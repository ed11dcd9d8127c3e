# Shoal: `make demo` and `make test` work on a fresh Debian machine (they install what
# is missing through scripts/deps.sh).
SHELL := /bin/bash
BUILD ?= build
MPICC ?= mpicc
CFLAGS ?= -O2 -g
GO ?= go
PYTHON ?= python3
VENV := $(BUILD)/venv

.PHONY: all build deps go-build lib examples kernels test-programs test test-go test-c test-python test-integration demo clean

all: build

deps:
	@scripts/deps.sh

build: deps go-build lib examples kernels test-programs

go-build:
	$(GO) build -o bin/shoal ./cmd/shoal

include lib/lib.mk
include examples/examples.mk
include bench/kernels/kernels.mk
include test/programs/programs.mk

# The Go tests run under the race detector (RACE= turns it off). It costs the unit
# packages about twice their time and the testbed suites (test/...) nothing measurable:
# their test processes mostly wait for agents and MPI, which run bin/shoal, an ordinary
# build. The whole of make test stays well within CI's 45 minutes on 2 cores.
RACE ?= -race

test: build
	$(GO) vet ./...
	$(MAKE) test-c
	$(MAKE) test-python
	SHOAL_REQUIRE_BUILD=1 $(GO) test $(RACE) ./... -count=1 -p 1 -timeout 40m

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
