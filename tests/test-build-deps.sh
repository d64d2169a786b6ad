#!/usr/bin/env bash
# `make` asks for the build dependencies only and never runs a package manager; `make demo`
# sets up the build dependencies (and python3) only; `make check` the test toolchain too.
# Run with the test toolchain hidden (a PATH without clang, valgrind and faketime), a
# package manager that only writes down what it is asked, and make -n, so that nothing is
# built: what counts is what the Makefile runs as it reads.
#   tests/test-build-deps.sh BUILD_DIR
set -u
build=${1:?usage: tests/test-build-deps.sh BUILD_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/tests/lib.sh"
npf_plain_only test-build-deps "$build" "tests the plain build only"
npf_harness build-deps
bin=$tmp/bin asked=$tmp/asked
mkdir -p "$bin"
# Every program of the system but the test toolchain; apt-get and sudo write down their calls.
for d in /usr/local/bin /usr/bin /bin /usr/sbin /sbin; do
        for f in "$d"/*; do
                n=${f##*/}
                case $n in clang* | valgrind* | faketime | apt-get | apt | sudo) continue ;; esac
                [ -x "$f" ] && [ ! -e "$bin/$n" ] && ln -s "$f" "$bin/$n"
        done
done
for n in apt-get sudo; do
        printf '#!/bin/sh\necho "%s $*" >>"%s"\n' "$n" "$asked" >"$bin/$n"
        chmod +x "$bin/$n"
done
: >"$asked"
mk() { env PATH="$bin" make -s -n -C "$here" "$@" >"$tmp/make.out" 2>&1; }

check "the test toolchain is hidden" sh -c "! PATH='$bin' command -v clang && ! PATH='$bin' command -v valgrind"
if mk all; then ok "make builds with the build dependencies only, the test toolchain absent"
else fail "make wants more than the build dependencies" "$(tail -n 5 "$tmp/make.out")"; fi
check "make ran no package manager" test ! -s "$asked"
PKG_CONFIG_LIBDIR=/nonexistent mk all
status=$?
check "a missing build dependency stops make, naming the Debian packages" sh -c "[ $status -ne 0 ] &&
        grep -q 'it needs these Debian packages: libuv1-dev libjansson-dev libsystemd-dev libsqlite3-dev zlib1g-dev libdw-dev$' '$tmp/make.out'"
check "... and still runs no package manager" test ! -s "$asked"
# make demo needs what make needs, and python3: never the test toolchain.
PKG_CONFIG_LIBDIR=/nonexistent mk demo
if [ "$(id -u)" = 0 ]; then
        check "make demo sets up the build dependencies: it asked apt-get for libuv1-dev" \
                grep -q '^apt-get install .*libuv1-dev' "$asked"
        check "... and not for the test toolchain (clang, valgrind, faketime)" \
                sh -c "! grep -qE '^apt-get install .*(clang|valgrind|faketime)' '$asked'"
else
        check "make demo names the build dependencies to install" grep -q 'apt-get install.*libuv1-dev' "$tmp/make.out"
        check "... and not the test toolchain (clang, valgrind, faketime)" \
                sh -c "! grep -qE 'apt-get install.*(clang|valgrind|faketime)' '$tmp/make.out'"
fi
: >"$asked"
mk check
if [ "$(id -u)" = 0 ]; then
        check "make check sets up the test toolchain: it asked apt-get for clang" grep -q '^apt-get install .*clang' "$asked"
else
        check "make check names the packages to install: clang among them" grep -q 'apt-get install.*clang' "$tmp/make.out"
fi

echo "build-deps: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
