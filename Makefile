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

.PHONY: all build deps s3-server go-build lib examples kernels test-programs test test-go test-c test-fortran python test-python mpich test-mpich install install-mpich uninstall test-integration demo chaos fuzz fuzz-go fuzz-c clean

all: build

deps:
	@scripts/deps.sh

build: deps go-build lib fortran python examples fortran-examples kernels test-programs mpich

# shoal --version prints the release (shoal.h's) and the commit built.
go-build: bin/shoal-rank bin/shoal-rsh
	$(GO) build -ldflags "-X main.version=$(SHOAL_VERSION) -X main.commit=$$(git describe --always --dirty 2>/dev/null)" -o bin/shoal ./cmd/shoal

# The rank wrapper and the launcher hook without Go's start-up (cmd/shoal-rank,
# cmd/shoal-rsh): the coordinator starts ranks and daemons through them when they are
# next to shoal, else through `shoal exec-rank` and `shoal rsh`.
bin/shoal-rank: cmd/shoal-rank/shoal-rank.c
	@mkdir -p bin
	$(CC) -std=c11 $(CFLAGS) -Wall -Wextra -o $@ $<

bin/shoal-rsh: cmd/shoal-rsh/shoal-rsh.c
	@mkdir -p bin
	$(CC) -std=c11 $(CFLAGS) -Wall -Wextra -o $@ $<

include lib/lib.mk
include lib/fortran/fortran.mk
include examples/examples.mk
include bench/kernels/kernels.mk
include test/programs/programs.mk

# The Go tests run under the race detector (RACE= turns it off). It costs the unit
# packages about twice their time and the testbed suites (test/...) nothing measurable:
# their test processes mostly wait for agents and MPI, which run bin/shoal, an ordinary
# build. The whole of make test stays well within CI's 45 minutes on 2 cores.
RACE ?= -race

test: build s3-server
	$(GO) vet ./...
	$(MAKE) test-c
	$(MAKE) test-fortran
	$(MAKE) test-python
	$(MAKE) test-arm64
	SHOAL_REQUIRE_BUILD=1 $(GO) test $(RACE) ./... -count=1 -p 1 -timeout 40m

# The Python package (python/): the checkpoint API over libshoal and the shard reader,
# installed into a virtual environment under $(BUILD) with numpy, mpi4py and xxhash from
# PyPI. mpi4py is compiled here, with Open MPI (--no-binary); pip keeps the wheel it built
# in its cache, so the next venv on this machine takes seconds, not minutes. Only this
# tree's venv builds mpi4py: the MPICH tree has none, so no wheel built for the other MPI
# can be taken from the cache. The package records where this tree's libshoal is
# (shoal/_libshoal.py).
PY_SRCS := python/pyproject.toml $(wildcard python/src/shoal/*.py)

$(VENV)/.deps: python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	MPICC=$(MPICC) $(VENV)/bin/pip install -q --disable-pip-version-check \
		--no-binary mpi4py 'xxhash>=3.0' 'numpy>=1.21' 'mpi4py>=3.1' 'pytest>=7'
	touch $@

$(VENV)/.installed: $(VENV)/.deps $(PY_SRCS) $(BUILD)/lib/libshoal.so
	$(VENV)/bin/pip install -q --disable-pip-version-check --no-deps --force-reinstall ./python
	printf 'PATH = %s\n' "'$(abspath $(BUILD))/lib/libshoal.so'" > \
		"$$($(VENV)/bin/python -c 'import shoal, os; print(os.path.dirname(shoal.__file__))')/_libshoal.py"
	touch $@

# setuptools with its own bdist_wheel (70.1), with which make install builds the package
# without fetching anything; a stamp of its own, so that an existing venv gets it too.
$(VENV)/.build-tools: $(VENV)/.deps
	$(VENV)/bin/pip install -q --disable-pip-version-check 'setuptools>=70.1'
	touch $@

python: $(VENV)/.installed $(VENV)/.build-tools

test-python: $(VENV)/.installed
	cd python && ../$(VENV)/bin/python -m pytest -q -p no:cacheprovider

# The same library, Fortran module and examples built with MPICH, in $(BUILD)/mpich: the
# two MPIs are not ABI compatible, so a program runs with the MPI it was built with
# (shoal run --engine mpich -- $(BUILD)/mpich/examples/heat).
MPICH_MAKE = $(MAKE) --no-print-directory BUILD=$(BUILD)/mpich MPICC=mpicc.mpich \
	MPIFC=mpifort.mpich MPIRUN=mpiexec.mpich

mpich:
	$(MPICH_MAKE) lib fortran examples fortran-examples

test-mpich: mpich
	$(MPICH_MAKE) test-c test-fortran

# Installing: make install PREFIX=/opt/shoal (default /usr/local; DESTDIR stages, as
# usual) builds what is missing and puts there
#   bin/shoal, bin/shoal-rank, bin/shoal-rsh
#   lib/libshoal.{so,a}, lib/libshoalf.{so,a} (the Fortran module's code)
#   include/shoal.h, include/shoal.mod, include/shoal_f08.mod
#   lib/pkgconfig/shoal.pc, shoal-fortran.pc (pointing at the prefix; mpicc= names the MPI)
#   lib/cmake/Shoal/ShoalConfig.cmake, ShoalConfigVersion.cmake (Shoal::shoal, Shoal::shoalf)
#   lib/python3.X/site-packages/shoal, without its dependencies (PYTHONPATH)
#   lib/systemd/system/shoal-agent.service (deploy/, running the installed shoal)
#   SYSCONFDIR/shoal/agent.toml.example, and agent.toml unless there is one (SYSCONFDIR:
#   /etc for the prefixes /usr and /usr/local, else PREFIX/etc; scripts/install-deploy.sh)
# BINDIR, LIBDIR, INCLUDEDIR, SYSCONFDIR and SYSTEMDUNITDIR override one directory each. install-mpich installs the MPICH tree the same
# way into another prefix, since one prefix holds one MPI's build, as module systems keep
# one module per MPI. The work is scripts/install.sh's; the Python package is installed
# with this tree's venv, whose pip and setuptools need no network.
PREFIX ?= /usr/local
INSTALL_ENV = PREFIX='$(PREFIX)' DESTDIR='$(DESTDIR)' $(if $(BINDIR),BINDIR='$(BINDIR)') \
	$(if $(LIBDIR),LIBDIR='$(LIBDIR)') $(if $(INCLUDEDIR),INCLUDEDIR='$(INCLUDEDIR)') \
	$(if $(SYSCONFDIR),SYSCONFDIR='$(SYSCONFDIR)') $(if $(SYSTEMDUNITDIR),SYSTEMDUNITDIR='$(SYSTEMDUNITDIR)') \
	PIP_PYTHON='$(abspath $(VENV))/bin/python'

install: go-build lib fortran $(VENV)/.build-tools
	$(INSTALL_ENV) BUILD=$(BUILD) MPICC=$(MPICC) MPIFC=$(MPIFC) scripts/install.sh install

install-mpich: go-build mpich $(VENV)/.build-tools
	$(INSTALL_ENV) BUILD=$(BUILD)/mpich MPICC=mpicc.mpich MPIFC=mpifort.mpich scripts/install.sh install

uninstall:
	$(INSTALL_ENV) scripts/install.sh uninstall

# The S3-compatible server that the durable store's tests and shoal testbed s3 run:
# SeaweedFS's weed (Apache-2.0, a program of its own, never linked into shoal), built
# from the Go module proxy once into /var/cache/shoal/seaweedfs/VERSION/weed, with a
# stamp beside it that makes the next run a no-op (scripts/seaweedfs.sh; the first build
# takes minutes).
s3-server:
	@scripts/seaweedfs.sh >/dev/null

demo: build
	scripts/demo.sh

# arm64 hosts in the testbed (shoal testbed up --arch ...,arm64; docs/testbed.md).
# arm64-root builds a Debian bookworm arm64 root file system with its own Open MPI, MPICH
# and compilers (mmdebstrap, under qemu-aarch64 through binfmt_misc, which it mounts and
# registers as needed) into ARM64_ROOT, once: a stamp of its inputs beside it makes the
# next run a no-op. Python's packages (numpy, mpi4py, xxhash) are a second step with a
# stamp of its own, added to a cached root in minutes rather than rebuilding it. arm64-agent builds the static linux/arm64 agent that those hosts run,
# bin/arm64/shoal.
ARM64_ROOT ?= /var/cache/shoal/arm64-root

# The pure packages whose tests also run on arm64 (under qemu-aarch64): the shard format,
# the job directory's contract and every rule that decides from plain data, so a
# difference between the instruction sets shows there first.
ARM64_GO_TESTS := ./internal/shard ./internal/jobdir ./internal/epochs ./internal/job \
	./internal/erasure ./internal/compress ./internal/traffic ./internal/mtbf \
	./internal/links ./internal/retention ./internal/farm ./internal/place

.PHONY: arm64-root arm64-agent build-arm64 test-arm64 abi-vectors
arm64-root:
	ROOT=$(ARM64_ROOT) scripts/arm64-root.sh

arm64-agent:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -o bin/arm64/shoal ./cmd/shoal

# libshoal and the examples built for arm64 by Debian's cross compiler against that root
# (its Open MPI, xxHash and C library as the sysroot; scripts/arm64-build.sh,
# scripts/arm64-mpicc): $(BUILD)/arm64 has the layout of $(BUILD), so
# $(BUILD)/arm64/examples/heat; and the shoal Python package for the root's python3 in
# $(BUILD)/arm64/python (PYTHONPATH), which records that libshoal's path.
build-arm64: arm64-root
	ROOT=$(ARM64_ROOT) OUT=$(abspath $(BUILD))/arm64 scripts/arm64-build.sh

# make test builds all three (test/arch runs on them) and runs the pure packages' tests
# built for arm64, and restores the shard vectors written on each instruction set on the
# other (scripts/abi-shards.sh).
test-arm64: arm64-root arm64-agent build-arm64 $(BUILD)/lib/tests/abi_shard
	CGO_ENABLED=0 GOARCH=arm64 $(GO) test -count=1 $(ARM64_GO_TESTS)
	ROOT=$(ARM64_ROOT) BUILD=$(BUILD) scripts/abi-shards.sh check

# testdata/shards/abi-amd64.shard and abi-arm64.shard, written by libshoal on each
# instruction set (lib/tests/abi_shard.c); committed as written.
abi-vectors: arm64-root build-arm64 $(BUILD)/lib/tests/abi_shard
	ROOT=$(ARM64_ROOT) BUILD=$(BUILD) scripts/abi-shards.sh write

# Tarballs for machines without build tools (scripts/dist.sh says what each holds): the
# static agent for linux/amd64, linux/arm64 and android/arm64, libshoal per MPI, and the
# source, with their SHA-256 sums, in dist/.
.PHONY: dist
dist: go-build lib fortran mpich
	SHOAL_VERSION=$(SHOAL_VERSION) OUT=dist scripts/dist.sh

# Long jobs under a seeded random schedule of 50 faults on a 5-host testbed (root; about
# 15 minutes): not part of make test, since its timing depends on the machine's load.
chaos: build
	bench/chaos

# Fuzzing, not part of make test: each Go fuzz target for FUZZTIME (seconds, written
# "30s"), then the C shard verifier under libFuzzer with AddressSanitizer and
# UndefinedBehaviorSanitizer for as long (clang and its runtime from Debian's
# clang and libclang-rt-14-dev, installed when missing and root). Each prints how
# many inputs ran; a crash stops make with the input that caused it (Go keeps it
# under the package's testdata/fuzz/, libFuzzer in $(BUILD)/fuzz/). New inputs are
# minimized for 500 runs at most: with the default (60 s) FuzzDecodeRequest spent most
# of its time minimizing, which the exec count does not show.
FUZZTIME ?= 30s
FUZZ_CC ?= clang
GO_FUZZ := internal/shard:FuzzParse internal/shard:FuzzParseSealed internal/api:FuzzDecodeRequest \
	internal/launch:FuzzDaemonArgv internal/launch:FuzzReadFrame

fuzz: fuzz-go fuzz-c

fuzz-go:
	@set -o pipefail; for t in $(GO_FUZZ); do pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "== $$fn ($$pkg) for $(FUZZTIME)"; \
		$(GO) test ./$$pkg -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 500x 2>&1 | \
			tee $(BUILD)/fuzz-$$fn.log | grep -E '^(PASS|FAIL|ok|---|    )' ; \
		status=$${PIPESTATUS[0]}; \
		grep -o 'execs: [0-9]*' $(BUILD)/fuzz-$$fn.log | tail -1 | sed "s/^/$$fn: /"; \
		[ $$status -eq 0 ] || exit 1; \
	done

$(BUILD)/fuzz/fuzz_shard: lib/tests/fuzz_shard.c lib/src/shard.c $(LIB_HDRS)
	@mkdir -p $(@D)
	@command -v $(FUZZ_CC) >/dev/null || { [ "$$(id -u)" = 0 ] && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		clang libclang-rt-14-dev >/dev/null; }
	$(FUZZ_CC) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
		$$($(MPICC) --showme:compile) -Ilib/include -Ilib/src -o $@ \
		lib/tests/fuzz_shard.c lib/src/shard.c -lxxhash

fuzz-c: $(BUILD)/fuzz/fuzz_shard
	@rm -rf $(BUILD)/fuzz/corpus && mkdir -p $(BUILD)/fuzz/corpus && cp testdata/shards/*.shard $(BUILD)/fuzz/corpus/
	@echo "== fuzz_shard (lib/src/shard.c, ASan+UBSan) for $(FUZZTIME)"
	@set -o pipefail; cd $(BUILD)/fuzz && ./fuzz_shard -max_total_time=$$(echo $(FUZZTIME) | tr -d s) \
		-print_final_stats=1 corpus 2>&1 | tee fuzz_shard.log | grep -E 'ERROR|SUMMARY|stat::number_of_executed_units' \
		| sed 's/^stat::number_of_executed_units: */fuzz_shard: execs: /'

clean:
	rm -rf bin $(BUILD)
