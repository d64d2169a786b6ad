#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Unmodified PyTorch jobs, as libkineto drives them: the real npuprofd serves libkineto's
# endpoint (a socket file in a private KINETO_IPC_SOCKET_DIR, and the abstract name in a
# private network namespace where one can be made), and build/kineto/fake-torch, built
# against the real libkineto from ../shared/testdata/kineto (tests/kineto/build.sh), polls
# it as a PyTorch job started with KINETO_USE_DAEMON=1 does (every second here, through
# KINETO_CONFIG's ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS). Each process is listed by
# npuprofctl status; an edit of the file gives each its window once; libkineto traces
# exactly the file's steps (its iterations, counted from 0) into the window directory; the
# daemon writes the window's manifest, records it and analyses it. Two processes with a
# rank filter; a window bounded by time; a process started before the daemon; the daemon
# restarted while a process polls; a libkineto that writes its trace under /tmp instead; a
# flood of hostile datagrams.
#   tests/test-kineto.sh BUILD_DIR
# Ends with "kineto: N passed, N failed"; exit 77 (skipped) where fake-torch cannot be built.
set -u
build=${1:?usage: tests/test-kineto.sh BUILD_DIR}
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl
top=$(cd "$(dirname "$0")/.." && pwd)
fake=$top/build/kineto/fake-torch
for b in "$npuprofd" "$npuprofctl"; do
        [ -e "$b" ] || { echo "test-kineto: $b is not built" >&2; exit 2; }
done
# libkineto is third-party C++: built once, outside the sanitizer builds, and not instrumented.
"$top/tests/kineto/build.sh" "${KINETO_SRC:-$top/../shared/testdata/kineto}" "$top/build/kineto"
rc=$?
[ "$rc" -eq 77 ] && exit 77
[ "$rc" -eq 0 ] || { echo "test-kineto: cannot build fake-torch" >&2; exit 2; }

. "$(dirname "$0")/lib.sh"
npf_harness kineto
wait_ms=30000
python=/usr/bin/python3
[ -x "$python" ] || python=python3
# The processes under test are not ours to instrument: no sanitizer runtime is preloaded into them.
unset LD_PRELOAD

diag() {
        echo "daemon log (last lines):"
        tail -n 12 "$log" 2>/dev/null
        for f in "$dir"/fake*.err; do [ -e "$f" ] && { echo "$f:"; grep -v '^\s*$' "$f" | tail -n 6; }; done
        for f in "$out"/job/*/manifest.json; do [ -e "$f" ] && { echo "$f:"; cat "$f"; echo; }; done
        echo "status kineto:"
        ctl status --json 2>/dev/null | "$python" -c 'import json,sys; print(json.dumps(json.load(sys.stdin).get("kineto"), indent=1)[:3000])'
        return 0
}

ctl() { timeout 10 "$npuprofctl" --socket "$sock" --shm-name "$shm" "$@"; }
# sj EXPR: the status reply, as o; K: its kineto part, C: its clients.
sj() {
        npf_json_holds 'import json, sys; o = json.loads(sys.argv[2]); K = o.get("kineto") or {}; C = K.get("clients") or []; W = o["windows"]["recent"]' "$1" ctl status --json
}

# start_daemon [ARGS...]: the daemon on this test's socket directory, analysing windows.
start_daemon() {
        "$npuprofd" --config "$conf" --shm-name "$shm" --socket "$sock" --output-root "$out" \
                --kineto-socket-dir "$dir/sock" --poll-interval 100 --analyze-memory 0 --log stderr "$@" 2>>"$log" &
        dpid=$!
        all_pids+=("$dpid") test_pids+=("$dpid")
        wait_for ctl status >/dev/null 2>&1
}

# fake NAME [ENV=V...] -- [ARGS...]: fake-torch polling this test's socket directory every second.
fake() {
        local name=$1 envs=()
        shift
        while [ "$#" -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
        [ "${1:-}" = -- ] && shift
        printf 'ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n' >"$dir/kineto.conf"
        env KINETO_USE_DAEMON=1 KINETO_CONFIG="$dir/kineto.conf" KINETO_IPC_SOCKET_DIR="$dir/sock" \
                KINETO_ONDEMAND_TRACE_DIR="$out" "${envs[@]}" "$fake" "$@" >"$dir/$name.out" 2>"$dir/$name.err" &
        fpid=$!
        all_pids+=("$fpid") test_pids+=("$fpid")
}

# window_dir EXPR: the directory of the newest window of the list for which EXPR (Python, of w) holds.
window_dir() {
        ctl status --json | "$python" -c 'import json, sys
W = json.load(sys.stdin)["windows"]["recent"]
print([w for w in W if eval(sys.argv[1])][0]["output"])' "$1"
}

# steps_in DIR PID: the ProfilerStep numbers of the trace libkineto wrote for PID in DIR, sorted.
steps_in() {
        "$python" - "$1" "$2" <<'EOF'
import glob, json, sys
files = glob.glob("%s/*_%s.pt.trace.json" % (sys.argv[1], sys.argv[2]))
ev = json.load(open(files[0]))["traceEvents"] if len(files) == 1 else []
print(sorted(int(e["name"].split("#")[1]) for e in ev if e.get("name", "").startswith("ProfilerStep#")))
EOF
}

# --- one process, started after the daemon: listed, given its window once, traced exactly -------
t_one() {
        printf '{"output_dir": "%s/job"}\n' "$out" >"$conf"
        start_daemon
        fake a RANK=3 -- --steps 400 --step-ms 20
        local pid=$fpid
        check "the socket directory, missing, is made as /tmp is: writable by all, sticky" \
                test "$(stat -c %a "$dir/sock")" = 1777 -a -S "$dir/sock/dynolog"
        eventually "a libkineto process polls: listed with its pid, its pid here, its rank and job id" \
                sj "len(C) == 1 and C[0]['pid'] == $pid and C[0]['host_pid'] == $pid and C[0]['rank'] == 3 and C[0]['jobid'] == 0 and C[0]['pids'][0] == $pid and C[0]['polls'] >= 1"
        check "... profiling off: nothing given" sj "C[0]['windows_given'] == 0 and C[0]['window'] is None"
        # A window some steps ahead of where the process is: it asks every second, at 20 ms a step.
        printf '{"output_dir": "%s/job", "start_step": 250, "steps": 5}\n' "$out" >"$conf"
        eventually "an edit: the window at steps 250..254 is done, recorded with the process's rank and pid" \
                sj "any(w['rank'] == 3 and w['pid'] == $pid and w['start_step'] == 250 and w['stop_step'] == 254 and w['outcome'] == 'done' for w in W)"
        local wdir
        wdir=$(window_dir 'w["start_step"] == 250')
        check "... its trace holds exactly libkineto's iterations 250 to 254 (ProfilerStep#250..#254)" \
                test "$(steps_in "$wdir" "$pid")" = "[250, 251, 252, 253, 254]"
        check "... its manifest: complete, backend kineto, rank 3, steps 250..254, the trace listed" \
                "$python" -c 'import json,sys; m=json.load(open(sys.argv[1]+"/manifest.json")); sys.exit(0 if m["status"] == "complete" and m["backend"] == "kineto" and m["rank"] == 3 and m["window"]["start_step"] == 250 and m["window"]["stop_step"] == 254 and m["window"]["warmup"] == 0 and any(f["name"].endswith("_%s.pt.trace.json" % sys.argv[2]) for f in m["files"]) else 1)' "$wdir" "$pid"
        eventually "... and it is analysed: the analysis is done, its report in the window directory" \
                sj "[w for w in W if w['start_step'] == 250][0]['analysis']['state'] == 'done'"
        check "... given once, traced once" \
                sj "C[0]['windows_given'] == 1 and K['counts']['given'] == 1 and K['counts']['traces'] == 1 and C[0]['window'] is None"
        check "metrics: 1 client, 1 window given, 1 traced, 0 lost" \
                test "$(ctl metrics | awk '$1 ~ /^npuprof_kineto_(clients|windows_total)/ { printf "%s=%s ", $1, $2 }')" = 'npuprof_kineto_clients=1 npuprof_kineto_windows_total{outcome="given"}=1 npuprof_kineto_windows_total{outcome="traced"}=1 npuprof_kineto_windows_total{outcome="lost"}=0 '
        check "npuprofctl status says it in words: the process, its rank and its job" \
                grep -q "^  pid $pid  rank 3  job 0  last poll" <(ctl status)
        wait "$fpid"
        check "the process ran to its end (exit 0)" test "$?" -eq 0
        eventually "... and the socket libkineto left in the directory is removed once it is gone" \
                sh -c "! ls '$dir/sock' | grep -q dynoconfigclient"
        npf_stop_daemon "one process"
}

# --- two processes, a rank filter: only the named rank traces ----------------------------------
t_filter() {
        printf '{"output_dir": "%s/job"}\n' "$out" >"$conf"
        start_daemon
        fake r0 RANK=0 -- --steps 400 --step-ms 20
        local p0=$fpid
        fake r1 RANK=1 -- --steps 400 --step-ms 20
        local p1=$fpid
        eventually "two processes listed, ranks 0 and 1" sj "sorted(c['rank'] for c in C) == [0, 1]"
        printf '{"output_dir": "%s/job", "start_step": 250, "steps": 3, "ranks": [1]}\n' "$out" >"$conf"
        eventually "ranks [1]: rank 1's window is done; rank 0's is filtered" \
                sj "any(w['rank'] == 1 and w['pid'] == $p1 and w['outcome'] == 'done' and w['start_step'] == 250 for w in W) and any(w['rank'] == 0 and w['pid'] == $p0 and w['outcome'] == 'filtered' for w in W)"
        local wdir
        wdir=$(window_dir 'w["outcome"] == "done"')
        local got
        got=$(steps_in "$wdir" "$p1")
        check "... rank 1 traced steps 250..252 exactly ($got)" test "$got" = "[250, 251, 252]"
        check "... and rank 0 wrote no trace anywhere under the output root" \
                test -z "$(find "$out" -name "*_$p0.pt.trace.json")"
        npf_stop_daemon "two processes"
}

# --- a window bounded by time: the same moment for every process ---------------------------------
t_time() {
        printf '{"output_dir": "%s/job"}\n' "$out" >"$conf"
        start_daemon
        fake a RANK=0 -- --steps 1500 --step-ms 20
        local pid=$fpid
        eventually "a process listed" sj "len(C) == 1"
        printf '{"output_dir": "%s/job", "start_step": "next", "duration_ms": 500}\n' "$out" >"$conf"
        eventually "a window of 500 ms: done" sj "any(w['outcome'] == 'done' and w['pid'] == $pid and w['stop_step'] == -1 for w in W)"
        local wdir n
        wdir=$(window_dir 'w["outcome"] == "done"')
        n=$(steps_in "$wdir" "$pid" | "$python" -c 'import sys; print(len(eval(sys.stdin.read())))')
        check "... its trace holds the iterations of 500 ms at 20 ms a step (18 to 25 whole ones: $n)" \
                test "$n" -ge 18 -a "$n" -le 25
        check "... its directory names the moment it started, the same for every node ($wdir)" \
                sh -c "case '$wdir' in *_[0-9a-f]*_at1[0-9]*_for500ms) exit 0;; *) exit 1;; esac"
        npf_stop_daemon "a window bounded by time"
}

# --- started before the daemon; the daemon restarted while a window it gave is armed ------------
t_restart() {
        printf '{"output_dir": "%s/job"}\n' "$out" >"$conf"
        mkdir -p "$dir/sock"
        local t0 s1 s2 wdir
        t0=$(now_ms)
        fake a RANK=5 -- --steps 3000 --step-ms 20
        local pid=$fpid
        sleep 1.5
        start_daemon
        eventually "a process started before the daemon: listed once the daemon is up" sj "len(C) == 1 and C[0]['pid'] == $pid"
        # At 20 ms a step it is at most at this step now (sleeps only run late): 3 s ahead of it.
        s1=$(( ($(now_ms) - t0) / 20 + 150 ))
        printf '{"output_dir": "%s/job", "start_step": %d, "steps": 4}\n' "$out" "$s1" >"$conf"
        eventually "a window at step $s1 is given to it" sj "C and C[0]['window'] and C[0]['window']['state'] == 'armed'"
        npf_stop_daemon "before the restart"
        start_daemon
        eventually "the daemon restarted: the process is listed again" sj "len(C) == 1 and C[0]['pid'] == $pid"
        eventually "... its window, given by the daemon before, lands and is recorded done by this one" \
                sj "any(w['pid'] == $pid and w['start_step'] == $s1 and w['outcome'] == 'done' for w in W)"
        check "... and it was not given again: this daemon gave none" sj "K['counts']['given'] == 0 and C[0]['windows_given'] == 1"
        wdir=$(window_dir "w['start_step'] == $s1")
        check "... exactly steps $s1..$((s1 + 3)), one trace in its directory" \
                test "$(steps_in "$wdir" "$pid")" = "[$s1, $((s1 + 1)), $((s1 + 2)), $((s1 + 3))]"
        s2=$(( ($(now_ms) - t0) / 20 + 150 ))
        printf '{"output_dir": "%s/job", "start_step": %d, "steps": 2}\n' "$out" "$s2" >"$conf"
        eventually "an edit after the restart is given and traced: steps $s2..$((s2 + 1)) done" \
                sj "any(w['pid'] == $pid and w['start_step'] == $s2 and w['outcome'] == 'done' for w in W) and K['counts']['given'] == 1"
        npf_stop_daemon "after the restart"
}

# --- a libkineto that keeps on-demand traces under /tmp: fetched, and the fix said ----------------
t_tmp_only() {
        printf '{"output_dir": "%s/job"}\n' "$out" >"$conf"
        start_daemon
        # With another KINETO_ONDEMAND_TRACE_DIR this libkineto refuses the output root and writes to /tmp.
        fake a RANK=0 KINETO_ONDEMAND_TRACE_DIR=/var/empty/npuprof -- --steps 400 --step-ms 20
        local pid=$fpid
        eventually "a process listed" sj "len(C) == 1"
        printf '{"output_dir": "%s/job", "start_step": 250, "steps": 3}\n' "$out" >"$conf"
        eventually "its trace, written to /tmp/libkineto_activities_$pid.json, is fetched: the window is done" \
                sj "any(w['pid'] == $pid and w['outcome'] == 'done' and w['start_step'] == 250 for w in W)"
        local wdir
        wdir=$(window_dir 'w["outcome"] == "done"')
        check "... into the window directory, steps 250..252" test "$(steps_in "$wdir" "$pid")" = "[250, 251, 252]"
        check "... and the log names the fix: KINETO_ONDEMAND_TRACE_DIR" grep -q "KINETO_ONDEMAND_TRACE_DIR" "$log"
        rm -f "/tmp/libkineto_activities_$pid.json"
        npf_stop_daemon "a trace under /tmp"
}

# --- a process that ends inside its window: lost, with the reason, at once ------------------------
t_lost() {
        printf '{"output_dir": "%s/job"}\n' "$out" >"$conf"
        start_daemon
        fake a RANK=2 -- --steps 400 --step-ms 20 --exit-at-step 252
        local pid=$fpid
        eventually "a process listed" sj "len(C) == 1"
        printf '{"output_dir": "%s/job", "start_step": 250, "steps": 5}\n' "$out" >"$conf"
        eventually "it ends at step 252, inside its window 250..254: the window is lost, and why" \
                sj "any(w['pid'] == $pid and w['outcome'] == 'lost' and 'the process ended' in (w['message'] or '') for w in W) and not C"
        local wdir
        wdir=$(window_dir 'w["outcome"] == "lost"')
        check "... its directory has a manifest that says it is incomplete, and why" \
                "$python" -c 'import json,sys; m=json.load(open(sys.argv[1]+"/manifest.json")); sys.exit(0 if m["status"] == "incomplete" and "the process ended" in m["message"] else 1)' "$wdir"
        npf_stop_daemon "a process that ends inside its window"
}

# --- hostile datagrams: counted, answered never with a window, the daemon unmoved --------------
t_hostile() {
        printf '{"output_dir": "%s/job"}\n' "$out" >"$conf"
        start_daemon
        "$python" - "$dir/sock/dynolog" "$dir/hostile" <<'EOF'
import os, socket, struct, sys
to, me = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(me)
def msg(t, p, size=None):
    return struct.pack("<Q32s", len(p) if size is None else size, t) + p
req = struct.pack("<iiq", 2, 1, 0) + struct.pack("<i", os.getpid())
bad = [b"", b"x" * 39, msg(b"req", req, 999), msg(b"req", req[:12]), msg(b"req", struct.pack("<iiq", 2, -1, 0)),
       msg(b"req", struct.pack("<iiq", 2, 100000, 0)), msg(b"r" * 32, req), msg(b"req", b"\0" * 5000),
       msg(b"req", struct.pack("<iiq", 2, 1, 0) + struct.pack("<i", -5))]
for i in range(2000):
    s.sendto(bad[i % len(bad)], to)
s.sendto(msg(b"what", b""), to)
s.settimeout(5)
s.sendto(msg(b"req", req), to)
size, t = struct.unpack("<Q32s", s.recv(65536)[:40])
sys.exit(0 if t.rstrip(b"\0") == b"req" and size == 0 else 1)
EOF
        check "after 2,000 malformed datagrams, a good request still gets its (empty) answer" test "$?" -eq 0
        eventually "... every malformed one counted, the unknown type apart, the cause of the last said" \
                sj "K['counts']['malformed'] >= 1700 and K['counts']['unknown_types'] >= 1 and K['last_malformed']"
        # A client that never reads its answers: it costs the daemon nothing.
        "$python" - "$dir/sock/dynolog" "$dir/deaf" <<'EOF'
import os, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[2])
p = struct.pack("<iiq", 2, 1, 7) + struct.pack("<i", os.getpid())
for i in range(5000):
    try:
        s.sendto(struct.pack("<Q32s", len(p), b"req") + p, sys.argv[1])
    except BlockingIOError:
        pass
EOF
        # A request the daemon reads late (here: it was stopped) is not answered: libkineto would take
        # that answer at its next poll, and every answer after it one poll late.
        "$python" - "$dir/sock/dynolog" "$dir/stale" "$dpid" <<'EOF'
import os, signal, socket, struct, sys, time
to, me, daemon = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(me)
p = struct.pack("<iiq", 2, 1, 9) + struct.pack("<i", os.getpid())
req = struct.pack("<Q32s", len(p), b"req") + p
os.kill(daemon, signal.SIGSTOP)
s.sendto(req, to)
time.sleep(0.3)
os.kill(daemon, signal.SIGCONT)
s.settimeout(1.0)
try:
    s.recv(65536)
    sys.exit(1)                 # answered late
except socket.timeout:
    pass
s.sendto(req, to)
s.recv(65536)                   # the next poll: answered, in step
s.settimeout(0.5)
try:
    s.recv(65536)
    sys.exit(2)                 # a second answer
except socket.timeout:
    sys.exit(0)
EOF
        check "a request the daemon reads 300 ms late is not answered; the next one is, once" test "$?" -eq 0
        check "... and counted" sj "K['counts']['unanswered_late'] >= 1"
        check "a client that sends 5,000 requests and reads none: its answers dropped and counted, status answered" \
                sj "K['counts']['requests'] >= 5001 and K['counts']['send_failed'] >= 4000"
        npf_stop_daemon "hostile datagrams"
}

# --- the abstract name, in a network namespace of the test's own ------------------------------
t_abstract() {
        if ! unshare --net true 2>/dev/null; then
                skip "the abstract name: no network namespace can be made here"
                return
        fi
        printf '{"output_dir": "%s/job"}\n' "$out" >"$conf"
        printf 'ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n' >"$dir/kineto.conf"
        # Daemon and process in one private network namespace: "\0dynolog\0" is theirs alone.
        unshare --net env -u KINETO_IPC_SOCKET_DIR sh -c '
                "$1" --config "$2" --shm-name "$3" --socket "$4" --output-root "$5" --poll-interval 100 \
                        --analyze-jobs 0 --log stderr 2>>"$6" &
                d=$!
                sleep 1
                KINETO_USE_DAEMON=1 KINETO_CONFIG="$7" "$8" --steps 150 --step-ms 20 >/dev/null 2>&1 &
                sleep 2.5
                "$9" --socket "$4" --shm-name "$3" status --json >"$5/../abstract.json"
                kill $d; wait $d' sh "$npuprofd" "$conf" "$shm" "$sock" "$out" "$log" "$dir/kineto.conf" "$fake" \
                "$npuprofctl"
        check "the abstract name \"\\0dynolog\\0\": the process polls it and is listed" \
                "$python" -c 'import json,sys; K=json.load(open(sys.argv[1]))["kineto"]; sys.exit(0 if K["endpoint"].startswith("@dynolog") and len(K["clients"]) == 1 and K["clients"][0]["polls"] >= 1 else 1)' "$dir/abstract.json"
}

npf_run t_one
npf_run t_filter
npf_run t_time
npf_run t_restart
npf_run t_tmp_only
npf_run t_lost
npf_run t_hostile
npf_run t_abstract

echo "kineto: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
