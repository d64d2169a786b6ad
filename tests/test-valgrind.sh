#!/usr/bin/env bash
# The daemon and npuprofctl under valgrind memcheck through one integration scenario:
# edits valid and broken, every command, ranks whose windows end done, failed and lost, the
# analysis of a window, a reload and a clean stop. Every run must end with no memcheck
# error and no definite leak. The plain build only: a sanitizer's runtime and valgrind
# exclude each other.
#   tests/test-valgrind.sh BUILD_DIR
set -u
build=${1:?usage: tests/test-valgrind.sh BUILD_DIR}
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl trainloop=$build/train-loop
driver=$build/tests/rank-driver
for b in "$npuprofd" "$npuprofctl" "$trainloop" "$driver" "$build/npuprof-replay"; do
        [ -x "$b" ] || { echo "test-valgrind: $b is not built" >&2; exit 2; }
done
command -v valgrind >/dev/null || { echo "test-valgrind: valgrind is not installed (scripts/install-deps)"; exit 1; }
if grep -qaE '__asan_init|__tsan_init|__ubsan_handle' "$npuprofd"; then
        echo "test-valgrind: $npuprofd is built with a sanitizer; memcheck runs on the plain build"
        exit 77
fi
analyzer=$(cd "$build" && pwd)/npuprof-replay

. "$(dirname "$0")/lib.sh"
npf_harness v
wait_ms=30000           # everything runs 20 to 50 times slower under memcheck

vg_opts=(--tool=memcheck --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite
         --error-exitcode=99 --track-origins=yes --num-callers=30)
conf=$tmp/profiler_config.json shm=npftest-v-$$ sock=$tmp/npuprofd.sock root=$tmp/out
mkdir -p "$root" "$tmp/vg" "$tmp/fleet"
printf '{ "start_step": 3, "steps": 2, "output_dir": "%s" }\n' "$root" >"$conf"

# vg NAME CMD...: CMD under memcheck, its report in $tmp/vg/NAME.log; its exit status.
vg() {
        local name=$1; shift
        valgrind "${vg_opts[@]}" --log-file="$tmp/vg/$name.log" "$@"
}
# ctl NAME ARGS...: npuprofctl under memcheck.
ctl() { local name=$1; shift; vg "ctl-$name" "$npuprofctl" --socket "$sock" --shm-name "$shm" "$@"; }
plain_ctl() { timeout 20 "$npuprofctl" --socket "$sock" --shm-name "$shm" "$@"; }

py_windows='
import json, sys
W = json.loads(sys.argv[2]).get("windows") or []
def O(r):
    return [w["outcome"] for w in W if w["rank"] == r]
def A(r):
    return next(((w.get("analysis") or {}).get("state") for w in W if w["rank"] == r), None)
'
jw() { npf_json_holds "$py_windows" "$1" plain_ctl windows --json; }
step_json() { npf_json_holds 'import json, sys; o = json.loads(sys.argv[2])' "$1" plain_ctl status --json; }

# The daemon, analysing with the real analyzer (not under memcheck: it is not the daemon),
# keeping a fleet record.
valgrind "${vg_opts[@]}" --log-file="$tmp/vg/daemon.log" "$npuprofd" --config "$conf" --shm-name "$shm" --socket "$sock" --log stderr --output-root "$root" \
        --poll-interval 200 --analyzer "$analyzer" --fleet-dir "$tmp/fleet" --node-name vg --fleet-interval 0.2 \
        2>"$tmp/daemon.err" &
dpid=$!
all_pids+=("$dpid")
if wait_for plain_ctl status >/dev/null 2>&1; then ok "the daemon starts under memcheck"
else fail "the daemon starts under memcheck" "$(tail -n 20 "$tmp/daemon.err" "$tmp/vg/daemon.log")"; fi

# Every command, valid and refused, each under memcheck.
i=0
for args in "status" "status --json" "ranks" "ranks --json" "windows" "windows --json" "config" "metrics" \
            "validate $conf" "validate --json $conf" "fleet" "fleet --json" "fleet --fleet-dir $tmp/fleet --wait --timeout 0.3" \
            "top -n 2 --interval 0.1" "nonsense" "start --at x" "--help"; do
        i=$((i + 1))
        # shellcheck disable=SC2086 # the words are the command's
        ctl "cmd$i" $args >/dev/null 2>&1
        [ $? -eq 99 ] && fail "npuprofctl $args: memcheck found errors" "$(grep -A8 'ERROR SUMMARY\|Invalid\|uninitialised\|definitely' "$tmp/vg/ctl-cmd$i.log" | head -30)"
done
ok "npuprofctl ran $i commands under memcheck"

# A broken edit, then npuprofctl's own edits (start, stop), and a reload.
printf '{ "start_step": 3,\n  "steps": "two" }\n' >"$conf.tmp~" && mv -f "$conf.tmp~" "$conf"
wait_for step_json 'o["config"]["state"] == "invalid"' && ok "a broken file is refused" || fail "a broken file is refused"
ctl validate-broken validate "$conf" >/dev/null 2>&1
ctl start start --at 3 --steps 2 --config "$conf" >/dev/null 2>&1
ctl reload reload >/dev/null 2>&1
wait_for step_json 'o["config"]["state"] == "valid"' && ok "npuprofctl start repairs the file" || fail "npuprofctl start repairs the file"

# Windows: done (rank 1, analysed), failed (rank 2, by hand), lost (rank 3, killed).
"$trainloop" --rank 1 --steps 8 --step-ms 10 --shm-name "$shm" --backend host >"$tmp/tl1.out" 2>&1
"$driver" --shm "$shm" --rank 2 --step 4 --state failed --window 3-4 --message "by hand" >/dev/null 2>&1
"$driver" --shm "$shm" --rank 3 --step 3 --state collecting --window 3-4 --hold >"$tmp/r3.out" 2>&1 &
drv=$!
all_pids+=("$drv")
wait_for grep -q '^claimed slot' "$tmp/r3.out"
kill -KILL "$drv"; wait "$drv" 2>/dev/null
if wait_for jw '"done" in O(1) and A(1) in ("done", "failed") and "failed" in O(2) and "lost" in O(3)'; then
        ok "windows ended done (analysed), failed and lost"
else
        fail "windows ended done (analysed), failed and lost" "$(plain_ctl windows --json 2>&1 | head -c 2000)"
fi
ctl windows-after windows >/dev/null 2>&1
ctl status-after status >/dev/null 2>&1
kill -HUP "$dpid"
ctl stop stop --config "$conf" >/dev/null 2>&1
wait_for step_json 'o["config"]["window"]["enabled"] is False' && ok "npuprofctl stop turns it off" \
        || fail "npuprofctl stop turns it off"

# The clean stop: memcheck's verdict on the daemon is its exit status.
kill -TERM "$dpid"
wait "$dpid"
status=$?
if [ "$status" -eq 0 ]; then ok "the daemon stops cleanly under memcheck"
else fail "the daemon stops cleanly under memcheck (exit $status)" "$(grep -B2 -A20 'Invalid\|uninitialised\|definitely lost in' "$tmp/vg/daemon.log" | head -60)"; fi

# Every report: no error, no definite leak.
for log in "$tmp"/vg/*.log; do
        name=$(basename "$log" .log)
        errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) errors.*/\1/p' "$log" | tail -n 1)
        definite=$(sed -n 's/.*definitely lost: \([0-9,]*\) bytes.*/\1/p' "$log" | tail -n 1 | tr -d ,)
        if [ "${errors:-x}" = 0 ] && [ "${definite:-0}" = 0 ]; then
                ok "$name: 0 errors, no definite leak"
        else
                fail "$name: ${errors:-no} errors, ${definite:-0} bytes definitely lost" "$(grep -A15 'Invalid\|uninitialised\|definitely lost in\|ERROR SUMMARY' "$log" | head -40)"
        fi
done

echo "valgrind: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
