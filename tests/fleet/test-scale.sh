#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Scale: 256 live ranks of libnpuprof on one node (tests/many-ranks: 4 processes of 4 threads,
# each rank stepped every millisecond for STEPS steps), one window configured for all ranks,
# the real npuprofd sweeping, and a client asking `status` 1,000 times a second throughout.
#   tests/fleet/test-scale.sh BUILD_DIR
# Asserted: every rank did its window at exactly the configured steps (what libnpuprof says,
# the output on disk, and `npuprofctl windows --json`), none missed, and every status was
# answered. The status latency and the rate reached are printed, never asserted.
set -u
build=${1:?usage: tests/fleet/test-scale.sh BUILD_DIR}
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl many=$build/tests/many-ranks
for b in "$npuprofd" "$npuprofctl" "$many"; do
        [ -x "$b" ] || { echo "test-scale: $b is not built" >&2; exit 2; }
done
RANKS=256 STEPS=${NPF_SCALE_STEPS:-10000} START=3000 WINDOW=5
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

# The status client: one connection, a request every millisecond (absolute deadlines) while
# the ranks run; each reply checked; its latencies and counts go to $tmp/status.out.
python3 - "$sock" "$tmp/ranks.done" >"$tmp/status.out" 2>&1 <<'EOF' &
import json, os, socket, sys, time
sock, done = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sock)
f = s.makefile("rb")
lat, bad, sent = [], 0, 0
t0 = next_t = time.monotonic()
while not os.path.exists(done) and time.monotonic() - t0 < 120:
    a = time.monotonic()
    s.sendall(b'{"version": 1, "command": "status"}\n')
    sent += 1
    line = f.readline()
    lat.append(time.monotonic() - a)
    # Every answer is checked in full: ok, and the whole rank table in it.
    try:
        o = json.loads(line)
        good = o["ok"] is True and isinstance(o["result"]["ranks"], list)
    except (ValueError, KeyError, TypeError):
        good = False
    bad += not good
    next_t += 0.001
    pause = next_t - time.monotonic()
    if pause > 0:
        time.sleep(pause)
elapsed = time.monotonic() - t0
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000
print("sent %d answered %d bad %d seconds %.2f rate %.0f p50 %.2f p99 %.2f max %.2f"
      % (sent, len(lat), bad, elapsed, len(lat) / elapsed, q(0.5), q(0.99), lat[-1] * 1000))
EOF
spid=$!
all_pids+=("$spid")

# The daemon's CPU time (utime + stime, in clock ticks), to say what each status cost it.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$dpid/stat"; }
cpu0=$(cpu_ticks)
t0=$(now_ms)
"$many" --shm "$shm" --ranks "$RANKS" --procs 4 --threads 4 --steps "$STEPS" --step-ms 1 >"$tmp/ranks.out" 2>"$tmp/ranks.err"
rc=$?
t1=$(now_ms)
touch "$tmp/ranks.done"
wait "$spid"
cpu1=$(cpu_ticks)
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

read -r _ sent _ answered _ bad _ secs _ rate _ p50 _ p99 _ max <"$tmp/status.out" || true
echo "#   status under load: ${answered:-?} answered of ${sent:-?} in ${secs:-?} s (${rate:-?}/s), p50 ${p50:-?} ms, p99 ${p99:-?} ms, max ${max:-?} ms"
awk -v t="$((cpu1 - cpu0))" -v hz="$(getconf CLK_TCK)" -v n="${answered:-0}" -v ms="$((t1 - t0))" 'BEGIN {
        printf "#   the daemon used %.2f s of CPU in %.1f s (%.0f%% of a core), %.2f ms per status answered with its sweeps\n",
               t / hz, ms / 1000, 100 * t / hz / (ms / 1000), n ? 1000 * t / hz / n : 0 }'
if [ -n "${sent:-}" ] && [ "$sent" -gt 0 ] && [ "$sent" = "$answered" ] && [ "$bad" = 0 ]; then
        ok "every status was answered, each with the rank table ($sent)"
else
        fail "every status was answered" "$(cat "$tmp/status.out")"
fi
if kill -0 "$dpid" 2>/dev/null && ctl status >/dev/null; then
        ok "the daemon is alive"
else
        fail "the daemon is alive" "$(tail -5 "$tmp/npuprofd.log")"
fi

echo "scale: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
