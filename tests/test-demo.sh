#!/usr/bin/env bash
# `make demo` as a person sees it: scripts/demo against the built tree, once, and what it
# prints. No traceback, exit 0, and each section's key lines: the ranks collecting while
# they collect, every window done and analysed, the report's first rows, the chart that
# exists, the broken edit's line and column, and nothing left running, no segment left.
#   tests/test-demo.sh BUILD_DIR
# The plain build runs the ranks the demo chooses (PyTorch where /usr/bin/python3 has it);
# a sanitizer's build the C ranks (NPUPROF_DEMO_RANKS=c), which the demo would choose too.
set -u
build=${1:?usage: tests/test-demo.sh BUILD_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/tests/lib.sh"
npf_harness demo
for f in npuprofd npuprofctl npuprof-replay libnpuprof.so libnpuprof-heap.so train-loop; do
        [ -e "$build/$f" ] || { echo "test-demo: $build/$f is not built"; exit 1; }
done
kept=''
cleanup_demo() { [ -n "$kept" ] && rm -rf "$kept"; npf_cleanup; }
trap cleanup_demo EXIT

env=()
if [ "$build" != build ] && [ "$build" != "$npf_top/build" ]; then
        env=(NPUPROF_DEMO_RANKS=c)
fi
out=$tmp/demo.out
# The demo's own limits are tens of seconds; this one only keeps a hung demo from hanging the suite.
env "${env[@]}" timeout -k 5 180 "$here/scripts/demo" "$build" >"$out" 2>&1
status=$?
demo_pid_shm=$(sed -n 's/^shm: *\(npuprof-demo-[0-9]*\)$/\1/p' "$out" | head -n 1)
# The demo's directory, which it keeps for its windows' data: its configuration is there.
kept=$(sed -n 's|^config: *\(/tmp/npuprof-demo\.[A-Za-z0-9]*\)/etc/profiler_config\.json .*|\1|p' "$out" | head -n 1)
diag() { tail -n 40 "$out"; }

# section NAME: the lines of the demo's section whose title begins with NAME.
section() { awk -v t="== $1" 'index($0, t) == 1 { on = 1; next } /^== / { on = 0 } on' "$out"; }
has() { grep -qE -- "$2" <<<"$1"; }
lacks() { ! grep -qE -- "$2" <<<"$1"; }

check "the demo exits 0" test "$status" -eq 0
check "no Python traceback anywhere in its output" lacks "$(cat "$out")" 'Traceback'
check "it says which ranks train" grep -qE '^== Training: [0-9]+ ranks of (a real PyTorch job|build/train-loop)' "$out"
kind=c
grep -q '^== Training: .*real PyTorch job' "$out" && kind=torch
ranks=$(sed -n 's/^== Training: \([0-9]*\) ranks of .*/\1/p' "$out")
echo "     (${ranks:-no} ranks: $kind)"

s=$(section "Someone asks for a window")
check "npuprofctl start wrote the window" has "$s" '^start: wrote .* window steps [0-9]+\.\.[0-9]+'
check "status while they train shows ranks collecting" has "$s" '^ +[0-9]+ +[0-9]+ +[0-9]+ +collecting '
check "npuprofctl fleet shows the node with its ranks and the edit taken" has "$s" '^1 node: every node agrees$'
pids=$(sed -n 's/^ *[0-9][0-9]*  *\([0-9][0-9]*\)  *[0-9][0-9]*  *[a-z][a-z]* .*/\1/p' <<<"$s")
dpid=$(sed -n 's/^npuprofd: running, pid \([0-9]*\),.*/\1/p' "$out" | head -n 1)

s=$(section "Each rank's window closes")
check "windows lists every rank's window done and analysed ($ranks)" \
        has "$s" "^windows: done $ranks, failed 0, missed 0, filtered 0, lost 0$"
check "... each with its report" test "$(grep -c '^ *report: .*/analysis/report.json' <<<"$s")" -ge "$ranks"
check "every rank says what it did: its steps, its step time, its window done" \
        test "$(grep -cE '^rank [0-9]+: [0-9]+ steps done \((mean|median) step [0-9.]+ ms[,;)].*; window done in ' <<<"$s")" -eq "$ranks"

s=$(section "A broken edit")
check "the broken edit's error has its line and column" \
        has "$s" '^ +error: line 2, column 12: steps: expected an integer'
check "... and the last good configuration stays" has "$s" 'the last good configuration \(generation 2\) stays in force'

s=$(section "Stop")
check "the daemon exits 0" has "$s" '^npuprofd exited with status 0$'
check "the demo says no segment is left" has "$s" '^segment objects left in /dev/shm: 0$'
check "the demo says nothing it started runs" has "$s" '^processes the demo started still running: 0 of [0-9]+$'
alive=''
for p in $dpid $pids; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
check "the daemon and the ranks are gone (pids $(tr '\n' ' ' <<<"$dpid $pids"))" test -z "$alive"
no_segment() { [ -n "$demo_pid_shm" ] && [ -z "$(find /dev/shm -maxdepth 1 -name "$demo_pid_shm.*")" ]; }
check "no segment of the demo in /dev/shm (${demo_pid_shm:-none found})" no_segment
clean_logs() { [ -n "$kept" ] && ! cat "$kept"/npuprofd.log "$kept"/rank*.err | grep -qE 'Sanitizer|runtime error'; }
check "no sanitizer report from the daemon, the analyzer or a rank" clean_logs

s=$(section "The analysis of rank 0's window")
check "the report begins with the analyzer's line" has "$s" '^npuprof-replay [0-9.]+: /tmp/npuprof-demo\.[^ ]*/rank0_start[0-9]+_stop[0-9]+$'
check "the report's step table has its rows, 5 steps" \
        test "$(grep -cE '^ +[0-9]+ +[0-9.]+ [mu]?s +[0-9.]+ [mu]?s$' <<<"$s")" -ge 5
# The heap tracker records the ranks' allocations, except under ASan and TSan (they replace malloc).
if grep -q '^rank 0 of [0-9]*: \$ env .*LD_PRELOAD=[^ ]*libnpuprof-heap\.so' "$out"; then
        check "the report's memory is analysed: its peak" has "$s" '^  Peak allocated +[0-9.]+ [KMG]?i?B after event'
fi
if [ "$kind" = torch ]; then
        check "torch's trace has the model's operators" has "$s" '^ +[0-9.]+ [mu]?s +[0-9.]+ [mu]?s +[0-9]+  aten::(convolution|mkldnn_convolution|addmm|mm)'
        check "... and the all-reduce of its gradients" has "$s" 'gloo:all_reduce|c10d::allreduce_'
fi
# A PyTorch rank's allocations are made in C++: their frames are named as C++ writes them.
if [ "$kind" = torch ] && grep -q '^rank 0 of [0-9]*: \$ env .*LD_PRELOAD=[^ ]*libnpuprof-heap\.so' "$out"; then
        cxx_frames() {
                python3 - "$kept"/out/rank0_start*/memory_snapshot.json <<'PY'
import json, sys
names = {f["name"] for t in json.load(open(sys.argv[1]))["device_traces"] for e in t for f in e.get("frames", [])}
sys.exit(0 if any(n.startswith("at::") for n in names) and not any(n.startswith("_Z") for n in names) else 1)
PY
        }
        check "the snapshot's C++ frames are demangled (at::..., no _Z...)" cxx_frames
fi
chart=$(sed -n 's/^Chart: //p' <<<"$s" | head -n 1)
svg() { [ -n "$chart" ] && grep -q '<svg' "$chart"; }
check "the chart the analysis wrote exists (${chart:-none named})" svg

echo "demo: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
