#!/bin/sh
# Build libkineto (PyTorch's profiler library, from its own source) CPU-only, and fake-torch
# (tests/kineto/fake-torch.cpp) against it, for the tests of npuprofd's libkineto endpoint.
#
#   tests/kineto/build.sh [SRC [OUT]]
#
#   SRC  the kineto source: a folder holding libkineto/ (or libkineto itself); by default
#        ../shared/testdata/kineto beside the checkout (see its README.md)
#   OUT  where the build goes; by default build/kineto. OUT/libkineto-build is libkineto's
#        cmake build, OUT/fake-torch the program, OUT/*.log the build's logs.
#
# Exit 0 when OUT/fake-torch is built or already newer than everything it is built from
# (fake-torch.cpp, this script and SRC's libkineto), with one line; 77 (skipped) with one line
# when SRC is absent or cmake, g++, python3 (libkineto's CMakeLists reads its file lists with
# it) or fmt's cmake package (Debian's libfmt-dev) is missing; 1 when the build fails, with the
# tail of its log.
#
# libkineto's CMakeLists builds fmt from a git submodule, which the source here lacks, unless
# the target fmt::fmt-header-only exists already: find_package(fmt) of Debian's libfmt-dev
# defines it, injected before the project's own CMakeLists with CMAKE_PROJECT_INCLUDE.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
SRC=${1:-$root/../shared/testdata/kineto}
OUT=${2:-$root/build/kineto}

skip() {
        echo "kineto: skipped: $*"
        exit 77
}

if [ -f "$SRC/libkineto/CMakeLists.txt" ]; then
        LK=$SRC/libkineto
elif [ -f "$SRC/CMakeLists.txt" ] && [ -f "$SRC/include/libkineto.h" ]; then
        LK=$SRC
else
        skip "no libkineto source at $SRC"
fi
LK=$(cd "$LK" && pwd)

for cmd in cmake g++; do
        command -v "$cmd" >/dev/null 2>&1 || skip "no $cmd (Debian package: $cmd)"
done
# Debian's interpreter first, as the project's Makefile does.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3 2>/dev/null) || skip "no python3 (Debian package: python3)"

have_fmt=false
for d in /usr/lib/*/cmake/fmt /usr/lib/cmake/fmt /usr/share/cmake/fmt /usr/local/lib/cmake/fmt \
         /usr/local/lib/*/cmake/fmt /usr/local/share/cmake/fmt; do
        if [ -f "$d/fmt-config.cmake" ]; then
                have_fmt=true
                break
        fi
done
$have_fmt || skip "no fmt cmake package (Debian package: libfmt-dev)"

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
B=$OUT/libkineto-build
PROG=$OUT/fake-torch

# One build at a time in OUT (the plain and the sanitizer builds share it).
if command -v flock >/dev/null 2>&1; then
        exec 9>"$OUT/.lock"
        flock 9
fi

# Up to date: nothing it is built from is newer than the program.
if [ -x "$PROG" ] && [ -z "$(find "$here/fake-torch.cpp" "$here/build.sh" "$LK" -newer "$PROG" \
                                -print 2>/dev/null | head -n 1)" ]; then
        echo "kineto: $PROG is up to date"
        exit 0
fi

fail() {
        echo "kineto: $1 failed; the end of $2:"
        tail -n 40 "$2" | sed 's/^/  /'
        exit 1
}

start=$(date +%s)
# Make's generator would leave the compiler's *.d files in OUT, which the project's Makefile
# includes from everywhere under build/: CMake's own dependency scan writes none.
if command -v ninja >/dev/null 2>&1; then
        gen=Ninja
        gen_opt=
else
        gen="Unix Makefiles"
        gen_opt=-DCMAKE_DEPENDS_USE_COMPILER=OFF
fi
# A build configured from another source or with another generator is started again.
if [ -f "$B/CMakeCache.txt" ]; then
        old_home=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$B/CMakeCache.txt")
        old_gen=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$B/CMakeCache.txt")
        if [ "$old_home" != "$LK" ] || [ "$old_gen" != "$gen" ]; then
                rm -rf "$B"
        fi
fi
# The build is the same whatever flags the caller's environment holds (make exports those
# given on its command line), and never joins the caller's make jobserver.
unset CFLAGS CXXFLAGS CPPFLAGS LDFLAGS CC CXX MAKEFLAGS MFLAGS MAKELEVEL
jobs=${KINETO_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}

if [ ! -f "$B/CMakeCache.txt" ]; then
        echo 'find_package(fmt REQUIRED)' > "$OUT/fmt-inject.cmake"
        cmake -S "$LK" -B "$B" -G "$gen" \
                -DCMAKE_BUILD_TYPE=Release \
                -DCMAKE_CXX_COMPILER=g++ \
                -DKINETO_BACKEND=cpu \
                -DKINETO_BUILD_TESTS=OFF \
                -DKINETO_LIBRARY_TYPE=static \
                -DPython3_EXECUTABLE="$PY" \
                -DCMAKE_PROJECT_INCLUDE="$OUT/fmt-inject.cmake" $gen_opt \
                > "$OUT/configure.log" 2>&1 || { rm -f "$B/CMakeCache.txt"; fail "configuring libkineto" "$OUT/configure.log"; }
fi
cmake --build "$B" --parallel "$jobs" > "$OUT/build.log" 2>&1 || fail "building libkineto" "$OUT/build.log"
[ -f "$B/libkineto.a" ] || { echo "kineto: no $B/libkineto.a after the build" >> "$OUT/build.log"; fail "building libkineto" "$OUT/build.log"; }

# libkineto was built with fmt header-only: the program needs no -lfmt.
g++ -std=c++20 -O1 -g -Wall -Wextra -I"$LK/include" "$here/fake-torch.cpp" "$B/libkineto.a" -pthread \
        -o "$PROG.tmp" > "$OUT/fake-torch.log" 2>&1 || { rm -f "$PROG.tmp"; fail "compiling fake-torch" "$OUT/fake-torch.log"; }
mv -f "$PROG.tmp" "$PROG"
echo "kineto: built $PROG against $LK in $(( $(date +%s) - start )) s"
