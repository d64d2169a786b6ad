#!/usr/bin/env bash
# profile_memory on the host backend, for real: npuprofd publishes a window with
# profile_memory, build/train-loop runs with libnpuprof-heap.so preloaded, and the window's
# memory_snapshot.json must hold the loop's allocations of at least the minimum size, each
# alloc with its free, with call stacks, in the PyTorch snapshot layout.
#   tests/test-heap.sh BUILD_DIR
set -u
build=${1:?usage: tests/test-heap.sh BUILD_DIR}
abs=$(cd "$build" && pwd) || exit 1
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
# ASan and TSan replace malloc themselves; the tracker cannot be preloaded over them.
if ldd "$build/train-loop" 2>/dev/null | grep -qE 'libasan|libtsan'; then
        echo "test-heap: a sanitizer build replaces malloc as the heap tracker does; run it with the plain build"
        exit 77
fi
mkdir -p "$dir/out"
printf '{"start_step": 4, "steps": 3, "output_dir": "%s/out", "profile_memory": true, "backend": "host"}\n' "$dir" \
        >"$dir/profiler_config.json"
"$build/npuprofd" --config "$dir/profiler_config.json" --shm-name "$shm" --socket "$dir/sock" \
        --output-root "$dir/out" --log stderr 2>"$dir/daemon.log" &
daemon=$!
# Wait, bounded, until the daemon has published the window (generation 1).
published=no
for _ in $(seq 200); do
        gen=$("$build/npuprofctl" --socket "$dir/sock" --shm-name "$shm" status --json 2>/dev/null |
              python3 -c 'import json, sys; print(json.load(sys.stdin)["config"]["generation"])' 2>/dev/null)
        [ "${gen:-0}" -ge 1 ] 2>/dev/null && { published=yes; break; }
        sleep 0.05
done
check "the daemon published the window" test "$published" = yes

# Rank 0 with the tracker preloaded; rank 1 without it.
out0=$(NPUPROF_HEAP_MIN_BYTES=200000 LD_PRELOAD="$abs/libnpuprof-heap.so" \
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
if not {"segments", "device_traces"} <= set(s):
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

# A child forked inside the window that leaves through exit() (which flushes every stdio
# stream it inherited) must not write the parent's trace: trace.json stays valid, each of
# the window's steps once.
w2="$dir/out/rank2_start4_stop6"
NPUPROF_LIB="$abs/libnpuprof.so" PYTHONPATH=python /usr/bin/python3 - "$shm" <<'PY' >"$dir/fork.out" 2>&1
import os, sys
import npuprof
with npuprof.Monitor(rank=2, shm_name=sys.argv[1], backend="host") as m:
    for step in range(1, 10):
        m.step(step)
        if step == 5:
            pid = os.fork()
            if pid == 0:
                sys.exit(0)
            os.waitpid(pid, 0)
PY
fork_ok=$(python3 - "$w2/trace.json" <<'PY'
import json, sys
try:
    t = json.load(open(sys.argv[1]))
except Exception as e:
    print("trace.json does not parse: %s" % e); sys.exit()
steps = [e["name"] for e in t["traceEvents"] if e.get("ph") == "X"]
want = ["ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6"]
print("fine" if steps == want and t.get("complete") is True else "spans %s, complete %r" % (steps, t.get("complete")))
PY
)
check "a child forked in the window leaves the parent's trace alone ($fork_ok)" test "$fork_ok" = fine
[ "$fork_ok" = fine ] || sed 's/^/     | /' "$dir/fork.out"
counted=$(python3 -c 'import json, sys; o = json.load(open(sys.argv[1]))["otherData"]; print("%s: %s" % (o["hardware_counters"], o.get("hardware_counters_count")))' "$w2/trace.json" 2>/dev/null || echo "no trace.json")
case $counted in
True:*) check "the trace says what the hardware counters count ($counted)" \
                test "$counted" = "True: the stepping thread and threads it starts during the window" ;;
*)      check "the trace says no hardware counters ran ($counted)" test "${counted#False: nothing}" != "$counted" ;;
esac

# The tracker under threads, calloc, realloc and the rarer entry points, in a Python rank:
# bytearrays of 300000 bytes (large enough to come from malloc, resized through realloc)
# and direct calls through ctypes, which release the GIL, so two threads allocate at once.
w3="$dir/out/rank3_start4_stop6"
heap_py=$(NPUPROF_HEAP_MIN_BYTES=200000 LD_PRELOAD="$abs/libnpuprof-heap.so" PYTHONPATH=python NPUPROF_LIB="$abs/libnpuprof.so" \
        timeout 60 /usr/bin/python3 - "$shm" "$dir" <<'PY' 2>&1
import ctypes, errno, json, os, sys, threading, time
import npuprof
c = ctypes.CDLL(None, use_errno=True)
vp, sz = ctypes.c_void_p, ctypes.c_size_t
for name, res, args in (("malloc", vp, [sz]), ("calloc", vp, [sz, sz]), ("realloc", vp, [vp, sz]),
                        ("reallocarray", vp, [vp, sz, sz]), ("valloc", vp, [sz]), ("pvalloc", vp, [sz]),
                        ("aligned_alloc", vp, [sz, sz]), ("free", None, [vp])):
    f = getattr(c, name); f.restype = res; f.argtypes = args
problems = []
N = 40

def churn():
    for _ in range(N):
        b = bytearray(300000)
        b.extend(bytes(300000))
        p = c.calloc(1000, 300)
        q = c.realloc(p, 400000)
        c.free(q)
        del b

def hammer(stop):
    for _ in range(200):
        if stop.is_set():
            break
        for _ in range(10):
            c.free(c.malloc(300000))
        time.sleep(0.002)

stop_heap = c.npf_heap_stop
stop_heap.restype = ctypes.c_int; stop_heap.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
addrs, kept = {}, 0
with npuprof.Monitor(rank=3, shm_name=sys.argv[1], backend="host") as m:
    for step in range(1, 10):
        m.step(step)
        if step == 4:
            ts = [threading.Thread(target=churn) for _ in range(2)]
            [t.start() for t in ts]; [t.join() for t in ts]
            for f, args in ((c.valloc, (300000,)), (c.pvalloc, (300000,)), (c.aligned_alloc, (64, 300000))):
                p = f(*args)
                if not p:
                    problems.append("%s failed" % f.__name__)
                addrs[f.__name__] = p
                c.free(p)
            p = c.reallocarray(None, 1000, 300)
            q = c.reallocarray(p, 1000, 400)
            addrs["reallocarray"] = q
            c.free(q)
            ctypes.set_errno(0)
            if c.aligned_alloc(3, 300000) is not None or ctypes.get_errno() != errno.EINVAL:
                problems.append("aligned_alloc(3, n) did not fail with EINVAL")
            # A realloc that fails leaves the block where it was: still live at the end.
            kept = addrs["kept"] = c.malloc(300000)
            if c.realloc(kept, 1 << 62) is not None:
                problems.append("realloc(p, 2^62) succeeded")
        if step == 5:
            # fork() while two threads record: the child must neither hang nor record.
            stop = threading.Event()
            ts = [threading.Thread(target=hammer, args=(stop,)) for _ in range(2)]
            [t.start() for t in ts]
            hung = recorded = 0
            for _ in range(20):
                pid = os.fork()
                if pid == 0:
                    # Not recording here: the tracker has nothing to write.
                    c.free(c.malloc(300000))
                    r = stop_heap(("%s/child-%d.json" % (sys.argv[2], os.getpid())).encode(), ctypes.create_string_buffer(256))
                    os._exit(0 if r < 0 else 1)
                for _ in range(50):
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        recorded += os.waitstatus_to_exitcode(status) != 0
                        break
                    time.sleep(0.01)
                else:
                    hung += 1
                    os.kill(pid, 9); os.waitpid(pid, 0)
            stop.set(); [t.join() for t in ts]
            if hung:
                problems.append("%d of 20 children forked while recording hung" % hung)
            if recorded:
                problems.append("%d of 20 children forked while recording went on recording" % recorded)
c.free(kept)
print(json.dumps(addrs))
print("; ".join(problems) if problems else "fine")
PY
)
[ -n "$heap_py" ] || heap_py=$'{}\nno output: the Python rank timed out or crashed'
heap_ok=$(python3 - "$w3/memory_snapshot.json" "${heap_py%%$'\n'*}" <<'PY'
import json, sys
try:
    s = json.load(open(sys.argv[1]))
except Exception as e:
    print("no snapshot: %s" % e); sys.exit()
try:
    addrs = json.loads(sys.argv[2])
except ValueError:
    addrs = {}
problems, live, count, allocs = [], {}, {}, set()
for e in s["device_traces"][0]:
    a = e["addr"]
    if e["action"] == "alloc":
        if a in live:
            problems.append("alloc of a live address")
        live[a] = e["size"]
        count[e["size"]] = count.get(e["size"], 0) + 1
        allocs.add(a)
    elif e["action"] == "free_completed":
        if live.pop(a, None) != e["size"]:
            problems.append("a free without its alloc")
segs = {x["address"] for x in s["segments"]}
if set(live) != segs:
    problems.append("live at the end %d, segments %d" % (len(live), len(segs)))
if addrs.get("kept") not in segs:
    problems.append("the block whose realloc failed is not live")
for f in ("valloc", "pvalloc", "aligned_alloc", "reallocarray"):
    if addrs.get(f) not in allocs:
        problems.append("%s was not recorded" % f)
# 2 threads x 40: bytearray 300001 and its resize, calloc 300000 and its realloc to 400000;
# then valloc, pvalloc, aligned_alloc 300000, reallocarray 300000 and 400000; the kept block;
# the hammering threads' 300000s.
for size, want in ((300001, 80), (400000, 81), (300000, 80 + 4 + 1)):
    if count.get(size, 0) < want:
        problems.append("%d allocations of %d bytes, want at least %d" % (count.get(size, 0), size, want))
if s["npuprof"]["dropped"]:
    problems.append("%d dropped" % s["npuprof"]["dropped"])
print("; ".join(sorted(set(problems))) if problems else "fine")
PY
)
check "a Python rank's threads: every alloc with its free, a failed realloc frees nothing ($heap_ok)" \
        test "$heap_ok" = fine
check "valloc, pvalloc, reallocarray, aligned_alloc and fork under the tracker (${heap_py#*$'\n'})" \
        test "${heap_py#*$'\n'}" = fine
[ "$heap_ok" = fine ] || sed 's/^/     | /' <<<"$heap_py" | tail -5
echo "heap: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
