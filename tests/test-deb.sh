#!/usr/bin/env bash
# The Debian packages, as an operator installs them: `make deb` builds npuprofd,
# libnpuprof0, libnpuprof-dev and python3-npuprof; lintian finds no error in them; each
# holds its files; the npuprofd package's programs run from the unpacked package, the
# daemon on a private segment, socket and configuration directory; installed into a scratch
# root (dpkg --root, its maintainer scripts run as they run under DPKG_ROOT), it creates the
# npuprof user and the output root and enables nothing, and its unit, with its binaries,
# passes tests/systemd/test-units.sh under a real systemd in private namespaces; a C program
# builds through pkg-config against libnpuprof-dev and the Python package loads libnpuprof0's
# library; purge leaves nothing. Last, the README's install block, as it reads, on a fresh
# Debian node: a container of a Debian base (made by mmdebstrap: apt, sudo, systemd and the
# packages' dependencies; cached in build/kubernetes) with systemd as its PID 1 and these
# packages in ./build/deb, where podman can run it here: the packages installed by apt, the
# units enabled and started by systemctl, npuprofctl status answered by the socket-activated
# daemon, and a rank of the installed Python package listed.
#   tests/test-deb.sh BUILD_DIR
# Skipped (77), and said so, where dpkg-buildpackage or lintian is absent.
set -u
build=${1:?usage: tests/test-deb.sh BUILD_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/tests/lib.sh"
npf_plain_only test-deb "$build" "packages the plain build only"
for tool in dpkg-buildpackage lintian; do
        command -v "$tool" >/dev/null || { echo "test-deb: $tool is missing (Debian's dpkg-dev, lintian): not run"; exit 77; }
done
npf_harness deb
debs=$tmp/deb
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
version=$(dpkg-parsechangelog -l "$here/debian/changelog" -S Version)
upstream=$(sed -n 's/^#define NPUPROF_VERSION *"\(.*\)"/\1/p' "$here/include/npuprof/protocol.h")
shm=npftest-deb-$$-a
t0=$SECONDS

# --- the packages -------------------------------------------------------------------------
# Warnings are errors here as in CI: the package build's fortified -O2 finds what others miss.
if CI=${CI:-true} make -s -C "$here" deb DEBDIR="$debs" >"$tmp/make.out" 2>&1; then
        ok "make deb builds the packages ($((SECONDS - t0)) s)"
else
        fail "make deb fails" "$(grep -v '^cc \|^	' "$tmp/make.out" | tail -n 25)"
        echo "deb: $passed passed, $failed failed"
        exit 1
fi
deb() { echo "$debs/${1}_${version}_$2.deb"; }
for p in npuprofd:$arch libnpuprof0:$arch libnpuprof-dev:$arch python3-npuprof:all; do
        check "$(basename "$(deb "${p%:*}" "${p#*:}")") is built" test -f "$(deb "${p%:*}" "${p#*:}")"
done
check "the package version $version is the program's, $upstream" test "${version%%-*}" = "$upstream"

t1=$SECONDS
lintian --fail-on error --display-info "$debs/npuprof_${version}_$arch.changes" >"$tmp/lintian.out" 2>&1
status=$?
summary=$(awk '/^E:/ { e++ } /^W:/ { w++ } /^I:/ { i++ } END { printf "%d errors, %d warnings, %d infos", e, w, i }' \
        "$tmp/lintian.out")
check "lintian finds no error ($summary; $((SECONDS - t1)) s)" \
        sh -c "[ $status -eq 0 ] && ! grep -q '^E:' '$tmp/lintian.out'"
grep -E '^[EWI]:' "$tmp/lintian.out" | sed 's/^/     | /'

# --- what each package holds ----------------------------------------------------------------
contents() { dpkg-deb -c "$1" | awk '{ print $6 }' | sed 's|^\./|/|'; }
holds() {       # holds PACKAGE ARCH PATH...: every PATH is in the package
        local list p missing=
        list=$(contents "$(deb "$1" "$2")")
        shift 2
        for p in "$@"; do grep -qxF "$p" <<<"$list" || missing="$missing $p"; done
        [ -z "$missing" ] || echo "     | missing:$missing"
        [ -z "$missing" ]
}
check "npuprofd holds the daemon, the opener, the CLI, the analyzer, units, sysusers, tmpfiles, config, man pages, completions" \
        holds npuprofd "$arch" /usr/sbin/npuprofd /usr/sbin/npuprof-shmopen /usr/bin/npuprofctl /usr/bin/npuprof-replay \
        /lib/systemd/system/npuprofd.service /lib/systemd/system/npuprofd.socket \
        /lib/systemd/system/npuprof-shmopen.socket /lib/systemd/system/npuprof-shmopen@.service \
        /usr/share/man/man8/npuprof-shmopen.8.gz /usr/lib/sysusers.d/npuprof.conf \
        /usr/lib/tmpfiles.d/npuprof.conf /etc/npuprof/npuprofd.conf /etc/npuprof/profiler_config.json \
        /usr/share/man/man8/npuprofd.8.gz /usr/share/man/man1/npuprofctl.1.gz /usr/share/man/man1/npuprof-replay.1.gz \
        /usr/share/man/man5/profiler_config.json.5.gz /usr/share/bash-completion/completions/npuprofctl \
        /usr/share/bash-completion/completions/npuprof-replay /usr/share/doc/npuprofd/copyright
check "libnpuprof0 holds libnpuprof.so.$upstream, its .so.0 link and the heap tracker" \
        holds libnpuprof0 "$arch" "/usr/lib/$multiarch/libnpuprof.so.$upstream" "/usr/lib/$multiarch/libnpuprof.so.0" \
        "/usr/lib/$multiarch/libnpuprof-heap.so"
check "libnpuprof-dev holds the headers, the .so link, the static library, the .pc and the section-3 pages" \
        holds libnpuprof-dev "$arch" /usr/include/npuprof/rank.h /usr/include/npuprof/shm.h "/usr/lib/$multiarch/libnpuprof.so" \
        "/usr/lib/$multiarch/libnpuprof.a" "/usr/lib/$multiarch/pkgconfig/libnpuprof.pc" \
        /usr/share/man/man3/libnpuprof.3.gz /usr/share/man/man3/libnpuprof-heap.3.gz /usr/share/man/man3/npf_rank_open.3.gz
check "python3-npuprof holds the package and its metadata" \
        holds python3-npuprof all /usr/lib/python3/dist-packages/npuprof/__init__.py \
        /usr/lib/python3/dist-packages/npuprof/_lib.py "/usr/lib/python3/dist-packages/npuprof-$upstream.dist-info/METADATA"
check "the configuration in /etc/npuprof is the operator's (conffiles)" \
        sh -c "dpkg-deb -I '$(deb npuprofd "$arch")' conffiles | grep -qx /etc/npuprof/profiler_config.json"
check "libnpuprof0 declares its symbols and shlibs" \
        sh -c "dpkg-deb -I '$(deb libnpuprof0 "$arch")' symbols | grep -q 'npf_rank_open@NPUPROF_0' &&
               dpkg-deb -I '$(deb libnpuprof0 "$arch")' shlibs | grep -q '^libnpuprof 0 libnpuprof0'"

# --- the npuprofd package's programs, unpacked ------------------------------------------------
x=$tmp/unpacked
for p in npuprofd:$arch libnpuprof0:$arch libnpuprof-dev:$arch python3-npuprof:all; do
        dpkg-deb -x "$(deb "${p%:*}" "${p#*:}")" "$x"
done
for prog in usr/sbin/npuprofd usr/sbin/npuprof-shmopen usr/bin/npuprofctl usr/bin/npuprof-replay; do
        v=$("$x/$prog" --version 2>&1 | head -n 1)
        check "${prog##*/} --version: $v" sh -c "echo '$v' | grep -q '^${prog##*/} $upstream'"
        check "${prog##*/} --help names its manual page" sh -c "'$x/$prog' --help 2>&1 | grep -q '${prog##*/}([158])'"
done
check "npuprofd runs the installed analyzer, /usr/bin/npuprof-replay" \
        sh -c "'$x/usr/sbin/npuprofd' --help | grep -q 'else /usr/bin/npuprof-replay'"
mkdir "$tmp/etc" "$tmp/out"
cp "$x/etc/npuprof/profiler_config.json" "$tmp/etc/"
"$x/usr/sbin/npuprofd" --config "$tmp/etc/profiler_config.json" --shm-name "$shm" --socket "$tmp/sock" \
        --output-root "$tmp/out" --log stderr 2>"$tmp/daemon.log" &
daemon=$!
all_pids+=("$daemon")
ctl() { "$x/usr/bin/npuprofctl" --socket "$tmp/sock" --shm-name "$shm" "$@"; }
valid() { npf_json_holds 'import json, sys; o = json.loads(sys.argv[2])' \
        'o["config"]["generation"] >= 1 and o["config"]["state"] == "valid"' ctl status --json; }
diag() { tail -n 5 "$tmp/daemon.log"; }
eventually "the packaged npuprofd publishes the packaged default configuration (npuprofctl status)" valid
kill -TERM "$daemon"
wait "$daemon"
check "it stops cleanly on SIGTERM" test $? -eq 0
unset -f diag

# --- libnpuprof-dev and libnpuprof0; python3-npuprof ------------------------------------------
cat >"$tmp/user.c" <<'C'
#include <npuprof/rank.h>
#include <stdio.h>

int main(void)
{
        npf_rank_options_t o = { .rank = 7, .local_device = -1, .shm_name = "npftest-deb-none" };
        char err[NPF_SHM_ERR_MAX];
        npf_rank_t *h;

        if (npf_rank_open(&o, &h, err) < 0)
                return 1;
        npf_rank_step(h, 1);
        npf_rank_info_t i;
        npf_rank_info(h, &i);
        printf("rank %lld\n", (long long) i.rank);
        npf_rank_close(h);
        return 0;
}
C
system_pc=$(pkg-config --variable pc_path pkg-config)
pc() { PKG_CONFIG_SYSROOT_DIR=$x PKG_CONFIG_LIBDIR=$x/usr/lib/$multiarch/pkgconfig:$system_pc pkg-config "$@"; }
# shellcheck disable=SC2046
if cc -o "$tmp/user" "$tmp/user.c" $(pc --cflags --libs libnpuprof) 2>"$tmp/cc.out"; then
        ok "a C program builds against libnpuprof-dev with pkg-config --cflags --libs libnpuprof"
else fail "a C program does not build against libnpuprof-dev" "$(cat "$tmp/cc.out")"; fi
check "it runs with libnpuprof0's libnpuprof.so.0" test "$(LD_LIBRARY_PATH=$x/usr/lib/$multiarch "$tmp/user" 2>&1)" = "rank 7"
py=$(cd "$tmp" && PYTHONPATH=$x/usr/lib/python3/dist-packages NPUPROF_LIB=$x/usr/lib/$multiarch/libnpuprof.so.0 \
        /usr/bin/python3 -c 'import npuprof
with npuprof.Monitor(rank=8, shm_name="npftest-deb-none") as m:
    m.step(1)
    print(npuprof.__file__, m.info().rank)' 2>&1)
check "python3-npuprof's package steps a Monitor on libnpuprof0's library ($py)" \
        test "$py" = "$x/usr/lib/python3/dist-packages/npuprof/__init__.py 8"

# --- installed into a scratch root ------------------------------------------------------------
installed() {   # install, run the unit, purge
        root=$tmp/root
        mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
        : >"$root/var/lib/dpkg/status"
        # The root holds no libc, so dependencies are not asked; the maintainer scripts run here with
        # DPKG_ROOT set, as dpkg runs them for a root it cannot chroot into.
        dpkgr() { dpkg --root="$root" --force-script-chrootless --force-depends --log=/dev/null "$@" >"$tmp/dpkg.out" 2>&1; }
        if dpkgr -i "$(deb npuprofd "$arch")" "$(deb libnpuprof0 "$arch")"; then
                ok "dpkg installs npuprofd and libnpuprof0 into a scratch root"
        else fail "dpkg cannot install npuprofd into a scratch root" "$(tail -n 20 "$tmp/dpkg.out")"; fi
        uid=$(awk -F: '$1 == "npuprof" { print $3 }' "$root/etc/passwd" 2>/dev/null)
        check "installing npuprofd created the system user npuprof (uid ${uid:-none}), home /var/lib/npuprof" \
                sh -c "grep -q '^npuprof:x:$uid:[0-9]*:.*:/var/lib/npuprof:/usr/sbin/nologin$' '$root/etc/passwd' &&
                       grep -q '^npuprof:x:' '$root/etc/group' && [ '$uid' -lt 1000 ]"
        check "... and the output root /var/lib/npuprof/output, 1777, the user's" \
                test "$(stat -c '%a %u' "$root/var/lib/npuprof/output" 2>/dev/null)" = "1777 $uid"
        enabled=$(find "$root/etc/systemd" -name 'npuprofd*' 2>/dev/null)
        check "... and enabled nothing: no unit linked into a .wants directory${enabled:+ ($enabled)}" test -z "$enabled"

        # The installed unit, with its binaries, under a real systemd (needs root: skipped without).
        NPUPROF_ROOT=$root NPUPROFD=$root/usr/sbin/npuprofd NPUPROFCTL=$root/usr/bin/npuprofctl \
                "$here/tests/systemd/test-units.sh" >"$tmp/units.out" 2>&1
        status=$?
        line=$(tail -n 1 "$tmp/units.out")
        if [ "$status" -eq 77 ]; then
                skip "the installed unit under a real systemd: $(grep '^skip' "$tmp/units.out")"
        else
                check "the installed npuprofd.service reaches active under a real systemd, and the rest of test-units ($line)" \
                        sh -c "[ $status -eq 0 ] && grep -q '^ok   npuprofd.service reaches active (running)' '$tmp/units.out'"
                [ "$status" -eq 0 ] || grep -v '^ok' "$tmp/units.out" | sed 's/^/     | /'
        fi

        if dpkgr --purge npuprofd libnpuprof0; then ok "dpkg --purge npuprofd libnpuprof0"
        else fail "dpkg --purge fails" "$(tail -n 20 "$tmp/dpkg.out")"; fi
        left=$(cd "$root" && find . ! -type d ! -path './var/lib/dpkg/*' ! -path './etc/passwd*' ! -path './etc/group*' \
                ! -path './etc/shadow*' ! -path './etc/gshadow*' ! -name .pwd.lock)
        check "purge leaves nothing of the packages (the user stays, as Debian keeps system users)" test -z "$left"
        [ -n "$left" ] && echo "     | left: $left"
}
if [ "$(id -u)" = 0 ]; then
        installed
else
        skip "installed into a scratch root, and its unit under systemd: dpkg --root and systemd need root"
fi

# --- the README's install block on a fresh Debian node -------------------------------------------
mark='<!-- run by tests/test-deb.sh on a fresh Debian with systemd -->'
node=npftest-deb-$$-node
suite=${SUITE:-bookworm}
deb_cleanup() {
        command -v podman >/dev/null || return 0
        podman rm -f -t 0 "$node" >/dev/null 2>&1
        podman rmi -f "localhost/$node-probe" >/dev/null 2>&1
        return 0
}
trap 'deb_cleanup; npf_cleanup' EXIT

# The Debian base of a node: apt, sudo, systemd and the packages' dependencies (the first of
# each alternative), with apt's defaults (mmdebstrap's own apt options removed). Sets base,
# the image, or fails saying why; made again after a week.
node_base() {
        local cache=$here/build/kubernetes deps key tarball p hooks=()
        deps=$(for p in npuprofd libnpuprof0 libnpuprof-dev; do dpkg-deb -f "$(deb "$p" "$arch")" Depends; echo ,; done
               dpkg-deb -f "$(deb python3-npuprof all)" Depends)
        deps=$(tr ',' '\n' <<<"$deps" | sed 's/|.*//; s/(.*)//; s/:any//; s/[[:space:]]//g' |
               grep -vxE 'npuprofd|libnpuprof0|libnpuprof-dev|python3-npuprof|' | sort -u | tr '\n' ',')
        deps="${deps}sudo,systemd-sysv"
        key=$(printf '%s\n' "$suite" "${MIRROR:-}" "$arch" "$deps" "$(mmdebstrap --version)" apt apt-defaults | sha256sum | cut -c1-16)
        tarball=$cache/node-$suite-$key.tar
        mkdir -p "$cache"
        # As npf_mirror_reachable counts a base cached: made in the last week.
        if [ -z "$(find "$tarball" -mtime -7 2>/dev/null)" ]; then
                [ -d /usr/share/mmdebstrap/hooks/merged-usr ] && hooks=(--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr)
                if ! mmdebstrap --variant=apt "${hooks[@]}" --architectures="$arch" \
                        --aptopt='APT::Install-Recommends "false"' --dpkgopt='path-exclude=/usr/share/man/*' \
                        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
                        --customize-hook='rm -f "$1"/etc/apt/apt.conf.d/99mmdebstrap' \
                        --include="$deps" "$suite" "$tmp/node.tar" ${MIRROR:+"$MIRROR"} >"$tmp/mmdebstrap.out" 2>&1; then
                        fail "mmdebstrap makes a node's base ($suite: $deps)" "$(tail -n 10 "$tmp/mmdebstrap.out")"
                        return 1
                fi
                rm -f "$cache"/node-"$suite"-*.tar
                mv "$tmp/node.tar" "$tarball"
        fi
        base=localhost/npuprof-node:$key-$(stat -c %Y "$tarball")
        podman image exists "$base" && return 0
        if ! podman import --quiet "$tarball" "$base" >/dev/null 2>"$tmp/import.err"; then
                fail "podman imports the node's base $tarball" "$(tail -n 5 "$tmp/import.err")"
                return 1
        fi
        # Earlier bases: gone, unless a container still stands on one.
        podman images --format '{{.Repository}}:{{.Tag}}' localhost/npuprof-node | grep -vxF "$base" |
                while read -r old; do podman rmi "$old" >/dev/null 2>&1 || true; done
}

# podman exec on the node, as root; up_on_node: systemd there is up (not polled faster than
# podman exec can answer).
on_node() { podman --log-level=error exec "$node" "$@"; }
up_on_node() { sleep 0.5; on_node systemctl is-system-running 2>/dev/null | grep -qxE 'running|degraded'; }

fresh_node() {
        local t=$SECONDS state
        awk -v mark="$mark" '$0 == mark { m = 1; next } m && /^```sh/ { b = 1; next } b && /^```/ { exit } b' \
                "$here/README.md" >"$tmp/install.sh"
        if [ ! -s "$tmp/install.sh" ]; then
                fail "the README has a block marked $mark"
                return
        fi
        node_base || return
        # Privileged: systemd sets up the namespaces of the units' sandboxing inside it. Where
        # this machine cannot boot systemd in a container, nothing of ours has run yet: a skip.
        podman rm -f -t 0 "$node" >/dev/null 2>&1
        if ! podman run -d --name "$node" --privileged --systemd=always --network none "${npf_rt[@]}" \
                -v "$debs:/srv/node/build/deb:ro" "$base" /lib/systemd/systemd >/dev/null 2>"$tmp/node.err"; then
                skip "the README's install block on a fresh Debian node: podman cannot start systemd in a container here: $(grep -v level=warning "$tmp/node.err" | tail -n 1)"
                return
        fi
        wait_ms=60000
        if ! wait_for up_on_node; then
                skip "the README's install block on a fresh Debian node: systemd in the container did not come up within 60 s ($(on_node systemctl is-system-running 2>&1 | tail -n 1))"
                return
        fi
        # The block as an operator reads it: a user with sudo, beside the packages' folder.
        on_node sh -c 'useradd -m ops && echo "ops ALL=(ALL) NOPASSWD: ALL" >/etc/sudoers.d/ops'
        podman cp "$tmp/install.sh" "$node:/srv/node/install.sh"
        if podman --log-level=error exec --user ops -w /srv/node "$node" bash -e install.sh >"$tmp/install.out" 2>&1; then
                ok "the README's install block runs as it reads on it, as a user with sudo ($((SECONDS - t)) s, the base included)"
        else
                fail "the README's install block fails on a fresh Debian node" "$(tail -n 20 "$tmp/install.out")"
                return
        fi
        check "... and npuprofctl status there answers from the socket-activated daemon, its configuration valid" \
                sh -c "grep -q '^npuprofd: running, .*socket-activated' '$tmp/install.out' && grep -q '^config: .*, valid\$' '$tmp/install.out'"
        state=$(on_node systemctl is-enabled npuprofd.socket npuprof-shmopen.socket npuprofd.service | tr '\n' ' ')
        state=$state$(on_node systemctl is-active npuprofd.socket npuprof-shmopen.socket npuprofd.service | tr '\n' ' ')
        check "npuprofd.socket, npuprof-shmopen.socket and npuprofd.service are enabled and active ($state)" \
                test "$state" = "enabled enabled enabled active active active "
        check "the daemon runs as the npuprof user the package made" \
                sh -c "podman --log-level=error exec '$node' sh -c 'stat -c %U /proc/\$(systemctl show -P MainPID npuprofd.service)' | grep -qx npuprof"
        # A rank of the installed Python package, on the packaged daemon's segment.
        podman --log-level=error exec -d "$node" python3 -c 'import time, npuprof
with npuprof.Monitor(rank=3) as mon:
    for step in range(1, 100000):
        mon.step(step)
        time.sleep(0.02)' >/dev/null 2>&1
        wait_ms=20000
        eventually "a rank of python3-npuprof on the node is listed by npuprofctl ranks" \
                sh -c "sleep 0.2; podman --log-level=error exec '$node' npuprofctl ranks 2>/dev/null | grep -q '^ *3 '"
        podman rm -f -t 0 "$node" >/dev/null 2>&1
}
if [ "$(id -u)" = 0 ]; then
        . "$here/tests/lib-podman.sh"
        if npf_podman_usable "$node" && npf_mirror_reachable "$here/build/kubernetes" "node-$suite-*.tar"; then
                fresh_node
        else
                skip "the README's install block on a fresh Debian node: $why_not"
        fi
else
        skip "the README's install block on a fresh Debian node: podman's containers and systemd need root"
fi

echo "#   test-deb took $((SECONDS - t0)) s"
echo "deb: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
