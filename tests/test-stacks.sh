#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A rank that hangs writes its stacks when asked through its slot: the real npuprofd on a
# private socket, shm name and output root; a C rank (build/train-loop --hang-at) and a
# Python rank (npuprof.Monitor over the build's libnpuprof) that stop stepping, in
# hang_forever() and in stuck_in_collective(); tests/ask-stacks asks each through its slot
# as the daemon does, and reads the stacks directory every millisecond meanwhile, as any
# reader would: never a file cut short. Each file lies under prof_dir/stacks, named by rank,
# pid and request: the C rank's names hang_forever and main in order, the Python rank's its
# native frames and faulthandler's lines of stuck_in_collective and of a second thread.
#   tests/test-stacks.sh BUILD_DIR
# Ends with "stacks: N passed, N failed".
set -u
build=${1:?usage: tests/test-stacks.sh BUILD_DIR}
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl trainloop=$build/train-loop ask=$build/tests/ask-stacks
lib=$(cd "$build" && pwd)/libnpuprof.so
for b in "$npuprofd" "$npuprofctl" "$trainloop" "$ask" "$lib"; do
        [ -e "$b" ] || { echo "test-stacks: $b is not built" >&2; exit 2; }
done

. "$(dirname "$0")/lib.sh"
npf_harness stacks
wait_ms=20000
python=/usr/bin/python3
[ -x "$python" ] || python=python3

diag() {
        echo "daemon log (last lines):"
        tail -n 8 "$log" 2>/dev/null
        for f in "$dir"/rank*.out; do [ -e "$f" ] && { echo "$f:"; tail -n 8 "$f"; }; done
        [ -n "${stacks:-}" ] && [ -e "$stacks" ] && { echo "$stacks:"; head -n 60 "$stacks"; }
        return 0
}

ctl() { timeout 10 "$npuprofctl" --socket "$sock" --shm-name "$shm" "$@"; }

# A window far ahead: the configuration in force names the output directory, the output root.
start_daemon() {
        printf '{"start_step": 100000, "steps": 2}\n' >"$conf"
        "$npuprofd" --config "$conf" --shm-name "$shm" --socket "$sock" --output-root "$out" --analyze-jobs 0 \
                --poll-interval 100 --log stderr 2>>"$log" &
        dpid=$!
        all_pids+=("$dpid") test_pids+=("$dpid")
        wait_for ctl status >/dev/null 2>&1
}

# ask_rank WHO R PID N: ask rank R (process PID) for its stacks, as request N of its slot;
# the file's path in $stacks.
ask_rank() {
        local who=$1 r=$2 pid=$3 req=$4 rc
        stacks=$("$ask" --shm "$shm" --rank "$r" --timeout-ms 20000 2>>"$dir/ask.err")
        rc=$?
        check "asked through its slot, the $who answers; no reader saw a file cut short (exit $rc)" test "$rc" -eq 0
        check "... $stacks: under prof_dir/stacks, named by rank, pid and request" \
                test "$stacks" = "$out/stacks/rank${r}_pid${pid}_$req.txt" -a -s "$stacks"
        check "... and it is whole: its last line is the last one written" \
                test "$(tail -n 1 "$stacks")" = "end of the stacks of process $pid"
}

# in_order FILE WORDS...: each of WORDS is in FILE, each after the one before, from the line
# "thread PID " of the rank's main thread to the next thread.
in_order() {
        local file=$1 pid=$2
        shift 2
        awk -v pid="$pid" '
                $0 ~ "^thread " pid " " { on = 1; next }
                on && /^(thread |interpreter stacks|end of the stacks)/ { exit }
                on { print }' "$file" >"$dir/section"
        python3 - "$dir/section" "$@" <<'PY'
import sys
text, at = open(sys.argv[1]).read(), 0
for w in sys.argv[2:]:
    at = text.find(w, at)
    if at < 0:
        sys.exit(1)
    at += len(w)
PY
}

# Only the files the ranks wrote are in prof_dir/stacks: no temporary is left.
only_files() {
        [ "$(cd "$out/stacks" && ls -A | LC_ALL=C sort | tr '\n' ' ')" = "$* " ]
}

sanitizer_runtime() { ldd "$1" 2>/dev/null | awk '/lib(asan|ubsan|tsan)\.so/ { print $3; exit }'; }

t_c_rank() {
        local pid
        stacks=''
        start_daemon || { fail "the daemon did not start" "$(diag)"; return; }
        "$trainloop" --rank 0 --steps 100000 --step-ms 5 --busy 0 --hang-at 20 --shm-name "$shm" --backend host \
                >"$dir/rank0.out" 2>&1 &
        pid=$!
        all_pids+=("$pid") test_pids+=("$pid")
        eventually "the C rank hangs at step 20" grep -q 'hangs at step 20' "$dir/rank0.out"

        ask_rank "C rank" 0 "$pid" 1
        check "... it names the rank's main thread: pause, hang_forever, main, in that order" \
                in_order "$stacks" "$pid" " pause+0x" " hang_forever+0x" "[examples/train-loop.c:" " main+0x"
        check "... the writer, the stacks thread, is not among the threads it lists" \
                grep -q "^threads: [0-9]*, besides thread [0-9]* (npuprof-stacks), which writes this$" "$stacks"
        check "the rank hangs on, where it was, with no sanitizer report" \
                sh -c "kill -0 $pid && test \"\$(grep -c 'hangs at step' '$dir/rank0.out')\" = 1 &&
                       ! grep -qE 'Sanitizer|runtime error' '$dir/rank0.out'"

        ask_rank "C rank, asked again," 0 "$pid" 2
        check "... request 2's file names hang_forever too" grep -q ' hang_forever+0x' "$stacks"
        check "... it lies beside request 1's, and no temporary is left in prof_dir/stacks" \
                only_files "rank0_pid${pid}_1.txt" "rank0_pid${pid}_2.txt"
        npf_stop_daemon
}

t_python_rank() {
        local pid preload
        stacks=''
        preload=$(sanitizer_runtime "$lib")
        start_daemon || { fail "the daemon did not start" "$(diag)"; return; }
        # A sanitizer's library needs its runtime loaded first into the interpreter.
        LD_PRELOAD=$preload ASAN_OPTIONS=detect_leaks=0 NPUPROF_LIB=$lib PYTHONPATH=$npf_top/python \
                "$python" - "$shm" >"$dir/rank1.out" 2>&1 <<'PY' &
import sys
import threading
import npuprof


def stuck_in_collective():
    threading.Event().wait()


def worker_waits(ready):
    ready.set()
    threading.Event().wait()


ready = threading.Event()
threading.Thread(target=worker_waits, args=(ready,), name="worker", daemon=True).start()
ready.wait()
mon = npuprof.Monitor(rank=1, shm_name=sys.argv[1], backend="host")
for step in range(1, 21):
    mon.step(step)
print("hangs at step 20", flush=True)
stuck_in_collective()
PY
        pid=$!
        all_pids+=("$pid") test_pids+=("$pid")
        eventually "the Python rank hangs at step 20" grep -q 'hangs at step 20' "$dir/rank1.out"

        ask_rank "Python rank" 1 "$pid" 1
        check "... the interpreter's main thread's native frames" \
                in_order "$stacks" "$pid" "  #0 0x" "  #1 0x" " (/"
        check "... then faulthandler's stacks, after the native ones: stuck_in_collective, worker_waits" \
                python3 - "$stacks" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
native = text.find("\nthread ")
interp = text.find("\ninterpreter stacks (signal ")
sys.exit(0 if 0 < native < interp and re.search(r'File ".*", line \d+ in stuck_in_collective\n', text[interp:])
         and re.search(r'File ".*", line \d+ in worker_waits\n', text[interp:]) else 1)
PY
        check "the Python rank hangs on, where it was, with no sanitizer report" \
                sh -c "kill -0 $pid && ! grep -qE 'Sanitizer|runtime error' '$dir/rank1.out'"
        check "... no temporary is left in prof_dir/stacks" only_files "rank1_pid${pid}_1.txt"
        npf_stop_daemon
}

npf_run t_c_rank
npf_run t_python_rank

echo "stacks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
