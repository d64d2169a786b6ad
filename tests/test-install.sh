#!/usr/bin/env bash
# make install into a DESTDIR tree as a Debian system lays it out (PREFIX=/usr, the multiarch
# LIBDIR), then a C program built the way C users build against a library, through
# `pkg-config --cflags --libs libnpuprof`, shared and static, run against that tree; then
# make uninstall removes every file install put there.
#   tests/test-install.sh BUILD_DIR
set -u
build=${1:?usage: tests/test-install.sh BUILD_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/tests/lib.sh"
npf_plain_only test-install "$build" "installs the plain build only"
npf_harness install
dest=$tmp/root

inst() { make -s -C "$here" "$@" PREFIX=/usr DESTDIR="$dest" >"$tmp/make.out" 2>&1; }
files() { (cd "$dest" && find . ! -type d | sort); }

libdir=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null)
[ "$libdir" = /usr/lib/ ] && libdir=/usr/lib
version=$(sed -n 's/^#define NPUPROF_VERSION *"\(.*\)"/\1/p' "$here/include/npuprof/protocol.h")

if inst install; then ok "make install PREFIX=/usr DESTDIR=... ran"
else fail "make install failed" "$(tail -n 20 "$tmp/make.out")"; fi
check "the library is libnpuprof.so.$version, with its .so.0 and .so links, in $libdir" \
        test -f "$dest$libdir/libnpuprof.so.$version" -a "$(readlink "$dest$libdir/libnpuprof.so.0")" = "libnpuprof.so.$version" \
        -a "$(readlink "$dest$libdir/libnpuprof.so")" = libnpuprof.so.0
check "its soname is libnpuprof.so.0" sh -c "objdump -p '$dest$libdir/libnpuprof.so.$version' | grep -q 'SONAME *libnpuprof.so.0'"
check "the static library, the heap tracker, the headers and the man pages are there" \
        test -f "$dest$libdir/libnpuprof.a" -a -f "$dest$libdir/libnpuprof-heap.so" \
        -a -f "$dest/usr/include/npuprof/rank.h" -a -f "$dest/usr/share/man/man3/libnpuprof.3" \
        -a -f "$dest/usr/sbin/npuprofd" -a -f "$dest/usr/bin/npuprofctl"

check "man npf_rank_open finds libnpuprof(3)" \
        sh -c "man -M '$dest/usr/share/man' 3 npf_rank_open 2>/dev/null | grep -q 'LIBNPUPROF(3)'"
check "man libnpuprof-heap finds the heap tracker's page" \
        sh -c "man -M '$dest/usr/share/man' 3 libnpuprof-heap 2>/dev/null | grep -q 'NPUPROF_HEAP_MIN_BYTES'"
check "the heap tracker's soname is the name it is preloaded by, libnpuprof-heap.so" \
        sh -c "objdump -p '$dest$libdir/libnpuprof-heap.so' | grep -q 'SONAME *libnpuprof-heap.so$'"
completions=$(pkg-config --variable=completionsdir bash-completion 2>/dev/null || echo /usr/share/bash-completion/completions)
check "the bash completions are in $completions" \
        test -f "$dest$completions/npuprofctl" -a -f "$dest$completions/npuprof-replay"

# The installed tree first, then the system's own .pc files (jansson's, which libnpuprof's names).
system_pc=$(pkg-config --variable pc_path pkg-config)
pc() { PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_LIBDIR=$dest$libdir/pkgconfig:$system_pc pkg-config "$@"; }
check "pkg-config knows libnpuprof $version" test "$(pc --modversion libnpuprof)" = "$version"
check "its static flags name the private dependencies" \
        sh -c "echo '$(pc --static --libs libnpuprof)' | grep -- -ljansson | grep -q -- -ldw"

cat >"$tmp/user.c" <<'C'
#include <npuprof/rank.h>
#include <stdio.h>

int main(void)
{
        npf_rank_options_t o = { .rank = 3, .local_device = -1, .shm_name = "npftest-install-none" };
        char err[NPF_SHM_ERR_MAX];
        npf_rank_t *h;

        if (npf_rank_open(&o, &h, err) < 0) {
                fprintf(stderr, "%s\n", err);
                return 1;
        }
        for (int64_t step = 1; step <= 100; step++)
                npf_rank_step(h, step);
        npf_rank_info_t i;
        npf_rank_info(h, &i);
        printf("rank %lld attached %d\n", (long long) i.rank, (int) i.attached);
        npf_rank_close(h);
        return 0;
}
C
# shellcheck disable=SC2046
if cc -o "$tmp/user" "$tmp/user.c" $(pc --cflags --libs libnpuprof) 2>"$tmp/cc.out"; then
        ok "a program builds with \`pkg-config --cflags --libs libnpuprof\`"
else fail "a program does not build with pkg-config's flags" "$(cat "$tmp/cc.out")"; fi
out=$(LD_LIBRARY_PATH=$dest$libdir "$tmp/user" 2>&1)
check "it runs against the installed libnpuprof.so.0, stepping detached (no daemon): $out" \
        test "$out" = "rank 3 attached 0"
check "it needs libnpuprof.so.0" sh -c "objdump -p '$tmp/user' | grep -q 'NEEDED *libnpuprof.so.0'"
# shellcheck disable=SC2046
if cc -o "$tmp/user-static" "$tmp/user.c" $(pc --cflags libnpuprof) "$dest$libdir/libnpuprof.a" \
        $(pc --static --libs-only-other --libs-only-l libnpuprof | sed 's/-lnpuprof//') 2>"$tmp/cc.out"; then
        ok "it links statically with the static library and its private dependencies"
else fail "it does not link statically" "$(cat "$tmp/cc.out")"; fi
check "the static one runs without the shared library" test "$("$tmp/user-static" 2>&1)" = "rank 3 attached 0"

if inst uninstall; then ok "make uninstall ran"
else fail "make uninstall failed" "$(tail -n 20 "$tmp/make.out")"; fi
left=$(files | grep -v '^./etc/npuprof/')
check "make uninstall removed every file install put, and kept the operator's /etc/npuprof" \
        test -z "$left" -a -f "$dest/etc/npuprof/profiler_config.json"
[ -n "$left" ] && echo "     left: $left"

echo "install: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
