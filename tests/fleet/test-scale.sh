#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Scale: 256 live ranks of libnpuprof on one node (tests/many-ranks: 4 processes, each rank
# stepped every millisecond for STEPS steps), one window configured for all ranks,
# the real npuprofd sweeping, and a client (tests/status-load) asking `status` 1,000 times a
# second throughout (NPF_SCALE_RATE a second, to find the rate this machine sustains).
#   tests/fleet/test-scale.sh BUILD_DIR
# Asserted: every rank did its window at exactly the configured steps (what libnpuprof says,
# the output on disk, and `npuprofctl windows --json`), none missed, and every status was
# answered. The status latency and the rate reached are printed, never asserted.
set -u
build=${1:?usage: tests/fleet/test-scale.sh BUILD_DIR}
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl many=$build/tests/many-ranks load=$build/tests/status-load
for b in "$npuprofd" "$npuprofctl" "$many" "$load"; do
        [ -x "$b" ] || { echo "test-scale: $b is not built" >&2; exit 2; }
done
RANKS=256 STEPS=${NPF_SCALE_STEPS:-10000} RATE=${NPF_SCALE_RATE:-1000} START=3000 WINDOW=5
# Threads per process that step the ranks. On a real node every rank has cores of its own;
# here the simulation shares two with the daemon, so it steps its 64 ranks a process from
# one thread (64 steps a tick, about 6 us): 16 threads would wake 16,000 times a second and
# take from the daemon the time they spend being scheduled (NPF_SCALE_THREADS=4 to see it).
THREADS=${NPF_SCALE_THREADS:-1}
STOP=$((START + WINDOW - 1))

. "$(dirname "$0")/../lib.sh"
npf_harness scale
shm=npftest-scale-$$-d sock=$tmp/npuprofd.sock conf=$tmp/profiler_config.json
ctl() { timeout 20 "$npuprofctl" --socket "$sock" --shm-name "$shm" "$@"; }
printf '{"start_step": %d, "steps": %d, "output_dir": "out"}\n' "$START" "$WINDOW" >"$conf"

"$npuprofd" --config "$conf" --shm-name "$shm" --socket "$sock" --output-root "$tmp" --analyze-jobs 0 \
        --log stderr 2>"$tmp/npuprofd.log" &
dpid=$!
all_pids+=("$dpid")
if ! wait_for npf_json_holds 'import json, sys; o = json.loads(sys.argv[2])' 'o["config"]["generation"] == 1' \
        ctl status --json; then
        fail "the daemon publishes the window" "$(tail -5 "$tmp/npuprofd.log")"
        echo "scale: $passed passed, $failed failed"
        exit 1
fi

# The status client (tests/fleet/status-load.c): one connection and an open loop, as a
# monitoring agent asks, every answer checked in full. It is C so that what is measured is
# the daemon, not the client's own interpreter: a latency runs from the moment a request was
# sent to its answer, and how late the client's timer sent it is printed apart.
"$load" "$sock" "$tmp/ranks.done" "$RATE" >"$tmp/status.out" 2>"$tmp/status.err" &
spid=$!
all_pids+=("$spid")

# The daemon's CPU time (utime + stime, in clock ticks), to say what each status cost it.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$dpid/stat"; }
cpu0=$(cpu_ticks)
t0=$(now_ms)
"$many" --shm "$shm" --ranks "$RANKS" --procs 4 --threads "$THREADS" --steps "$STEPS" --step-ms 1 >"$tmp/ranks.out" 2>"$tmp/ranks.err"
rc=$?
t1=$(now_ms)
cpu1=$(cpu_ticks)
touch "$tmp/ranks.done"
wait "$spid"
load_rc=$?
echo "#   $RANKS ranks x $STEPS steps took $((t1 - t0)) ms (the steps' own pace: $STEPS ms)"

if [ "$rc" -eq 0 ] && [ "$(wc -l <"$tmp/ranks.out")" -eq "$RANKS" ]; then
        ok "$RANKS ranks opened, stepped $STEPS times and closed"
else
        fail "$RANKS ranks opened, stepped $STEPS times and closed" "exit $rc; $(head -5 "$tmp/ranks.err")"
fi
# State 4 is NPF_WINDOW_DONE.
n_done=$(grep -c "^rank [0-9]* state 4 window $START $STOP output " "$tmp/ranks.out")
if [ "$n_done" -eq "$RANKS" ]; then
        ok "libnpuprof: all $RANKS windows done at steps $START..$STOP"
else
        fail "libnpuprof: all $RANKS windows done at steps $START..$STOP ($n_done)" "$(grep -v " state 4 " "$tmp/ranks.out" | head -5)"
fi
n_out=$(for r in $(seq 0 $((RANKS - 1))); do
        [ -s "$tmp/out/rank${r}_start${START}_stop${STOP}/manifest.json" ] && echo "$r"; done | wc -l)
if [ "$n_out" -eq "$RANKS" ]; then
        ok "the output: $RANKS window directories rank<R>_start${START}_stop${STOP} with their manifest"
else
        fail "the output: $RANKS window directories with their manifest ($n_out)" "$(ls "$tmp/out" | head -5)"
fi
windows_ok='import json, sys
o = json.loads(sys.argv[2])
w = o["windows"]
done = [x for x in w if x["outcome"] == "done" and x["start_step"] == '"$START"' and x["stop_step"] == '"$STOP"']
'
if wait_for npf_json_holds "$windows_ok" \
        'sorted(x["rank"] for x in done) == list(range('"$RANKS"')) and o["outcomes"]["done"] == '"$RANKS"' and sum(o["outcomes"].values()) == '"$RANKS" \
        ctl windows --json; then
        ok "npuprofctl windows: $RANKS windows done at $START..$STOP, one per rank, none missed, failed or lost"
else
        fail "npuprofctl windows: $RANKS windows done at $START..$STOP, none missed" \
                "$(ctl windows --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["outcomes"])')"
fi

read -r _ sent _ answered _ bad _ secs _ rate _ p50 _ p99 _ max _ late50 _ late99 <"$tmp/status.out" || true
echo "#   status under load: ${answered:-?} answered of ${sent:-?} in ${secs:-?} s (${rate:-?}/s), p50 ${p50:-?} ms, p99 ${p99:-?} ms, max ${max:-?} ms"
echo "#   (the client's timer sent them late by p50 ${late50:-?} ms, p99 ${late99:-?} ms)"
echo "#   p99 of each second, in ms: $(sed -n 2p "$tmp/status.out")"
shared=$(ctl status --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["daemon"]["clients"]["shared_answers"])')
echo "#   answers shared by requests that waited (daemon.clients.shared_answers): ${shared:-?}"
awk -v t="$((cpu1 - cpu0))" -v hz="$(getconf CLK_TCK)" -v n="${answered:-0}" -v ms="$((t1 - t0))" 'BEGIN {
        printf "#   the daemon used %.2f s of CPU in %.1f s (%.0f%% of a core), %.2f ms per status answered with its sweeps\n",
               t / hz, ms / 1000, 100 * t / hz / (ms / 1000), n ? 1000 * t / hz / n : 0 }'
if [ "$load_rc" -eq 0 ] && [ -n "${sent:-}" ] && [ "$sent" -gt 0 ] && [ "$sent" = "$answered" ] && [ "$bad" = 0 ]; then
        ok "every status was answered, each with the rank table ($sent)"
else
        fail "every status was answered" "$(cat "$tmp/status.out" "$tmp/status.err"; tail -5 "$tmp/npuprofd.log")"
fi
if kill -0 "$dpid" 2>/dev/null && ctl status >/dev/null; then
        ok "the daemon is alive"
else
        fail "the daemon is alive" "$(tail -5 "$tmp/npuprofd.log")"
fi

echo "scale: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
