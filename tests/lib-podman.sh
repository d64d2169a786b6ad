# SPDX-License-Identifier: MIT
# What the suites that run containers share (test-kubernetes, test-deb): whether podman can
# run them here, with which options, and whether a Debian base can be made. Sourced after
# tests/lib.sh (it uses $tmp), never run.

# npf_podman_usable PREFIX: whether root may build and run containers here: sets npf_rt, the
# options podman needs on this machine (runc where crun refuses cgroups v1 beside v2
# controllers; limits no higher than this process's, where raising them is not allowed), or
# why_not. Its probe image, localhost/PREFIX-probe, is removed before it returns.
npf_podman_usable() {
        local probe=localhost/$1-probe t h candidates opts ok=1
        why_not='' npf_rt=()
        [ "$(id -u)" -eq 0 ] || { why_not="needs root (podman's storage, files of several users)"; return 1; }
        for t in podman mmdebstrap dpkg-buildpackage; do
                command -v "$t" >/dev/null || { why_not="$t is not installed (Debian's podman, mmdebstrap, dpkg-dev)"; return 1; }
        done
        # A one-file image to try the runtime with: ldconfig, which is statically linked.
        mkdir -p "$tmp/probe"
        cp "$(command -v ldconfig || echo /sbin/ldconfig)" "$tmp/probe/ldconfig"
        if ! tar -C "$tmp/probe" -cf - ldconfig | podman import --quiet - "$probe" >/dev/null 2>"$tmp/probe.err"; then
                why_not="podman cannot import an image: $(tail -n 1 "$tmp/probe.err")"
                return 1
        fi
        h=$(ulimit -Hn)
        [ "$h" = unlimited ] || [ "$h" -gt 1048576 ] && h=1048576
        candidates=("" "--ulimit nofile=$h:$h --ulimit nproc=4096:4096" "--runtime runc --cgroup-manager cgroupfs"
                "--runtime runc --cgroup-manager cgroupfs --ulimit nofile=$h:$h --ulimit nproc=4096:4096")
        for opts in "${candidates[@]}"; do
                read -r -a npf_rt <<<"$opts"
                if podman run --rm --network none --read-only --cap-drop ALL --security-opt no-new-privileges \
                        "${npf_rt[@]}" "$probe" /ldconfig --version >/dev/null 2>"$tmp/probe.err"; then
                        ok=0
                        break
                fi
        done
        podman rmi -f "$probe" >/dev/null 2>&1
        [ "$ok" -eq 0 ] && return 0
        npf_rt=()
        why_not="podman cannot run a container here, whatever the runtime and limits: $(grep -v 'level=warning' "$tmp/probe.err" | tail -n 1)"
        return 1
}

# npf_mirror_reachable DIR GLOB: whether a Debian base can be had: one made in the last week
# is cached in DIR under GLOB, or the mirror ($MIRROR, else deb.debian.org) answers; else
# why_not.
npf_mirror_reachable() {
        local url=${MIRROR:-http://deb.debian.org/debian}
        [ -n "$(find "$1" -maxdepth 1 -name "$2" -mtime -7 2>/dev/null)" ] && return 0
        python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=15)' \
                "$url/dists/${SUITE:-bookworm}/Release" >/dev/null 2>"$tmp/mirror.err" && return 0
        why_not="the Debian mirror $url cannot be reached to make a Debian base: $(tail -n 1 "$tmp/mirror.err")"
        return 1
}
