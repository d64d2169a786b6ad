#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Windows that open themselves (profiler_config.json's "auto"), with real npuprofd and real
# ranks, driven by the real npuprofctl.
#
# fleet: three daemons, one per "node", share a fleet directory; six ranks (five train-loop
#   in C, one Python Monitor) step every 20 ms +-10% and from step 400 take 1.5 times as
#   long. Each daemon finds the slowdown within 50 steps at its step; one proposal is made
#   for the fleet, and one automatic window opens on all six ranks at one step, each
#   window done, analysed, its manifest, the window lists and the cluster analysis saying
#   why; each node counts
#   npuprof_auto_windows_total 1 and its fleet record says so.
# stall: the three daemons again, with auto.on_stall: rank 22 on node-2 hangs at step 600,
#   the five others at 800, as ranks waiting in a collective do (a C rank in hang_forever(),
#   a Python rank in stuck_in_collective()). npuprofctl fleet names rank 22 on node-2 as
#   the one the others wait for; each stalled rank is asked for its stacks through its
#   slot, and writes them under the output directory: the C ranks' native frames with
#   function names, the Python rank's Python frames; status, the log and
#   npuprof_auto_stacks_total say so, and the budget allows one capture per node.
# budget: one daemon on that fleet directory. A person's window armed far ahead wins over
#   the slowdown; then, with none, an automatic window opens; the file read again unchanged
#   leaves it in force, an edit replaces it; then cooldown_s refuses the next, and
#   max_per_day, counting the fleet's proposals of the day, refuses the one after.
#   tests/test-auto.sh BUILD_DIR
# Ends with "auto: N passed, N failed". Waits are bounded polls, never a stopwatch.
set -u
build=${1:?usage: tests/test-auto.sh BUILD_DIR}
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl trainloop=$build/train-loop
for b in "$npuprofd" "$npuprofctl" "$trainloop"; do
        [ -x "$b" ] || { echo "test-auto: $b is not built" >&2; exit 2; }
done
here=$(cd "$(dirname "$0")" && pwd)
lib=$(cd "$build" && pwd)/libnpuprof.so

# An analyzer built with AddressSanitizer or ThreadSanitizer reserves terabytes of address
# space: it runs under no address-space limit.
mem_opts=()
grep -qaE "__asan_init|__tsan_init" "$build/npuprof-replay" && mem_opts=(--analyze-memory 0)

. "$here/lib.sh"
npf_harness auto
wait_ms=30000
# Debian's interpreter, as the package's users have it (a shim in front of another would
# take the sanitizer's runtime too).
python=/usr/bin/python3
[ -x "$python" ] || python=python3
fleet=$tmp/fleet out=$tmp/out
mkdir -p "$fleet" "$out"
declare -A dpid
declare -a rpid

ctl() { local k=$1; shift; timeout 10 "$npuprofctl" --socket "$tmp/node$k.sock" --shm-name "npftest-auto-$$-$k" "$@"; }
prelude='
import json, sys
o = json.loads(sys.argv[2])
A = o.get("auto") or {}
W = (o.get("windows") or {}).get("recent") or []
P = o.get("progress") or {}
'
js() { local k=$1; shift; npf_json_holds "$prelude" "$1" ctl "$k" status --json; }
jv() { local k=$1; shift; npf_json_print "$prelude" "json.dumps($1)" ctl "$k" status --json; }
metric() { ctl "$1" metrics | awk -v n="$2" '$1 == n { print $2 }'; }
diag() {
        local k
        for k in 1 2 3; do
                [ -e "$tmp/node$k.log" ] || continue
                echo "node-$k: $(jv "$k" '{"auto": A, "progress": P, "windows": W[:3]}' | head -c 1500)"
                tail -n 6 "$tmp/node$k.log"
        done
        ls "$fleet/auto" 2>/dev/null
}

# daemon K CONFIG [OPTION...]: npuprofd for node-K on the fleet directory.
daemon() {
        local k=$1 conf=$2; shift 2
        "$npuprofd" --config "$conf" --shm-name "npftest-auto-$$-$k" --socket "$tmp/node$k.sock" --no-inotify \
                --poll-interval 100 --output-root "$out" --log stderr --stall-after 2 --slowdown-steps 30 \
                --fleet-dir "$fleet" --node-name "node-$k" --fleet-interval 1 "$@" 2>>"$tmp/node$k.log" &
        dpid[$k]=$!
        all_pids+=("${dpid[$k]}")
}
# rank R K [OPTION...]: a train-loop rank R on node-K.
rank() {
        local r=$1 k=$2; shift 2
        "$trainloop" --rank "$r" --steps 100000 --step-ms 20 --busy 0 --jitter 10 --shm-name "npftest-auto-$$-$k" \
                --backend host "$@" >>"$tmp/rank$r.out" 2>&1 &
        rpid[$r]=$!
        all_pids+=("${rpid[$r]}")
}
# py_rank R K SLOW_AT [HANG_AT]: the same in Python, through npuprof.Monitor, with the build's
# library; from step HANG_AT it blocks in stuck_in_collective().
py_rank() {
        local r=$1 k=$2 slow=$3 hang=${4:-0} preload=''
        # A sanitizer's library needs its runtime loaded first into the interpreter.
        preload=$(ldd "$lib" 2>/dev/null | awk '/lib(asan|ubsan|tsan)\.so/ { print $3; exit }')
        LD_PRELOAD=$preload ASAN_OPTIONS=detect_leaks=0 NPUPROF_LIB=$lib PYTHONPATH=$here/../python \
                "$python" - "npftest-auto-$$-$k" "$r" "$slow" "$hang" >>"$tmp/rank$r.out" 2>&1 <<'PY' &
import random, sys, threading, time
import npuprof
shm, rank, slow_at, hang_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(rank)

def stuck_in_collective():
    threading.Event().wait()

with npuprof.Monitor(rank=rank, shm_name=shm, backend="host") as mon:
    t = time.monotonic()
    for step in range(1, 100000):
        mon.step(step)
        if hang_at and step >= hang_at:
            stuck_in_collective()
        t += 0.020 * (1.5 if step >= slow_at else 1.0) * rng.uniform(0.9, 1.1)
        time.sleep(max(0.0, t - time.monotonic()))
PY
        rpid[$r]=$!
        all_pids+=("${rpid[$r]}")
}
stop_ranks() { for r in "$@"; do kill -KILL "${rpid[$r]}" 2>/dev/null; wait "${rpid[$r]}" 2>/dev/null; done; }
stop_daemon() {
        local k=$1 rc
        kill -TERM "${dpid[$k]}"
        wait "${dpid[$k]}"; rc=$?
        if [ "$rc" -eq 0 ] && ! grep -qE 'Sanitizer|runtime error' "$tmp/node$k.log"; then
                ok "node-$k's daemon stops cleanly, with no sanitizer report"
        else
                fail "node-$k's daemon stops cleanly, with no sanitizer report" "exit $rc; $(tail -n 20 "$tmp/node$k.log")"
        fi
}

# --- fleet: one slowdown, one window on every rank of three nodes at one step -------------
conf=$tmp/profiler_config.json
printf '{"output_dir": "%s/job", "auto": {"on_slowdown": {"steps": 5}, "cooldown_s": 3600, "max_per_day": 4}}\n' \
        "$out" >"$conf"
for k in 1 2 3; do daemon "$k" "$conf" --analyze-jobs 1 "${mem_opts[@]}"; done
for k in 1 2 3; do wait_for ctl "$k" status >/dev/null 2>&1 || fail "node-$k's daemon did not start" "$(diag)"; done
check "status shows the policy: on_slowdown 5 steps, cooldown_s 3600, max_per_day 4, no window yet" \
        js 1 "A['policy'] == {'on_slowdown': {'steps': 5}, 'on_stall': None, 'cooldown_s': 3600, 'max_per_day': 4} and A['windows'] == 0 and A['last'] is None"
rank 0 1 --slow-at 400 --slow-factor 1.5; rank 1 1 --slow-at 400 --slow-factor 1.5
rank 2 2 --slow-at 400 --slow-factor 1.5; rank 3 2 --slow-at 400 --slow-factor 1.5
rank 4 3 --slow-at 400 --slow-factor 1.5; py_rank 5 3 400
eventually "every node sees its two ranks step" \
        sh -c 'for k in 1 2 3; do n=$(timeout 10 "$0" --socket "$1/node$k.sock" --shm-name "npftest-auto-$2-$k" status --json |
                python3 -c "import json,sys; print(sum(1 for r in json.load(sys.stdin)[\"ranks\"] if (r[\"step\"] or 0) > 5))"); [ "$n" = 2 ] || exit 1; done' \
        "$npuprofctl" "$tmp" "$$"
eventually "each node opens one automatic window" \
        sh -c 'for k in 1 2 3; do grep -q "automatic window of 5 steps from step" "$0/node$k.log" || exit 1; done' "$tmp"
for k in 1 2 3; do
        wait_for grep -q "slowdown since step [0-9,]*: the job.s step time" "$tmp/node$k.log"
        since=$(sed -n 's/.*slowdown since step \([0-9,]*\): the job.s step time.*/\1/p' "$tmp/node$k.log" | head -1 | tr -d ,)
        seen=$(sed -n "s/.*slowdown since step .*(seen at step \([0-9,]*\)).*/\1/p" "$tmp/node$k.log" | head -1 | tr -d ,)
        check "node-$k: the slowdown placed at step ${since:-?} (400 +-20), found at step ${seen:-?}, within 50 steps of 400" \
                test "${since:-0}" -ge 380 -a "${since:-0}" -le 420 -a "${seen:-9999}" -le 450
done
check "one proposal for the fleet: $(ls "$fleet/auto" | tr '\n' ' ')" \
        test "$(ls "$fleet/auto")" = 00000001.json
prop=$fleet/auto/00000001.json
start=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["start_step"])' "$prop")
check "... from step $start, past the slowdown, 5 steps, with its reason" \
        python3 -c 'import json,sys; p = json.load(open(sys.argv[1]))
sys.exit(0 if p["kind"] == "slowdown" and p["steps"] == 5 and p["start_step"] > 420 and
         p["reason"].startswith("auto: slowdown since step ") and p["node"] in ("node-1", "node-2", "node-3") else 1)' "$prop"
for k in 1 2 3; do
        eventually "node-$k: both ranks' windows done, from step $start, each with the reason, and analysed" \
                js "$k" "sorted(w['start_step'] for w in W if w['outcome'] == 'done') == [$start, $start] and all(w['reason'] and w['reason'].startswith('auto: slowdown since step ') and w['stop_step'] == $start + 4 for w in W) and all((w['analysis'] or {}).get('state') == 'done' for w in W)"
        check "node-$k: status says the window it opened: auto.windows 1, last is the slowdown's" \
                js "$k" "A['windows'] == 1 and A['last']['kind'] == 'slowdown' and A['last']['start_step'] == $start and A['budget']['slowdown']['used'] == 1"
        check "node-$k: npuprof_auto_windows_total 1" test "$(metric "$k" npuprof_auto_windows_total)" = 1
        eventually "node-$k: its fleet record says it, and its windows' reason" \
                python3 -c 'import json,sys; r = json.load(open(sys.argv[1]))
sys.exit(0 if r["auto"]["windows"] == 1 and r["auto"]["last"]["kind"] == "slowdown" and
         any((w.get("reason") or "").startswith("auto: slowdown") for w in r["windows"]["recent"]) else 1)' "$fleet/node-$k.json"
done
manifests=$(find "$out/job" -name manifest.json -path "*_start${start}_*" | sort)
check "six windows' manifests, each with the reason: $(echo "$manifests" | wc -l)" \
        python3 -c 'import json,sys
ms = [json.load(open(p)) for p in sys.argv[1:]]
sys.exit(0 if len(ms) == 6 and sorted(m["rank"] for m in ms) == [0, 1, 2, 3, 4, 5] and
         all((m.get("reason") or "").startswith("auto: slowdown since step ") and m["status"] == "complete" for m in ms) else 1)' $manifests
check "the cluster analysis of the window says why it opened" \
        sh -c 'grep -q "^Opened by itself: auto: slowdown since step " "$0"/cluster-gen*/report.txt' "$out/job"
check "the slowdown goes on, but no second window opens (one per slowdown)" \
        test "$(ls "$fleet/auto" | wc -l)" = 1 -a "$(metric 1 npuprof_auto_windows_total)" = 1
stop_ranks 0 1 2 3 4 5
for k in 1 2 3; do stop_daemon "$k"; done

# --- stall: a rank stuck, the others waiting for it; their stacks ------------------------
printf '{"output_dir": "%s/job", "auto": {"on_stall": {"after_s": 2}, "cooldown_s": 3600, "max_per_day": 4}}\n' \
        "$out" >"$conf"
for k in 1 2 3; do : >"$tmp/node$k.log"; daemon "$k" "$conf" --analyze-jobs 0; done
for k in 1 2 3; do wait_for ctl "$k" status >/dev/null 2>&1 || fail "node-$k's daemon did not start" "$(diag)"; done
rank 20 1 --hang-at 800; rank 21 1 --hang-at 800
rank 22 2 --hang-at 600; rank 23 2 --hang-at 800
rank 24 3 --hang-at 800; py_rank 25 3 0 800
# fj EXPR: EXPR holds of `f`, npuprofctl fleet --json (b: its "behind").
fj() {
        local o
        o=$(timeout 20 "$npuprofctl" fleet --fleet-dir "$fleet" --json 2>/dev/null)
        python3 -c 'import json, sys
f = json.loads(sys.argv[2]); b = f["behind"]
sys.exit(0 if eval("(" + sys.argv[1] + ")") else 1)' "$1" "$o" 2>/dev/null
}
eventually "npuprofctl fleet names rank 22 on node-2, stalled at step 600, as the one the five others wait for" \
        fj 'b["stalled"] == 6 and b["ranks"][0]["rank"] == 22 and b["ranks"][0]["node"] == "node-2" and b["ranks"][0]["step"] == 600 and "they wait for it" in b["message"]'
pid22=${rpid[22]} pid25=${rpid[25]}
st22=$out/job/stacks/rank22_pid${pid22}_1.txt st25=$out/job/stacks/rank25_pid${pid25}_1.txt
eventually "node-2: rank 22 asked for its stacks and wrote them: $st22" \
        js 2 "any(q['rank'] == 22 and q['state'] == 'written' and q['path'] == '$st22' for q in A['stacks'])"
check "... its native frames name hang_forever, then main" \
        python3 -c 'import sys; t = open(sys.argv[1]).read(); i = t.find("hang_forever"); sys.exit(0 if i >= 0 and t.find("main", i) > i else 1)' "$st22"
eventually "every node: both its ranks' stacks written, in one capture" \
        sh -c 'for k in 1 2 3; do timeout 10 "$0" --socket "$1/node$k.sock" --shm-name "npftest-auto-$2-$k" status --json |
                python3 -c "import json,sys; a = json.load(sys.stdin)[\"auto\"]; sys.exit(0 if sorted(q[\"state\"] for q in a[\"stacks\"]) == [\"written\", \"written\"] and a[\"budget\"][\"stall\"][\"used\"] == 1 else 1)" || exit 1; done' \
        "$npuprofctl" "$tmp" "$$"
check "the Python rank's stacks: faulthandler's line of stuck_in_collective, and native frames" \
        python3 -c 'import re, sys; t = open(sys.argv[1]).read()
sys.exit(0 if re.search(r"File \".*\", line \d+ in stuck_in_collective", t) and "hang_forever" not in t and "#0 " in t else 1)' "$st25"
check "node-2 logged it: asked, then written" \
        sh -c 'grep -q "progress stall: rank 22 asked for its stacks, stalled at step 600" "$0" && grep -q "rank 22 wrote its stacks: $1" "$0"' \
        "$tmp/node2.log" "$st22"
check "npuprof_auto_stacks_total 2 on each node" \
        test "$(metric 1 npuprof_auto_stacks_total) $(metric 2 npuprof_auto_stacks_total) $(metric 3 npuprof_auto_stacks_total)" = "2 2 2"
stop_ranks 20 21 22 23 24 25
for k in 1 2 3; do stop_daemon "$k"; done

# --- budget, and a person's edit ----------------------------------------------------------
# wait for slowdown number N on node-1 (counted in the log), then stop the ranks.
slowdown() {
        rank 10 1 --slow-at 300 --slow-factor 1.5; rank 11 1 --slow-at 300 --slow-factor 1.5
        eventually "$2" sh -c '[ "$(grep -c "slowdown since step [0-9,]*: the job.s step time" "$0")" -ge "$1" ]' \
                "$tmp/node1.log" "$1"
        wait_for sh -c '[ "$(grep -c "slowdown since step [0-9,]*: \(no automatic window\|proposed\|another node\)" "$0")" -ge "$1" ]' \
                "$tmp/node1.log" "$1"
        stop_ranks 10 11
        wait_for js 1 "o['ranks'] == []"
}
: >"$tmp/node1.log"
printf '{"output_dir": "%s/job", "start_step": 1000000, "steps": 2, "auto": {"on_slowdown": {"steps": 3}, "cooldown_s": 0, "max_per_day": 4}}\n' \
        "$out" >"$conf"
daemon 1 "$conf" --analyze-jobs 0
wait_for ctl 1 status >/dev/null 2>&1 || fail "node-1's daemon did not start" "$(diag)"
check "a new daemon counts the fleet's proposal of the day in its budget" js 1 "A['budget']['slowdown']['used'] == 1"
slowdown 1 "a slowdown while a person's window is armed at step 1,000,000"
check "... no automatic window: a person's window wins" \
        grep -q 'no automatic window: a window is armed or open on this node, and a person.s window wins' "$tmp/node1.log"
check "... nothing proposed" test "$(ls "$fleet/auto")" = 00000001.json

printf '{"output_dir": "%s/job", "auto": {"on_slowdown": {"steps": 3}, "cooldown_s": 0, "max_per_day": 4}}\n' "$out" >"$conf"
ctl 1 reload >/dev/null
gen_person=$(jv 1 'o["config"]["generation"]')
slowdown 2 "with no window of the person's, the next slowdown"
check "... opens a window: proposal 2" test -e "$fleet/auto/00000002.json"
eventually "... taken: the generation in force is the automatic window's" \
        js 1 "o['config']['generation'] == $gen_person + 1 and A['windows'] == 1"
touch "$conf"
ctl 1 reload >/dev/null
check "the file read again unchanged leaves the automatic window in force" \
        js 1 "o['config']['generation'] == $gen_person + 1"
printf '{"output_dir": "%s/job", "level": "Level1", "auto": {"on_slowdown": {"steps": 3}, "cooldown_s": 3600, "max_per_day": 4}}\n' \
        "$out" >"$conf"
ctl 1 reload >/dev/null
check "an edit of the file is published over it" js 1 "o['config']['generation'] == $gen_person + 2"
slowdown 3 "within cooldown_s, the next slowdown"
check "... opens no window: cooling down" grep -q 'no automatic window: cooling down for [0-9]* s more (cooldown_s 3600)' "$tmp/node1.log"
printf '{"output_dir": "%s/job", "level": "Level1", "auto": {"on_slowdown": {"steps": 3}, "cooldown_s": 0, "max_per_day": 2}}\n' \
        "$out" >"$conf"
ctl 1 reload >/dev/null
slowdown 4 "with max_per_day 2, after the fleet's two of the day, the next slowdown"
check "... opens no window: the day's budget is spent" \
        grep -q 'no automatic window: 2 in the last 24 hours, at most 2 (max_per_day)' "$tmp/node1.log"
check "... nothing more proposed, one window opened on this node" \
        test "$(ls "$fleet/auto" | wc -l)" = 2 -a "$(metric 1 npuprof_auto_windows_total)" = 1
stop_daemon 1

echo "auto: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
