#!/usr/bin/env bash
# scripts/install.sh install|uninstall: puts one build tree of Shoal under a prefix (make
# install, make install-mpich), or removes what that put there (make uninstall). make
# builds first and passes what it knows through the environment:
#
#   BUILD       the build tree (build, or build/mpich)
#   PREFIX      where it goes (/usr/local); BINDIR, LIBDIR, INCLUDEDIR under it by default
#   DESTDIR     a staging root prepended to every path written, not to the paths recorded
#   MPICC MPIFC the MPI's own compiler wrappers the tree was built with
#   PIP_PYTHON  a Python with pip and setuptools that installs the Python package
#               (make's build/venv); empty: no Python package
#   SYSCONFDIR, SYSTEMDUNITDIR  where the agent's configuration and systemd unit go
#               (scripts/install-deploy.sh says where by default)
#
# One prefix holds the build of one MPI: the Open MPI and MPICH libraries have the same
# names and are not ABI compatible, so installing one over the other is refused.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
if [ "$mode" != install ] && [ "$mode" != uninstall ]; then
	echo "usage: scripts/install.sh install|uninstall" >&2
	exit 2
fi
BUILD=${BUILD:-build}
PREFIX=${PREFIX:-/usr/local}
BINDIR=${BINDIR:-$PREFIX/bin}
LIBDIR=${LIBDIR:-$PREFIX/lib}
INCLUDEDIR=${INCLUDEDIR:-$PREFIX/include}
DESTDIR=${DESTDIR:-}
PIP_PYTHON=${PIP_PYTHON:-}
for var in PREFIX BINDIR LIBDIR INCLUDEDIR; do
	case ${!var} in
	/*) ;;
	*) echo "$mode: $var must be an absolute path, not '${!var}'" >&2; exit 1 ;;
	esac
done

# What the build makes (lib/lib.mk, lib/fortran/fortran.mk), all of it installed.
LIBS=(libshoal.so libshoal.a libshoalf.so libshoalf.a)
HEADERS=(shoal.h shoal.mod shoal_f08.mod)
PCS=(shoal.pc shoal-fortran.pc)
CMAKEDIR=$LIBDIR/cmake/Shoal

# The Python package goes where `pip install --prefix` puts it, the site directory of
# the prefix for this Python version: the layout module systems point PYTHONPATH at.
pysite=
if [ -n "$PIP_PYTHON" ]; then
	pysite=$("$PIP_PYTHON" -c 'import sys, sysconfig
print(sysconfig.get_path("purelib", "posix_prefix", {"base": sys.argv[1], "platbase": sys.argv[1]}))' "$PREFIX")
fi

d=$DESTDIR
if [ "$mode" = uninstall ]; then
	rm -f "$d$BINDIR/shoal" "$d$BINDIR/shoal-rank" "$d$BINDIR/shoal-rsh"
	for f in "${LIBS[@]}"; do rm -f "$d$LIBDIR/$f"; done
	for f in "${HEADERS[@]}"; do rm -f "$d$INCLUDEDIR/$f"; done
	for f in "${PCS[@]}"; do rm -f "$d$LIBDIR/pkgconfig/$f"; done
	rm -rf "$d$CMAKEDIR"
	if [ -n "$pysite" ]; then
		rm -rf "$d$pysite/shoal" "$d$pysite"/shoal-*.dist-info
	fi
	# Only the directories that hold nothing but Shoal's files; the prefix's own stay.
	rmdir "$d$LIBDIR/pkgconfig" "$d$LIBDIR/cmake" 2>/dev/null || true
	PREFIX=$PREFIX BINDIR=$BINDIR DESTDIR=$DESTDIR scripts/install-deploy.sh uninstall
	echo "uninstall: removed Shoal from $d$PREFIX"
	exit 0
fi

missing=()
[ -x bin/shoal ] || missing+=(bin/shoal)
[ -x bin/shoal-rank ] || missing+=(bin/shoal-rank)
[ -x bin/shoal-rsh ] || missing+=(bin/shoal-rsh)
for f in "${LIBS[@]}"; do [ -e "$BUILD/lib/$f" ] || missing+=("$BUILD/lib/$f"); done
for f in "${HEADERS[@]}"; do [ -e "$BUILD/include/$f" ] || missing+=("$BUILD/include/$f"); done
for f in "${PCS[@]}"; do [ -e "$BUILD/lib/pkgconfig/$f" ] || missing+=("$BUILD/lib/pkgconfig/$f"); done
if [ ${#missing[@]} -gt 0 ]; then
	echo "install: not built: ${missing[*]} (run make build)" >&2
	exit 1
fi

mpicc=$(command -v "${MPICC:?MPICC is not set}") || { echo "install: MPICC $MPICC not found" >&2; exit 1; }
mpifc=$(command -v "${MPIFC:?MPIFC is not set}") || { echo "install: MPIFC $MPIFC not found" >&2; exit 1; }
macros=$(echo '#include <mpi.h>' | "$mpicc" -E -dM -x c -)
case $macros in
*"#define OPEN_MPI "*) mpi="Open MPI" ;;
*"#define MPICH_VERSION "*) mpi=MPICH ;;
*) echo "install: $mpicc is neither Open MPI nor MPICH (no OPEN_MPI or MPICH_VERSION in its mpi.h)" >&2; exit 1 ;;
esac

if [ -e "$d$CMAKEDIR/ShoalConfig.cmake" ]; then
	there=$(sed -n 's/^set(Shoal_MPI "\(.*\)")$/\1/p' "$d$CMAKEDIR/ShoalConfig.cmake")
	if [ -n "$there" ] && [ "$there" != "$mpi" ]; then
		echo "install: $d$PREFIX holds Shoal built with $there; install the $mpi build into a prefix of its own (or make uninstall there first)" >&2
		exit 1
	fi
fi

install -d "$d$BINDIR" "$d$LIBDIR/pkgconfig" "$d$INCLUDEDIR" "$d$CMAKEDIR"
install -m 755 bin/shoal "$d$BINDIR/shoal"
install -m 755 bin/shoal-rank "$d$BINDIR/shoal-rank"
install -m 755 bin/shoal-rsh "$d$BINDIR/shoal-rsh"
for f in "${LIBS[@]}"; do
	case $f in
	*.so) install -m 755 "$BUILD/lib/$f" "$d$LIBDIR/$f" ;;
	*) install -m 644 "$BUILD/lib/$f" "$d$LIBDIR/$f" ;;
	esac
done
for f in "${HEADERS[@]}"; do install -m 644 "$BUILD/include/$f" "$d$INCLUDEDIR/$f"; done

# The build tree's .pc files point into it; these point at the prefix (as ${prefix}/...
# where they lie under it, so pkg-config --define-prefix can move them) and name the MPI's
# compiler wrappers, the ones to compile with: pkg-config --variable=mpicc shoal.
under_prefix() { case $1 in "$PREFIX"/*) echo "\${prefix}${1#"$PREFIX"}" ;; *) echo "$1" ;; esac; }
for f in "${PCS[@]}"; do
	sed -e '/^mpicc=/d' -e '/^mpifort=/d' -e "s|^prefix=.*|prefix=$PREFIX|" \
		-e "s|^includedir=.*|includedir=$(under_prefix "$INCLUDEDIR")|" \
		-e "s|^libdir=.*|libdir=$(under_prefix "$LIBDIR")\nmpicc=$mpicc\nmpifort=$mpifc|" \
		"$BUILD/lib/pkgconfig/$f" >"$d$LIBDIR/pkgconfig/$f"
	chmod 644 "$d$LIBDIR/pkgconfig/$f"
done

version=$(sed -n 's/^Version: //p' "$BUILD/lib/pkgconfig/shoal.pc")
soname() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]$/\1/p'; }
relative() { realpath -m --relative-to="$CMAKEDIR" "$1"; }
for f in ShoalConfig ShoalConfigVersion; do
	sed -e "s|@SHOAL_MPI@|$mpi|g" -e "s|@MPICC@|$mpicc|g" -e "s|@MPIFC@|$mpifc|g" \
		-e "s|@REL_INCLUDEDIR@|$(relative "$INCLUDEDIR")|g" -e "s|@REL_LIBDIR@|$(relative "$LIBDIR")|g" \
		-e "s|@SONAME@|$(soname "$BUILD/lib/libshoal.so")|g" \
		-e "s|@SONAME_F@|$(soname "$BUILD/lib/libshoalf.so")|g" \
		-e "s|@SHOAL_VERSION@|$version|g" -e "s|@SHOAL_VERSION_MAJOR@|${version%%.*}|g" \
		-e "s|@SHOAL_VERSION_MINOR@|$(echo "$version" | cut -d. -f2)|g" \
		-e "s|@SIZEOF_VOID_P@|$(getconf LONG_BIT | awk '{ print $1 / 8 }')|g" \
		"lib/cmake/$f.cmake.in" >"$d$CMAKEDIR/$f.cmake"
	chmod 644 "$d$CMAKEDIR/$f.cmake"
done

if [ -n "$pysite" ]; then
	# No dependencies: mpi4py must be built against this MPI, which only the user's
	# environment can see to (MPICC=mpicc.openmpi pip install mpi4py), and NumPy and
	# xxhash come from there too. --ignore-installed keeps pip away from the package
	# already in PIP_PYTHON's own environment; no build isolation, so nothing is fetched.
	# Staged, no bytecode: pip would record the staging path in it.
	"$PIP_PYTHON" -m pip install -q --disable-pip-version-check --no-deps --ignore-installed \
		--no-build-isolation --prefix "$PREFIX" ${DESTDIR:+--root "$DESTDIR" --no-compile} ./python
	if [ ! -e "$d$pysite/shoal/__init__.py" ]; then
		echo "install: pip did not put the Python package in $d$pysite" >&2
		exit 1
	fi
	printf 'PATH = %s\n' "'$LIBDIR/libshoal.so'" >"$d$pysite/shoal/_libshoal.py"
fi

PREFIX=$PREFIX BINDIR=$BINDIR DESTDIR=$DESTDIR scripts/install-deploy.sh install

echo "install: Shoal $version ($mpi) in $d$PREFIX"
if [ -n "$pysite" ]; then
	echo "install: Python package in $pysite (PYTHONPATH); it needs numpy, xxhash and mpi4py built with $mpi"
fi
