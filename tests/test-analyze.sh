#!/usr/bin/env bash
# Integration tests of the analysis of finished windows: the real npuprofd, real train-loop
# ranks and the real npuprof-replay, on a private config directory, shm name and socket,
# driven by the real npuprofctl.
#   tests/test-analyze.sh BUILD_DIR
# Every test starts its own daemon and cleans up after itself. Waits are bounded polls (at
# most 10 s), never a stopwatch.
#
# An analysis is held where a test needs it running: a FIFO stands in for the window's
# manifest.json (which the analyzer reads into its report, after it listed the inputs and
# before it reads them), so that the real analyzer blocks in open(2) until the test writes
# the manifest into the FIFO, signals the analyzer, or lets the time limit kill it. The FIFO
# is put in place after the rank wrote its window and before the daemon sees the window
# end: such a test runs the
# daemon with a sweep period of a day, so that only a request (`windows`) sweeps, and its
# first request comes after the ranks have ended and the FIFOs are in place. (A daemon with
# no rank attached also sweeps every 10 s of its own: the ranks of such a test run and end
# in well under a second from the daemon's start.)
set -u
build=${1:?usage: tests/test-analyze.sh BUILD_DIR}
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl analyzer=$build/npuprof-replay
trainloop=$build/train-loop driver=$build/tests/rank-driver
for b in "$npuprofd" "$npuprofctl" "$analyzer" "$trainloop" "$driver"; do
        [ -x "$b" ] || { echo "test-analyze: $b is not built" >&2; exit 2; }
done
analyzer=$(cd "$(dirname "$analyzer")" && pwd)/npuprof-replay

# An analyzer built with AddressSanitizer (or ThreadSanitizer) reserves terabytes of address space: it can run
# under no address-space limit, so the tests that do not test that limit lift it.
mem_opts=() mem_limit=4294967296
if grep -qaE "__asan_init|__tsan_init" "$analyzer"; then
        mem_opts=(--analyze-memory 0) mem_limit=unlimited
fi

. "$(dirname "$0")/lib.sh"
npf_harness a
chmod 0755 "$tmp"       # the test run as another user goes through it
wait_ms=10000

diag() {
        echo "windows: $(ctl windows --json 2>&1 | head -c 3000)"
        echo "daemon log (last lines):"
        tail -n 10 "$log" 2>/dev/null
}

ctl() { timeout 20 "$npuprofctl" --socket "$sock" --shm-name "$shm" "$@"; }
quiet() { "$@" >/dev/null 2>&1; }

# The Python that jw and wv run on a `windows --json` reply: `o` is the reply, `W` its
# windows, `A(r)` the analysis of rank r's window, `S` the sorted analysis states.
py_windows='
import json, sys
o = json.loads(sys.argv[2])
W = o.get("windows") or []
def A(r):
    return next((w["analysis"] for w in W if w["rank"] == r), None) or {}
S = sorted((w["analysis"] or {}).get("state", "-") for w in W)
'
# jw EXPR: `windows --json` satisfies the Python expression EXPR.
jw() { npf_json_holds "$py_windows" "$1" ctl windows --json; }
# wv EXPR: print the value of EXPR on `windows --json`.
wv() { npf_json_print "$py_windows" "$1" ctl windows --json; }

gone() {
        local s
        s=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 0
        [ -z "$s" ] || [ "$s" = Z ]
}
alive() { ! gone "$1"; }

# start_daemon [ARGS...]: npuprofd on this test's files, analysing with the real analyzer.
start_daemon() {
        ( ulimit -c 0; exec "$npuprofd" --config "$conf" --shm-name "$shm" --socket "$sock" --log stderr \
                --output-root "$root" --poll-interval 100 --analyzer "$analyzer" "$@" ) 2>>"$log" &
        dpid=$!
        all_pids+=("$dpid") test_pids+=("$dpid")
        wait_for ctl status >/dev/null 2>&1
}

# train RANK...: one train-loop process per rank, at once, each through the window 3..4 of
# the file; returns when they have all ended.
train() {
        local r pids=()
        for r in "$@"; do
                "$trainloop" --rank "$r" --steps 8 --step-ms 10 --shm-name "$shm" --backend host \
                        >"$dir/tl$r.out" 2>&1 &
                pids+=($!)
        done
        all_pids+=("${pids[@]}")
        for r in "${pids[@]}"; do wait "$r"; done
}

window() { echo "$root/rank$1_start3_stop4"; }

# hold RANK...: a FIFO in place of each rank's manifest.json, which its analyzer reads.
hold() {
        local r
        for r in "$@"; do
                [ -s "$(window "$r")/manifest.json" ] || return 1
                mv "$(window "$r")/manifest.json" "$dir/manifest$r.json" && mkfifo "$(window "$r")/manifest.json" \
                        || return 1
        done
}
# The sweep period of the tests that hold an analysis: see the top.
held=(--poll-interval 86400000)
# release RANK: the manifest into the FIFO, so that the held analyzer goes on; then in its place.
release() {
        timeout 20 sh -c 'cat "$1" >"$2"' sh "$dir/manifest$1.json" "$(window "$1")/manifest.json" &&
                mv "$dir/manifest$1.json" "$(window "$1")/manifest.json"
}

# stop_daemon: SIGTERM, and the daemon's exit status (a sanitizer's findings make it fail).
stop_daemon() {
        local status
        kill -TERM "$dpid" 2>/dev/null
        wait_for gone "$dpid"
        wait "$dpid"
        status=$?
        dpid=''
        return "$status"
}

run() {
        local p
        n=$((n + 1))
        dir=$tmp/$n
        mkdir -p "$dir"
        root=$dir/out conf=$dir/profiler_config.json shm=npftest-a-$$-$n sock=$dir/npuprofd.sock log=$dir/daemon.log
        mkdir -p "$root"
        printf '{ "start_step": 3, "steps": 2, "output_dir": "%s" }\n' "$root" >"$conf"
        test_pids=() dpid=''
        "$@"
        if [ -n "$dpid" ]; then
                if stop_daemon; then ok "$1: the daemon stops cleanly"
                else fail "$1: the daemon stops cleanly" "$(tail -n 20 "$log")"; fi
        fi
        for p in "${test_pids[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
        rm -f "/dev/shm/$shm.ctl" "/dev/shm/$shm.ranks"
}

# --- a window finishes; its analysis is done ----------------------------------------------

t_done() {
        local report out
        start_daemon "${mem_opts[@]}" || { fail "done: the daemon did not start" "$(diag)"; return; }
        train 1
        eventually "done: the analysis of rank 1's window is done" jw "A(1).get('state') == 'done'"
        report=$(wv "A(1)['report']")
        check "done: the report is WINDOW/analysis/report.json" test "$report" = "$(window 1)/analysis/report.json"
        check "done: report.txt and memory.svg are next to it" \
                test -s "$(window 1)/analysis/report.txt" -a -s "$(window 1)/analysis/memory.svg"
        check "done: report.json parses and has the window's two ProfilerSteps, 3 and 4" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
steps = [s["step"] for t in r["traces"] for s in t["steps"]]
sys.exit(0 if r["kind"] == "window" and r["window"]["rank"] == 1 and steps == [3, 4] else 1)' "$report"
        check "done: the analysis has no reason, no pid, and how long it took" \
                jw "A(1)['reason'] is None and A(1)['pid'] is None and isinstance(A(1)['seconds'], float)"
        out=$(ctl windows)
        check "done: windows shows ANALYSIS done" grep -Eq '^ +1 +1 +3\.\.4 +done +done +/' <<<"$out"
        check "done: windows shows the report's path" grep -Fq "report: $report (" <<<"$out"
        check "done: windows counts it" grep -qx 'analyses: 0 queued, 0 running, 1 done, 0 failed' <<<"$out"
        out=$(ctl status)
        check "done: status has the summary line" grep -qx 'analyses: 0 queued, 0 running, 1 done, 0 failed' <<<"$out"
        check "done: status shows the recent window's analysis" grep -q 'gen 1: done .*(analysis done)' <<<"$out"
        out=$(ctl metrics)
        check "done: metrics count it" test "$(grep -cE '^npuprof_analyses_total\{state="done"\} 1$|^npuprof_analyses_total\{state="failed"\} 0$|^npuprof_analyses\{state="(queued|running)"\} 0$' <<<"$out")" = 4
        eventually "done: the log says it started and ended" \
                grep -q "analysing $(window 1) (pid [0-9]*)" "$log"
        eventually "done: ... and where its report is" grep -Fq "analysis of $(window 1) done in" "$log"
}

# --- one at a time: the others wait -------------------------------------------------------

t_queue() {
        local seen=() pid first r
        start_daemon --analyze-jobs 1 "${mem_opts[@]}" "${held[@]}" \
                || { fail "queue: the daemon did not start" "$(diag)"; return; }
        train 1 2 3
        hold 1 2 3 || { fail "queue: cannot make the FIFOs" "$(ls -lR "$root")"; return; }
        eventually "queue: one analysis runs, two wait" jw "S == ['queued', 'queued', 'running']"
        seen+=("$(wv "','.join(sorted(str(w['analysis']['state']) for w in W))")")
        pid=$(wv "next(w['analysis']['pid'] for w in W if w['analysis']['state'] == 'running')")
        first=$(wv "next(w['rank'] for w in W if w['analysis']['state'] == 'running')")
        check "queue: the running analysis has a pid" test -n "$pid" -a "$pid" != None
        local niced=$(( $(sed 's/.*) //' "/proc/$dpid/stat" | cut -d' ' -f17) + 10 ))
        [ "$niced" -gt 19 ] && niced=19
        check "queue: it is niced by 10 ($niced)" test "$(sed 's/.*) //' "/proc/$pid/stat" | cut -d' ' -f17)" = "$niced"
        check "queue: its address space is limited ($mem_limit)" \
                grep -Eq "^Max address space +$mem_limit +$mem_limit " "/proc/$pid/limits"
        check "queue: its CPU time is limited to 600 s" grep -Eq '^Max cpu time +600 ' "/proc/$pid/limits"
        check "queue: its process is the real analyzer" test "$(readlink "/proc/$pid/exe")" = "$analyzer"
        check "queue: the others' output is untouched" \
                test "$(ls "$root"/rank*_start3_stop4/analysis 2>/dev/null | grep -c report.json)" = 0
        release "$first"
        eventually "queue: the first is done, the next runs, one waits" jw "S == ['done', 'queued', 'running']"
        seen+=("$(wv "','.join(sorted(str(w['analysis']['state']) for w in W))")")
        r=$(wv "next(w['rank'] for w in W if w['analysis']['state'] == 'running')")
        release "$r"
        eventually "queue: two done, the last runs" jw "S == ['done', 'done', 'running']"
        seen+=("$(wv "','.join(sorted(str(w['analysis']['state']) for w in W))")")
        r=$(wv "next(w['rank'] for w in W if w['analysis']['state'] == 'running')")
        release "$r"
        eventually "queue: all three done" jw "S == ['done', 'done', 'done']"
        seen+=("$(wv "','.join(sorted(str(w['analysis']['state']) for w in W))")")
        check "queue: the states seen, in order: ${seen[*]}" test "${seen[*]}" = \
                "queued,queued,running done,queued,running done,done,running done,done,done"
        for r in 1 2 3; do
                check "queue: rank $r's report exists" test -s "$(window "$r")/analysis/report.json"
        done
        # In the log, each analysis ends before the next starts.
        check "queue: never two at once, by the log" python3 -c '
import re, sys
running = peak = 0
for line in open(sys.argv[1]):
    if re.search(r"info: analysing ", line):
        running += 1
        peak = max(peak, running)
    elif re.search(r"analysis of .* (done in|failed after)", line):
        running -= 1
sys.exit(0 if peak == 1 and running == 0 else 1)' "$log"
}

# --- a crash of the analyzer ---------------------------------------------------------------

t_crash() {
        local pid
        # A sanitizer's runtime in the analyzer would catch the signal and exit: the signal it is.
        ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0 UBSAN_OPTIONS=${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}handle_segv=0 \
        TSAN_OPTIONS=${TSAN_OPTIONS:+$TSAN_OPTIONS:}handle_segv=0 \
                start_daemon --analyze-jobs 1 "${mem_opts[@]}" "${held[@]}" \
                || { fail "crash: the daemon did not start" "$(diag)"; return; }
        train 1 2
        hold 1 || { fail "crash: cannot make the FIFO" "$(ls -lR "$root")"; return; }
        eventually "crash: rank 1's analysis runs" jw "A(1).get('state') == 'running'"
        pid=$(wv "A(1)['pid']")
        kill -SEGV "$pid"
        eventually "crash: it failed, killed by signal 11" \
                jw "A(1)['state'] == 'failed' and A(1)['reason'] == 'killed by signal 11 (Segmentation fault)'"
        check "crash: the daemon still runs" alive "$dpid"
        check "crash: and answers status" quiet ctl status
        eventually "crash: rank 2's analysis, after it, is done" jw "A(2).get('state') == 'done'"
        check "crash: windows names the signal" grep -Fq 'failed: killed by signal 11 (Segmentation fault)' <(ctl windows)
        eventually "crash: the log names it" grep -Fq "analysis of $(window 1) failed after" "$log"
        # Rank 1's, failed; rank 2's and the generation's cluster analysis after them, done.
        eventually "crash: status counts it" grep -qx 'analyses: 0 queued, 0 running, 2 done, 1 failed' <(ctl status)
}

# --- the limits ---------------------------------------------------------------------------

t_time_limit() {
        local pid
        start_daemon --analyze-timeout 1 "${mem_opts[@]}" "${held[@]}" \
                || { fail "time: the daemon did not start" "$(diag)"; return; }
        train 1
        hold 1 || { fail "time: cannot make the FIFO" "$(ls -lR "$root")"; return; }
        eventually "time: the held analysis runs" jw "A(1).get('state') == 'running'"
        pid=$(wv "A(1)['pid']")
        eventually "time: it fails with the time reason" \
                jw "A(1)['state'] == 'failed' and A(1)['reason'] == 'time limit of 1 s reached'"
        check "time: the analyzer is gone" gone "$pid"
        check "time: it ran for about its limit" jw "1.0 <= A(1)['seconds'] < 10"
        check "time: the daemon still answers" quiet ctl status
}

t_memory_limit() {
        start_daemon --analyze-memory 1M || { fail "memory: the daemon did not start" "$(diag)"; return; }
        train 1
        eventually "memory: the analysis fails with the memory reason" \
                jw "A(1).get('state') == 'failed' and A(1)['reason'] == 'memory limit of 1.0 MiB reached'"
        check "memory: no report" test ! -e "$(window 1)/analysis/report.json"
        check "memory: the daemon still answers" quiet ctl status
        check "memory: windows shows the reason" grep -Fq 'failed: memory limit of 1.0 MiB reached' <(ctl windows)
}

# Stopping the daemon kills the analysis under way, and waits for nothing.
t_stop_while_running() {
        local pid
        start_daemon "${mem_opts[@]}" "${held[@]}" || { fail "stop: the daemon did not start" "$(diag)"; return; }
        train 1
        hold 1 || { fail "stop: cannot make the FIFO" "$(ls -lR "$root")"; return; }
        eventually "stop: the held analysis runs" jw "A(1).get('state') == 'running'"
        pid=$(wv "A(1)['pid']")
        check "stop: SIGTERM stops the daemon, exit 0" stop_daemon
        check "stop: the analyzer was killed" wait_for gone "$pid"
        check "stop: the log says it stopped" grep -q 'notice: stopping (SIGTERM)' "$log"
}

# --- no analysis --------------------------------------------------------------------------

t_off() {
        start_daemon --analyze-jobs 0 || { fail "off: the daemon did not start" "$(diag)"; return; }
        train 1
        eventually "off: the window is recorded done" jw "len(W) == 1 and W[0]['outcome'] == 'done'"
        check "off: it has no analysis" jw "W[0]['analysis'] is None and o['analysis']['enabled'] is False"
        check "off: nothing was written" test ! -e "$(window 1)/analysis"
        check "off: status says so" grep -qx 'analyses: off (npuprofd --analyze-jobs 0)' <(ctl status)
        eventually "off: the log says so" grep -q 'finished windows are not analysed' "$log"
        check "off: no analyzer ran" test "$(grep -c 'analysing' "$log")" = 0
}

# --- a daemon run from the build tree analyses with the analyzer beside it -----------------

t_beside() {
        ( ulimit -c 0; exec "$npuprofd" --config "$conf" --shm-name "$shm" --socket "$sock" --log stderr \
                --output-root "$root" --poll-interval 100 "${mem_opts[@]}" ) 2>>"$log" &
        dpid=$!
        all_pids+=("$dpid") test_pids+=("$dpid")
        wait_for ctl status >/dev/null 2>&1 || { fail "beside: the daemon did not start" "$(diag)"; return; }
        check "beside: without --analyzer, the analyzer is the npuprof-replay beside npuprofd" \
                jw "o['analysis']['analyzer'] == '$analyzer'"
        train 1
        eventually "beside: the window's analysis is done" jw "A(1).get('state') == 'done'"
        check "beside: its report is written" test -s "$(window 1)/analysis/report.json"
}

# A window whose rank named no directory cannot be analysed, and says so.
t_no_directory() {
        start_daemon "${mem_opts[@]}" || { fail "no directory: the daemon did not start" "$(diag)"; return; }
        "$driver" --shm "$shm" --rank 4 --step 3 --state done --window 1-2 >"$dir/r4.out" 2>&1
        eventually "no directory: the analysis failed at once, with why" \
                jw "A(4).get('state') == 'failed' and A(4)['reason'] == 'not analysed: the rank named no window directory'"
        check "no directory: no analyzer ran" test "$(grep -c 'analysing' "$log")" = 0
}

# --- the daemon as another user: reports go to its state directory ------------------------

t_state_directory() {
        local report
        if ! setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
                echo "skip state directory: cannot run as nobody here"
                return
        fi
        mkdir -p "$dir/state" && chown 65534:65534 "$dir/state" && chmod 1777 "$dir" && chmod 0644 "$conf"
        ( ulimit -c 0; export STATE_DIRECTORY=$dir/state
          exec setpriv --reuid=65534 --regid=65534 --clear-groups "$npuprofd" --config "$conf" --shm-name "$shm" \
                --socket "$sock" --log stderr --output-root "$root" --poll-interval 100 --analyzer "$analyzer" \
                "${mem_opts[@]}" ) 2>>"$log" &
        dpid=$!
        all_pids+=("$dpid") test_pids+=("$dpid")
        wait_for ctl status >/dev/null 2>&1 || { fail "state directory: the daemon did not start" "$(diag)"; return; }
        train 1         # as root: the window directory is root's, 0755
        eventually "state directory: the analysis is done" jw "A(1).get('state') == 'done'"
        report=$(wv "A(1)['report']")
        check "state directory: the report is under STATE/analysis/" \
                test "$report" = "$dir/state/analysis/rank1_start3_stop4/report.json" -a -s "$report"
        check "state directory: the window directory is untouched" test ! -e "$(window 1)/analysis"
        check "state directory: the report is the daemon user's" test "$(stat -c %u "$report")" = 65534
}

# --- npuprofctl analyze -------------------------------------------------------------------

t_ctl_analyze() {
        local out rc w
        start_daemon --analyze-jobs 0 || { fail "ctl analyze: the daemon did not start" "$(diag)"; return; }
        train 1
        w=$(window 1)
        check "ctl analyze: the window exists" test -s "$w/manifest.json"
        out=$("$npuprofctl" analyze "$w" 2>&1); rc=$?
        check "ctl analyze: exit 0${out:+ ($out)}" test "$rc" = 0
        check "ctl analyze: WINDOW/analysis/report.json written, with the window's steps" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if [s["step"] for t in r["traces"] for s in t["steps"]] == [3, 4] else 1)' "$w/analysis/report.json"
        out=$("$npuprofctl" analyze -o "$dir/elsewhere" --json "$w" 2>/dev/null); rc=$?
        check "ctl analyze -o --json: exit 0" test "$rc" = 0
        check "ctl analyze -o --json: the report on stdout" python3 -c '
import json, sys
sys.exit(0 if json.loads(sys.argv[1])["tool"] == "npuprof-replay" else 1)' "$out"
        check "ctl analyze -o: the report in OUTDIR" test -s "$dir/elsewhere/report.json"
        out=$("$npuprofctl" analyze "$dir/no-such-window" 2>&1); rc=$?
        check "ctl analyze: a missing path exits 1" test "$rc" = 1
        check "ctl analyze: ... and says why" grep -q 'no-such-window: No such file or directory' <<<"$out"
        "$npuprofctl" analyze >/dev/null 2>&1
        check "ctl analyze: no path is a usage error" test $? = 2
        "$npuprofctl" analyze a b >/dev/null 2>&1
        check "ctl analyze: two paths are a usage error" test $? = 2
        out=$("$npuprofctl" analyze --help); rc=$?
        check "ctl analyze --help" test "$rc" = 0 -a -n "$(grep 'npuprof-replay' <<<"$out")"
        # A copy of npuprofctl with no npuprof-replay beside it falls back on the installed one.
        mkdir -p "$dir/lonely" && cp "$npuprofctl" "$dir/lonely/"
        out=$("$dir/lonely/npuprofctl" analyze "$w" 2>&1); rc=$?
        if [ -x /usr/local/bin/npuprof-replay ]; then
                echo "skip ctl analyze: fallback (an npuprof-replay is installed)"
        else
                check "ctl analyze: no analyzer to run exits 127" test "$rc" = 127
                check "ctl analyze: ... and names the one it tried" grep -q 'cannot run .*npuprof-replay' <<<"$out"
        fi
}

# --- a window that holds torch_npu's own output, its parser still writing it -------------------

# The real torch_npu capture of shared/testdata, as a rank with torch_npu's profiler leaves it
# in its window directory; its files are touched while "the parser runs".
ascend=$(cd "$(dirname "$0")/.." && pwd)/../shared/testdata/profiler_outputs/torch_npu-2rank-alexnet/text/level1/rank0_ascend_pt

t_device() {
        local out parser
        if [ ! -d "$ascend" ]; then
                skip "device: $ascend is absent (the real profiler outputs)"
                return
        fi
        start_daemon "${mem_opts[@]}" "${held[@]}" || { fail "device: the daemon did not start" "$(diag)"; return; }
        train 0
        cp -r "$ascend" "$(window 0)/w_ascend_pt" && chmod -R u+w "$(window 0)/w_ascend_pt"
        # torch_npu's asynchronous parser, still writing: a file of its output changes each 0.5 s.
        ( for _ in $(seq 8); do touch "$(window 0)/w_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"; sleep 0.5; done ) &
        parser=$!
        test_pids+=("$parser")
        eventually "device: the window's analysis runs" jw "A(0).get('state') == 'running'"
        sleep 3
        check "device: ... and waits while the framework's parser writes" jw "A(0).get('state') == 'running'"
        wait "$parser"
        eventually "device: once the output is left alone, the analysis is done" jw "A(0).get('state') == 'done'"
        check "device: the analysis has the device's answer, torch_npu's own figure" \
                jw "any('step 50: 75% of the device' in a and 'communication not overlapped' in a for a in A(0)['answers'])"
        out=$(ctl windows)
        check "device: npuprofctl windows shows it under the window" \
                grep -q "rank 0: step 50: 75% of the device's step is communication not overlapped" <<<"$out"
        check "device: report.json has the rank's steps computed from trace_view.json" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
s = r["device"]["ranks"][0]["steps"]
sys.exit(0 if [x["step"] for x in s] == [50] and abs(s[0]["communication_not_overlapped_us"] - 101963.203) < 1 else 1)' \
                "$(window 0)/analysis/report.json"
}

# --- every window of a generation ended: the cluster analysis -----------------------------------

t_cluster() {
        local out
        if [ ! -d "$ascend" ]; then
                skip "cluster: $ascend is absent (the real profiler outputs)"
                return
        fi
        start_daemon "${mem_opts[@]}" "${held[@]}" || { fail "cluster: the daemon did not start" "$(diag)"; return; }
        train 0 1
        # Each rank's window holds its real torch_npu output, written a minute ago.
        cp -r "$ascend" "$(window 0)/w0_ascend_pt" && cp -r "${ascend%rank0_ascend_pt}rank1_ascend_pt" "$(window 1)/w1_ascend_pt" &&
                chmod -R u+w "$(window 0)" "$(window 1)" && find "$(window 0)" "$(window 1)" -exec touch -d '-1 min' {} +
        eventually "cluster: once both windows ended, the generation's cluster analysis is done" \
                jw "(o.get('clusters') or [{}])[0].get('analysis', {}).get('state') == 'done'"
        check "cluster: its report is cluster-gen1/ beside the windows" \
                jw "o['clusters'][0]['analysis']['report'] == '$root/cluster-gen1/report.json'"
        check "cluster: it read both ranks' torch_npu output" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if sorted(x["rank"] for x in r["device"]["ranks"]) == [0, 1] and len(r["windows"]) == 2 else 1)' \
                "$root/cluster-gen1/report.json"
        out=$(ctl windows)
        check "cluster: windows shows it, with its answer" \
                grep -A2 -q "^cluster of generation 1: done" <<<"$out"
        check "cluster: ... the answer: no slow rank among the two" grep -q "^    no slow rank" <<<"$out"
        eventually "cluster: the log says it ran" grep -q "analysis of the cluster of generation 1 done in" "$log"
}

run t_done
run t_queue
run t_crash
run t_time_limit
run t_memory_limit
run t_stop_while_running
run t_off
run t_beside
run t_no_directory
run t_state_directory
run t_ctl_analyze
run t_device
run t_cluster

echo "analyze: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
