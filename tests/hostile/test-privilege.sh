#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Privilege: the control socket's authorization with a real unprivileged user (nobody, through
# setpriv), a socket restricted to a group, a rank of nobody against the control block, and
# the systemd unit's hardening held to its committed exposure.
#   tests/hostile/test-privilege.sh BUILD_DIR
# Needs root (to become nobody and make a group). Ends with "privilege: N passed, N failed".
set -u
build=${1:?usage: tests/hostile/test-privilege.sh BUILD_DIR}
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl driver=$build/tests/rank-driver
for b in "$npuprofd" "$npuprofctl" "$driver"; do
        [ -x "$b" ] || { echo "test-privilege: $b is not built" >&2; exit 2; }
done
if [ "$(id -u)" -ne 0 ] || ! id nobody >/dev/null 2>&1 || ! command -v setpriv >/dev/null ||
   ! command -v groupadd >/dev/null; then
        echo "test-privilege: needs root, the user nobody, setpriv and groupadd"
        exit 77
fi

. "$(dirname "$0")/../lib.sh"
npf_harness privilege
unit=$(dirname "$0")/../../systemd/npuprofd.service
# The unit's overall exposure as committed (systemd-analyze security --offline=true): a change
# that weakens the sandbox raises it past this and fails here.
EXPOSURE_MAX=0.6

nobody_uid=$(id -u nobody) nobody_gid=$(id -g nobody)
group=npftest-priv-$$
groupadd "$group" || { echo "test-privilege: cannot create the group $group"; exit 1; }
trap 'groupdel "$group" 2>/dev/null; npf_cleanup' EXIT
gid=$(getent group "$group" | cut -d: -f3)
chmod 0711 "$tmp"
printf '{"start_step": 100000, "steps": 2}\n' >"$tmp/profiler_config.json"

# as_nobody [--groups GID] CMD...: CMD as nobody, in its own group and no other unless given.
as_nobody() {
        local groups=(--clear-groups)
        [ "$1" = --groups ] && { groups=(--groups "$2"); shift 2; }
        timeout 10 setpriv --reuid "$nobody_uid" --regid "$nobody_gid" "${groups[@]}" -- "$@"
}

# start NAME ARGS...: a daemon on socket $tmp/NAME.sock and segment npftest-privilege-$$-NAME.
start() {
        local name=$1; shift
        "$npuprofd" --config "$tmp/profiler_config.json" --shm-name "npftest-privilege-$$-$name" \
                --socket "$tmp/$name.sock" --output-root "$tmp" --log stderr "$@" 2>>"$tmp/$name.log" &
        all_pids+=($!)
        wait_for timeout 5 "$npuprofctl" --socket "$tmp/$name.sock" --shm-name "npftest-privilege-$$-$name" \
                status >/dev/null 2>&1
}

# --- the daemon's socket open to nobody's group: what nobody may ask -----------------------
if start open --socket-group "$(id -gn nobody)"; then
        ctl() { "$npuprofctl" --socket "$tmp/open.sock" --shm-name "npftest-privilege-$$-open" "$@"; }
        for cmd in status ranks windows config metrics; do
                out=$(as_nobody "$npuprofctl" --socket "$tmp/open.sock" --shm-name "npftest-privilege-$$-open" \
                        "$cmd" --json 2>&1)
                rc=$?
                if [ "$rc" -eq 0 ] && python3 -c 'import json,sys; json.loads(sys.argv[1])' "$out" 2>/dev/null; then
                        ok "nobody may ask for $cmd"
                else
                        fail "nobody may ask for $cmd" "exit $rc: $out"
                fi
        done
        out=$(as_nobody "$npuprofctl" --socket "$tmp/open.sock" --shm-name "npftest-privilege-$$-open" reload 2>&1)
        rc=$?
        if [ "$rc" -eq 1 ] && grep -q "reload is for root and the daemon's own user (uid 0); you are uid $nobody_uid" <<<"$out"
        then ok "nobody's reload is refused with an error naming its uid ($nobody_uid)"
        else fail "nobody's reload is refused with an error naming its uid ($nobody_uid)" "exit $rc: $out"
        fi
        if npf_json_holds 'import json, sys; o = json.loads(sys.argv[2])' 'o["reloads"] == 0' ctl status --json
        then ok "the refused reload did nothing"
        else fail "the refused reload did nothing" "$(ctl status --json 2>&1 | head -c 500)"
        fi
        out=$(ctl reload 2>&1)
        if grep -q '^reloaded: generation 1' <<<"$out" &&
           npf_json_holds 'import json, sys; o = json.loads(sys.argv[2])' 'o["reloads"] == 1' ctl status --json
        then ok "root's reload is served"
        else fail "root's reload is served" "$out"
        fi

        # A rank of nobody: it may claim its slot, and cannot write the control block.
        shm=npftest-privilege-$$-open
        if out=$(as_nobody /usr/bin/python3 -c 'import os, sys
try:
    os.open(sys.argv[1], os.O_RDWR)
except PermissionError as e:
    print("refused:", e); sys.exit(0)
print("opened for writing"); sys.exit(1)' "/dev/shm/$shm.ctl" 2>&1)
        then ok "a rank run as nobody cannot open the control block for writing ($(stat -c '%a %U' "/dev/shm/$shm.ctl"))"
        else fail "a rank run as nobody cannot open the control block for writing" "$out"
        fi
        before=$(md5sum <"/dev/shm/$shm.ctl")
        as_nobody sh -c 'printf garbage >>"$1"' sh "/dev/shm/$shm.ctl" 2>/dev/null
        as_nobody sh -c 'printf garbage 1<>"$1"' sh "/dev/shm/$shm.ctl" 2>/dev/null
        if [ "$(md5sum <"/dev/shm/$shm.ctl")" = "$before" ]; then
                ok "nobody's writes to the control block change nothing"
        else
                fail "nobody's writes to the control block change nothing"
        fi
        setpriv --reuid "$nobody_uid" --regid "$nobody_gid" --clear-groups \
                "$driver" --shm "$shm" --rank 5 --step 7 --state armed --hold </dev/null >"$tmp/r5.out" 2>&1 &
        drv=$!
        all_pids+=("$drv")
        if wait_for npf_json_holds 'import json, sys; o = json.loads(sys.argv[2])' \
                "any(r['rank'] == 5 and r['pid'] == $drv and r['step'] == 7 for r in o['ranks'])" ctl ranks --json &&
           [ "$(stat -c %U "/proc/$drv")" = nobody ]
        then ok "a rank run as nobody still claims and writes its own slot"
        else fail "a rank run as nobody still claims and writes its own slot" "$(cat "$tmp/r5.out")"
        fi
        kill "$drv" 2>/dev/null
else
        fail "the daemon with the socket open to nobody's group starts" "$(tail -5 "$tmp/open.log")"
fi

# --- a socket restricted to a group: refused at connect outside it, admitted inside ---------
if start grp --socket-group "$group"; then
        if [ "$(stat -c '%a %G' "$tmp/grp.sock")" = "660 $group" ]; then
                ok "--socket-group: the socket is mode 0660, group $group"
        else
                fail "--socket-group: the socket is mode 0660, group $group" "$(stat -c '%a %G' "$tmp/grp.sock")"
        fi
        out=$(as_nobody "$npuprofctl" --socket "$tmp/grp.sock" --shm-name "npftest-privilege-$$-grp" status 2>&1)
        rc=$?
        if [ "$rc" -eq 3 ] && grep -qi 'permission denied' <<<"$out"; then
                ok "nobody outside $group is refused at connect (exit 3, permission denied)"
        else
                fail "nobody outside $group is refused at connect (exit 3, permission denied)" "exit $rc: $out"
        fi
        out=$(as_nobody --groups "$gid" "$npuprofctl" --socket "$tmp/grp.sock" --shm-name "npftest-privilege-$$-grp" \
                status 2>&1)
        rc=$?
        if [ "$rc" -eq 0 ] && grep -q '^npuprofd: running' <<<"$out"; then
                ok "nobody inside $group is admitted"
        else
                fail "nobody inside $group is admitted" "exit $rc: $out"
        fi
else
        fail "the daemon with --socket-group $group starts" "$(tail -5 "$tmp/grp.log")"
fi

# --- the unit's hardening ------------------------------------------------------------------
# exposure UNIT: "NUMBER RATING" from systemd-analyze security.
exposure() {
        systemd-analyze security --offline=true --no-pager "$1" 2>&1 |
                sed -n 's/.*Overall exposure level for [^:]*: *\([0-9.]*\) *\([A-Z]*\).*/\1 \2/p'
}
# hardened NUMBER RATING: at most the committed exposure, rated OK or better.
hardened() {
        awk -v e="$1" -v max="$EXPOSURE_MAX" 'BEGIN { exit !(e != "" && e + 0 <= max + 0) }' &&
                case $2 in PERFECT|SAFE|OK) true ;; *) false ;; esac
}
if command -v systemd-analyze >/dev/null; then
        read -r level rating <<<"$(exposure "$unit")"
        echo "#   npuprofd.service: exposure ${level:-?} ${rating:-?} (committed at most $EXPOSURE_MAX)"
        if hardened "$level" "$rating"; then
                ok "npuprofd.service keeps its hardening: exposure $level <= $EXPOSURE_MAX, rated $rating"
        else
                fail "npuprofd.service keeps its hardening: exposure ${level:-?} <= $EXPOSURE_MAX, rated OK or better" \
                        "rated ${rating:-nothing}"
        fi
        # The check can fail: the same unit without one hardening line is caught.
        grep -v '^PrivateNetwork=' "$unit" >"$tmp/npuprofd.service"
        read -r weak_level weak_rating <<<"$(exposure "$tmp/npuprofd.service")"
        if ! hardened "$weak_level" "$weak_rating"; then
                ok "the unit without PrivateNetwork= is caught (exposure $weak_level $weak_rating)"
        else
                fail "the unit without PrivateNetwork= is caught" "exposure $weak_level $weak_rating passed"
        fi
else
        fail "systemd-analyze is installed (systemd)"
fi

echo "privilege: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
