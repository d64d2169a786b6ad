#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Scale: 256 live ranks of libnpuprof on one node (tests/many-ranks: 4 processes of 4 threads,
# each rank stepped every millisecond for STEPS steps), one window configured for all ranks,
# the real npuprofd sweeping, and a client asking `status` 1,000 times a second throughout
# (NPF_SCALE_RATE a second, to find the rate this machine sustains).
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
RANKS=256 STEPS=${NPF_SCALE_STEPS:-10000} RATE=${NPF_SCALE_RATE:-1000} START=3000 WINDOW=5
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

# The status client: one connection and an open loop, as a monitoring agent asks: a request
# due every millisecond at absolute deadlines and sent whether or not the last was answered
# (the protocol answers in order), so a slow answer cannot slow the asking and hide itself.
# A latency runs from the moment the request was sent to its answer; how late the client's
# own timer sent it is printed apart (it is this machine's, not the daemon's). Each answer
# is checked in full.
python3 - "$sock" "$tmp/ranks.done" "$RATE" >"$tmp/status.out" 2>"$tmp/status.err" <<'EOF' &
import collections, json, os, select, socket, sys, time
sock, done, period = sys.argv[1], sys.argv[2], 1.0 / int(sys.argv[3])
REQUEST = b'{"version": 2, "command": "status"}\n'
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sock)
s.setblocking(False)            # never blocked sending while answers wait to be read
due = collections.deque()       # the deadline of each request not sent whole yet
sent_at = collections.deque()   # when each request not answered yet was sent
lat, late, bad, sent, out, buf, last, good = [], [], 0, 0, b"", b"", None, False
by_second = {}                  # the latencies of the requests sent in each second
t0 = next_t = time.monotonic()
asking = True
while True:
    now = time.monotonic()
    if asking and (os.path.exists(done) or now - t0 > 120):
        asking = False
    if not (asking or due or sent_at):
        break
    while asking and now >= next_t:
        due.append(next_t)
        out += REQUEST
        next_t += period
    wait = max(0.0, next_t - time.monotonic()) if asking else 5.0
    readable, writable, _ = select.select([s], [s] if out else [], [], wait)
    if writable:
        n = s.send(out)
        out = out[n:]
        now = time.monotonic()
        while len(due) * len(REQUEST) > len(out):   # the requests now sent whole
            late.append(now - due.popleft())
            sent_at.append(now)
            sent += 1
    if not readable:
        if not asking and not writable:
            break               # an answer that never comes: counted as unanswered
        continue
    chunk = s.recv(65536)
    if not chunk:
        break
    now = time.monotonic()
    *lines, buf = (buf + chunk).split(b"\n")
    for line in lines:
        asked = sent_at.popleft()
        lat.append(now - asked)
        by_second.setdefault(int(asked - t0), []).append(now - asked)
        # Every answer is checked in full: ok, and the whole rank table in it, every row whole
        # (an answer the same to the byte as the one before is the same answer: shared).
        if line != last:
            try:
                o = json.loads(line)
                t = o["result"]["ranks"]
                good = o["ok"] is True and all(len(r) == len(t["columns"]) for r in t["rows"])
            except (ValueError, KeyError, TypeError):
                good = False
            last = line
        bad += not good
elapsed = time.monotonic() - t0
q = lambda v, p: sorted(v)[min(len(v) - 1, int(p * len(v)))] * 1000 if v else float("nan")
print("sent %d answered %d bad %d seconds %.2f rate %.0f p50 %.2f p99 %.2f max %.2f late-p50 %.2f late-p99 %.2f"
      % (sent, len(lat), bad, elapsed, len(lat) / elapsed, q(lat, 0.5), q(lat, 0.99), q(lat, 1), q(late, 0.5), q(late, 0.99)))
print(" ".join("%.1f" % q(by_second[k], 0.99) for k in sorted(by_second)))
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

read -r _ sent _ answered _ bad _ secs _ rate _ p50 _ p99 _ max _ late50 _ late99 <"$tmp/status.out" || true
echo "#   status under load: ${answered:-?} answered of ${sent:-?} in ${secs:-?} s (${rate:-?}/s), p50 ${p50:-?} ms, p99 ${p99:-?} ms, max ${max:-?} ms"
echo "#   (the client's timer sent them late by p50 ${late50:-?} ms, p99 ${late99:-?} ms)"
echo "#   p99 of each second, in ms: $(sed -n 2p "$tmp/status.out")"
shared=$(ctl status --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["daemon"]["clients"]["shared_answers"])')
echo "#   answers shared by requests that waited (daemon.clients.shared_answers): ${shared:-?}"
awk -v t="$((cpu1 - cpu0))" -v hz="$(getconf CLK_TCK)" -v n="${answered:-0}" -v ms="$((t1 - t0))" 'BEGIN {
        printf "#   the daemon used %.2f s of CPU in %.1f s (%.0f%% of a core), %.2f ms per status answered with its sweeps\n",
               t / hz, ms / 1000, 100 * t / hz / (ms / 1000), n ? 1000 * t / hz / n : 0 }'
if [ -n "${sent:-}" ] && [ "$sent" -gt 0 ] && [ "$sent" = "$answered" ] && [ "$bad" = 0 ]; then
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
