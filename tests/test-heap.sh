#!/usr/bin/env bash
# profile_memory on the host backend, for real: npuprofd publishes a window with
# profile_memory, build/train-loop runs with libnpuprof-heap.so preloaded, and the window's
# memory_snapshot.json must hold the loop's allocations of at least the minimum size, each
# alloc with its free, with call stacks, in the PyTorch snapshot layout.
#   tests/test-heap.sh BUILD_DIR
set -u
build=${1:?usage: tests/test-heap.sh BUILD_DIR}
passed=0 failed=0
dir=$(mktemp -d /tmp/npftest-heap.XXXXXX)
shm="npftest-heap-$$"
daemon=
cleanup() {
        [ -n "$daemon" ] && kill -9 "$daemon" 2>/dev/null
        wait 2>/dev/null
        rm -f "/dev/shm/$shm.ctl" "/dev/shm/$shm.ranks"
        rm -rf "$dir"
}
trap cleanup EXIT
ok()   { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/     | /' <<<"$2"; return 0; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else fail "$name"; fi; }

for f in npuprofd train-loop libnpuprof-heap.so; do
        [ -e "$build/$f" ] || { echo "test-heap: $build/$f is not built"; exit 1; }
done
# ASan replaces malloc itself; the tracker cannot be preloaded over it.
if ldd "$build/train-loop" 2>/dev/null | grep -q libasan; then
        echo "test-heap: an ASan build replaces malloc as the heap tracker does; run it with the plain build"
        exit 77
fi
mkdir -p "$dir/out"
printf '{"start_step": 4, "steps": 3, "output_dir": "%s/out", "profile_memory": true, "backend": "host"}\n' "$dir" \
        >"$dir/profiler_config.json"
"$build/npuprofd" --config "$dir/profiler_config.json" --shm-name "$shm" --socket "$dir/sock" \
        --output-root "$dir/out" --log stderr 2>"$dir/daemon.log" &
daemon=$!
for _ in $(seq 100); do [ -e "/dev/shm/$shm.ctl" ] && break; sleep 0.05; done
sleep 0.2

# Rank 0 with the tracker preloaded; rank 1 without it.
out0=$(NPUPROF_HEAP_MIN_BYTES=200000 LD_PRELOAD="$PWD/$build/libnpuprof-heap.so" \
        "$build/train-loop" --rank 0 --steps 9 --step-ms 4 --shm-name "$shm" 2>&1)
out1=$("$build/train-loop" --rank 1 --steps 9 --step-ms 4 --shm-name "$shm" 2>&1)
w0="$dir/out/rank0_start4_stop6" w1="$dir/out/rank1_start4_stop6"
check "rank 0's window is done" grep -q "window done" <<<"$out0"
check "rank 0 wrote memory_snapshot.json" test -s "$w0/memory_snapshot.json"
check "the manifest lists it with its size" python3 - "$w0" <<'PY'
import json, os, sys
m = json.load(open(os.path.join(sys.argv[1], "manifest.json")))
f = {x["name"]: x["size"] for x in m["files"]}
sys.exit(0 if f.get("memory_snapshot.json") == os.path.getsize(os.path.join(sys.argv[1], "memory_snapshot.json")) else 1)
PY
result=$(python3 - "$w0/memory_snapshot.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
t = s["device_traces"][0]
allocs = [e for e in t if e["action"] == "alloc"]
frees = [e for e in t if e["action"] == "free_completed"]
problems = []
if set(s) < {"segments", "device_traces"}:
    problems.append("layout: %s" % sorted(s))
# train-loop allocates 512 KiB to 2 MiB a step: three steps, each one alloc and its free.
if len(allocs) < 3:
    problems.append("%d allocations recorded, want at least 3" % len(allocs))
if any(e["size"] < 200000 for e in allocs):
    problems.append("an allocation under the minimum size was recorded")
if sorted(e["addr"] for e in frees) != sorted(e["addr"] for e in allocs if e["addr"] in {f["addr"] for f in frees}) or len(frees) < 3:
    problems.append("frees do not match allocations: %d allocs, %d frees" % (len(allocs), len(frees)))
if not all(any(fr["name"] == "main" for fr in e["frames"]) for e in allocs):
    problems.append("a stack does not reach main")
if any(e["action"] == "segment_alloc" for e in t) is False:
    problems.append("no segment_alloc: not the snapshot layout")
if s["npuprof"]["min_bytes"] != 200000:
    problems.append("min_bytes %r" % s["npuprof"]["min_bytes"])
print("; ".join(problems) if problems else "fine")
PY
)
check "allocations of at least the minimum, each freed, with stacks to main ($result)" test "$result" = fine
check "rank 1 (no preload) has no snapshot" test ! -e "$w1/memory_snapshot.json"
check "rank 1's trace says how to get one" grep -q 'LD_PRELOAD=libnpuprof-heap.so' "$w1/trace.json"
check "rank 1's window is still done" grep -q "window done" <<<"$out1"
# Outside a window the tracker records nothing: the steps before 4 and after 6 left no events.
steps_ok=$(python3 - "$w0/memory_snapshot.json" "$w0/trace.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); t = json.load(open(sys.argv[2]))
spans = [e for e in t["traceEvents"] if e.get("ph") == "X"]
lo = min(e["ts"] for e in spans); hi = max(e["ts"] + e["dur"] for e in spans)
ev = [e["time_us"] for e in s["device_traces"][0]]
# the two clocks differ (realtime against monotonic): compare spans of time, not instants
print("fine" if ev and (max(ev) - min(ev)) <= (hi - lo) + 1000 else "events outside the window: %.0f us against %.0f us" % (max(ev) - min(ev), hi - lo))
PY
)
check "events only during the window ($steps_ok)" test "$steps_ok" = fine
echo "heap: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
