#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# npuprofctl top, and the step times of status and ranks. The real npuprofd on a private
# config, segment and socket with three real train-loop ranks stepping at 5, 10 and 20 ms:
# top's rows (every rank, the ranks furthest behind first, a STEP TIME column), status and
# ranks with theirs; top against a daemon that is not there (said at each refresh, the
# segment still shown, exit 3). Then a stand-in daemon that answers `status` with replies
# of every shape: the step times, slowdown, stalls and message shown as they are given,
# "-" where a daemon from before gives none, nothing that crashes on a broken reply, a
# daemon that never answers left at once on SIGINT and SIGTERM, and, on a terminal, the
# rows of 1,024 ranks cut to the terminal's lines.
#   tests/test-top.sh BUILD_DIR
# Ends with "top: N passed, N failed".
set -u
build=${1:?usage: tests/test-top.sh BUILD_DIR}
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl trainloop=$build/train-loop
for b in "$npuprofd" "$npuprofctl" "$trainloop"; do
        [ -x "$b" ] || { echo "test-top: $b is not built" >&2; exit 2; }
done
command -v python3 >/dev/null || { echo "test-top: python3 is missing"; exit 77; }

. "$(dirname "$0")/lib.sh"
npf_harness top
wait_ms=10000

diag() {
        echo "status: $(timeout 10 "$npuprofctl" --socket "$sock" --shm-name "$shm" status --json 2>&1 | head -c 3000)"
        echo "daemon log (last lines):"
        tail -n 8 "$log" 2>/dev/null
}

ctl() { timeout 10 "$npuprofctl" --socket "$sock" --shm-name "$shm" "$@"; }

py_prelude='
import json, sys
o = json.loads(sys.argv[2])
def R(n):
    return next((x for x in (o.get("ranks") or []) if x.get("rank") == n), None)
'
js() { npf_json_holds "$py_prelude" "$1" ctl status --json; }

# top_holds FILE EXPR: Python EXPR holds of top's output in FILE: `frames`, each a list of
# lines; rows(f), the rank rows of frame f as dicts (rank, pid, step, time, lag, state, rest);
# head(f), its lines before the table.
top_holds() {
        python3 - "$1" "$2" <<'EOF'
import re, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
frames = [f.split("\n") for f in text.rstrip("\n").split("\n\n")]
ROW = re.compile(r"^  +(\S+) +(\S+) +(\S+) +(\S+) +(\S+)  (\S+)(.*)$")
def table_at(f):
    return next((i for i, l in enumerate(f) if re.match(r"^ +RANK +PID +STEP +STEP TIME +LAG  STATE$", l)), len(f))
def rows(f):
    out = []
    for l in f[table_at(f) + 1:]:
        m = ROW.match(l)
        if not m or l.lstrip().startswith("("):
            continue
        k = dict(zip(("rank", "pid", "step", "time", "lag", "state", "rest"), m.groups()))
        for n in ("rank", "pid", "step", "lag"):
            k[n] = int(k[n]) if re.fullmatch(r"-?\d+", k[n]) else None
        out.append(k)
    return out
def head(f):
    return f[:table_at(f)]
def ms(cell):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s)", cell)
    return None if not m else float(m.group(1)) * (1000 if m.group(2) == "s" else 1)
ok = eval(sys.argv[2])
if not ok:
    print(text[-3000:])
sys.exit(0 if ok else 1)
EOF
}

# --- the real daemon, three real ranks ----------------------------------------------------

dir=$tmp/real
mkdir -p "$dir/out"
conf=$dir/profiler_config.json shm=npftest-top-$$-real sock=$dir/npuprofd.sock log=$dir/daemon.log
echo '{}' >"$conf"
"$npuprofd" --config "$conf" --shm-name "$shm" --socket "$sock" --output-root "$dir/out" --analyze-jobs 0 \
        --poll-interval 100 --log stderr 2>>"$log" &
dpid=$!
all_pids+=("$dpid")
if ! wait_for ctl status >/dev/null 2>&1; then
        fail "the daemon starts" "$(diag)"
        echo "top: $passed passed, $failed failed"
        exit 1
fi
pids=()
for r in 0 1 2; do
        "$trainloop" --rank "$r" --steps 1000000 --step-ms $((5 << r)) --busy 0 --shm-name "$shm" --backend host \
                >"$dir/rank$r.out" 2>&1 </dev/null &
        pids+=("$!")
        all_pids+=("$!")
done
eventually "three ranks attached, rank 2 (20 ms a step) past step 10" \
        js "len(o['ranks']) == 3 and (R(2)['step'] or 0) >= 10 and (R(0)['step'] or 0) >= 30"

# Step times are the daemon's (ranks[].step_time_ms): where it gives them, top shows them.
if js "all('step_time_ms' in r for r in o['ranks'])"; then
        have_times=yes
        eventually "the daemon gives a step time for every rank" \
                js "all(isinstance(r.get('step_time_ms'), (int, float)) for r in o['ranks'])"
else
        have_times=''
        echo "# this npuprofd gives no step times (ranks[].step_time_ms): top and status must show -"
fi

out=$dir/top.out
ctl top -n 2 --interval 0.2 >"$out" 2>"$dir/top.err"
rc=$?
check "top -n 2 --interval 0.2, not on a terminal: exit 0" test "$rc" -eq 0
check "top: two refreshes, a blank line between them, no terminal sequence" \
        top_holds "$out" 'len(frames) == 2 and "\x1b" not in text'
check "top: each refresh names the daemon, the configuration and the progress" \
        top_holds "$out" "all(f[0].startswith('npuprofd: pid $dpid, up ') and any(l.startswith('config:   generation 1, file valid; window none') for l in f) and any(l.startswith('progress: step time ') for l in f) for f in frames)"
check "top: each refresh has the STEP TIME and LAG columns and a row for every rank, with its pid" \
        top_holds "$out" "all(sorted((r['rank'], r['pid']) for r in rows(f)) == [(0, ${pids[0]}), (1, ${pids[1]}), (2, ${pids[2]})] for f in frames)"
check "top: the ranks furthest behind first: 2 (20 ms a step), 1 (10 ms), then 0 (5 ms) with lag 0" \
        top_holds "$out" "all([r['rank'] for r in rows(f)] == [2, 1, 0] and rows(f)[0]['lag'] > rows(f)[1]['lag'] > rows(f)[2]['lag'] == 0 for f in frames)"
check "top: the lag is the steps behind the fastest" \
        top_holds "$out" "all(r['lag'] == max(x['step'] for x in rows(f)) - r['step'] for f in frames for r in rows(f))"
check "top: the ranks: line gives the range of steps" \
        top_holds "$out" "all(any(l == 'ranks:    3 attached; steps %d..%d' % (min(r['step'] for r in rows(f)), max(r['step'] for r in rows(f))) for l in head(f)) for f in frames)"
if [ -n "$have_times" ]; then
        check "top: STEP TIME is each rank's step time: rank 0 about 5 ms, rank 2 about 20 ms" \
                top_holds "$out" "all(ms(r['time']) is not None for f in frames for r in rows(f)) and all(3 <= ms(r['time']) <= 40 for r in rows(frames[-1]) if r['rank'] == 0) and all(15 <= ms(r['time']) <= 80 for r in rows(frames[-1]) if r['rank'] == 2)"
else
        check "top: STEP TIME is - for every rank (no step times from this daemon)" \
                top_holds "$out" "all(r['time'] == '-' for f in frames for r in rows(f)) and all('progress: step time -' in f for f in frames)"
fi

text=$(ctl status)
check "status: the rank table has a STEP TIME column" \
        grep -Eq '^ +RANK +PID +STEP +STATE +STEP TIME +HEARTBEAT +WINDOW +GEN$' <<<"$text"
time_re='-' prose_re='-'
[ -n "$have_times" ] && time_re='[0-9.]+m?s' prose_re='[0-9.]+ m?s'
check "status: every rank's row has its step time ($time_re)" \
        test "$(grep -Ec "^ +[0-2] +(${pids[0]}|${pids[1]}|${pids[2]}) +[0-9]+ +idle +$time_re +" <<<"$text")" -eq 3
check "status: the job's progress under the table" grep -Eq "^progress: step time ($prose_re|-)$" <<<"$text"
text=$(ctl ranks)
check "ranks: the same columns and rows" \
        test "$(grep -Ec "^ +[0-2] +(${pids[0]}|${pids[1]}|${pids[2]}) +[0-9]+ +idle +$time_re +" <<<"$text")" -eq 3
# The daemon's ranks reply carries the job's progress or not: ranks shows it when it does.
if npf_json_holds "$py_prelude" "'progress' in o" ctl ranks --json; then
        check "ranks: the job's progress under the table" grep -q '^progress: step time ' <<<"$text"
else
        check "ranks: no progress line, as the daemon's reply to ranks has none" \
                bash -c '! grep -q "^progress:" <<<"$1"' _ "$text"
fi

# A daemon that is not there: said at each refresh, the segment read directly; exit 3.
out=$dir/down.out
timeout 10 "$npuprofctl" --socket "$dir/absent.sock" --shm-name "$shm" top -n 2 --interval 0.1 >"$out" 2>&1
rc=$?
check "top, no daemon: exit 3" test "$rc" -eq 3
check "top, no daemon: each refresh says it is not reachable, and shows the segment's ranks" \
        top_holds "$out" "len(frames) == 2 and all(f[0].startswith('npuprofd: not reachable: cannot connect to $dir/absent.sock') and 'shm:      $shm (read directly, read-only)' in f and [r['rank'] for r in rows(f)] == [2, 1, 0] for f in frames)"
timeout 10 "$npuprofctl" --socket "$dir/absent.sock" --shm-name "npftest-top-$$-none" top -n 1 >"$out" 2>&1
rc=$?
check "top, no daemon and no segment: exit 3, saying why and what to do" \
        top_holds "$out" "$rc == 3 and frames[0][1].startswith('          is npuprofd running? Start it (systemctl start npuprofd.socket)') and frames[0][2] == 'shm:      cannot open /npftest-top-$$-none.ctl: No such file or directory' and frames[0][3].strip().startswith('no npuprofd has made it on this node') and '--shm-name NAME' in frames[0][3]"

kill -TERM "$dpid" "${pids[@]}"
wait "$dpid" "${pids[@]}" 2>/dev/null
check "the daemon logged no sanitizer report" bash -c "! grep -qE 'Sanitizer|runtime error' '$log'"
rm -f "/dev/shm/$shm.ctl" "/dev/shm/$shm.ranks"

# --- a stand-in daemon: replies of every shape --------------------------------------------

fake=$tmp/fake
mkdir -p "$fake"
fsock=$fake/npuprofd.sock reply=$fake/reply.json
diag() { echo "the stand-in's reply: $(head -c 1500 "$reply")"; }
cat >"$fake/daemon.py" <<'EOF'
# Answer every request line on the socket argv[1] with the file argv[2] as it is now, one
# line; "SILENT" in it: never answer. Each request that came touches argv[2].asked.
import os, socket, sys, threading
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(sys.argv[1])
srv.listen(64)
def serve(c):
    buf = b""
    with c:
        while True:
            d = c.recv(65536)
            if not d:
                return
            buf += d
            while b"\n" in buf:
                _, buf = buf.split(b"\n", 1)
                open(sys.argv[2] + ".asked", "w").close()
                body = open(sys.argv[2], "rb").read().strip()
                if body != b"SILENT":
                    c.sendall(body + b"\n")
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
python3 - "$fake" <<'EOF'
# The replies: full (every progress key), old (none of them), broken ones, many (1,024 ranks).
import json, sys
d = sys.argv[1]
cfg = {"path": "/x/profiler_config.json", "generation": 7, "valid": True, "state": "valid", "error": None,
       "dialect": "native", "window": {"enabled": True, "start_step": 50000, "stop_step": 50004}, "ranks": "all"}
def reply(result):
    return {"version": 2, "ok": True, "result": result}
def status(ranks, progress=None, **more):
    r = {"daemon": {"pid": 4242, "version": "0.1.0", "uptime_s": 11000}, "shm": {"name": "npftest-fake", "adopted": False},
         "config": cfg, "ranks": ranks, "windows": {"done": 0, "failed": 0, "missed": 0, "filtered": 0, "lost": 0, "recent": []}}
    if progress is not None:
        r["progress"] = progress
    r.update(more)
    return reply(r)
cols = ["rank", "pid", "step", "state", "generation", "heartbeat_age_ms", "message", "step_time_ms", "stalled", "stalled_for_s"]
full = status({"columns": cols, "rows": [
    [0, 100, 41003, "idle", 7, None, None, 41.2, False, None],
    [1, 101, 41003, "idle", 7, None, None, 0.85, False, None],
    [17, 117, 41002, "idle", 7, None, None, 1530, True, 302],
    [3, 103, None, "idle", 7, None, None, None, False, None]]},
    {"step_time_ms": 41.2, "slowdown": {"since_step": 41000, "factor": 1.34, "baseline_ms": 41.0},
     "stalled_ranks": [17], "fastest_step": 41005,
     "message": "rank 17 is at step 41002, the others at 41003: they wait for it"})
old = status({"columns": cols[:7], "rows": [[0, 100, 41003, "idle", 7, None, None], [1, 101, 41001, "idle", 7, None, None]]})
broken = {
    "result-not-object": {"version": 2, "ok": True, "result": 3},
    "no-ok": {"version": 2},
    "ranks-string": status("table", [1, 2]),
    "rows-wrong": status({"columns": cols, "rows": [["x", "p", "s", 5, "g", [], {}, "fast", "yes", "long"]]},
                         {"step_time_ms": "fast", "slowdown": "big", "stalled_ranks": {"a": 1}, "fastest_step": "far",
                          "message": 5}),
    "row-short": status({"columns": cols, "rows": [[0, 1]]}),
    "columns-not-strings": status({"columns": [1, 2], "rows": [[0, 1]]}),
    "numbers-odd": status({"columns": cols, "rows": [
        [-1, -5, -7, "idle", 7, -3, "\u001b[2Jcleared\nsecond line", -41.2, True, -5],
        [9223372036854775807, 2, 9223372036854775807, "x" * 300, 7, None, None, 1e300, True, 1e300]]},
        {"step_time_ms": -1, "slowdown": {"since_step": None, "factor": "x", "baseline_ms": None},
         "stalled_ranks": list(range(40)) + ["x", None], "fastest_step": -3, "message": "\u001b]0;title\u0007"}),
    "slowdown-partial": status({"columns": cols, "rows": []}, {"slowdown": {"factor": 2}, "message": ""}),
    "progress-null": status({"columns": cols, "rows": [[0, 100, 5, "idle", 7, None, None, None, None, None]]}),
}
broken["progress-null"]["result"]["progress"] = None
many = status({"columns": cols, "rows": [[r, 1000 + r, 900000 + r % 97, "idle", 7, None, None, 40 + r % 7, False, None]
                                         for r in range(1024)]}, {"step_time_ms": 43.0, "fastest_step": 900096})
files = {"full": full, "old": old, "many": many, "refused": {"version": 2, "ok": False, "error": "the daemon is stopping"}}
files.update(("broken-" + k, v) for k, v in broken.items())
for name, body in files.items():
    with open("%s/%s.json" % (d, name), "w") as f:
        json.dump(body, f)
print(" ".join(k for k in files if k.startswith("broken-")), file=open(d + "/broken.list", "w"))
EOF
cp "$fake/full.json" "$reply"
python3 "$fake/daemon.py" "$fsock" "$reply" 2>"$fake/daemon.err" &
all_pids+=("$!")
wait_for test -S "$fsock"
fctl() { timeout 10 "$npuprofctl" --socket "$fsock" --shm-name "npftest-top-$$-fake" "$@"; }

out=$fake/top.out
fctl top -n 1 >"$out" 2>&1
rc=$?
check "stand-in, every key: top exits 0" test "$rc" -eq 0
check "stand-in, every key: the header gives the job's step time, its slowdown, the stalled rank and the message" \
        top_holds "$out" "head(frames[0])[2:] == ['ranks:    4 attached, 1 stalled; steps 41002..41003', 'progress: step time 41.2 ms', '          slowdown since step 41000: 1.34x the baseline 41.0 ms', '          stalled: rank 17', '          rank 17 is at step 41002, the others at 41003: they wait for it']"
check "stand-in, every key: STEP TIME as 41.2ms, 0.85ms, 1.53s and -; the lag behind the fastest step (41005)" \
        top_holds "$out" "[(r['rank'], r['time'], r['lag']) for r in rows(frames[0])] == [(17, '1.53s', 3), (0, '41.2ms', 2), (1, '0.85ms', 2), (3, '-', None)]"
check "stand-in, every key: the stalled rank marked, with how long" \
        top_holds "$out" "[r['rest'] for r in rows(frames[0])] == ['  STALLED for 5m02s', '', '', '']"
text=$(fctl status 2>&1)
check "stand-in, every key: status's rows have the step times and the mark" \
        bash -c 'grep -Eq "^ +17 +117 +41002 +idle +1\.53s +- +- +7  STALLED for 5m02s$" <<<"$1" &&
                 grep -Eq "^ +1 +101 +41003 +idle +0\.85ms +- +- +7$" <<<"$1" && grep -Eq "^ +3 +103 +- +idle +- " <<<"$1" &&
                 grep -q "^ranks:   4 attached, 1 stalled$" <<<"$1"' _ "$text"
check "stand-in, every key: status's progress lines under the table" \
        bash -c 'grep -A3 "^progress: step time 41.2 ms$" <<<"$1" | tail -n 3 | diff - <(printf "%s\n" \
                 "          slowdown since step 41000: 1.34x the baseline 41.0 ms" "          stalled: rank 17" \
                 "          rank 17 is at step 41002, the others at 41003: they wait for it")' _ "$text"
check "stand-in, every key: ranks prints the same" \
        bash -c 'grep -Eq "^ +17 +117 +41002 +idle +1\.53s .*STALLED for 5m02s$" <<<"$1" && grep -q "^progress: step time 41.2 ms$" <<<"$1"' \
        _ "$(fctl ranks 2>&1)"

cp "$fake/old.json" "$reply"
fctl top -n 1 >"$out" 2>&1
rc=$?
check "stand-in from before step times: top exits 0, STEP TIME - for each rank, step time -" \
        top_holds "$out" "$rc == 0 and [(r['rank'], r['time'], r['lag']) for r in rows(frames[0])] == [(1, '-', 2), (0, '-', 0)] and 'progress: step time -' in head(frames[0])"
text=$(fctl status 2>&1)
check "stand-in from before step times: status shows - in STEP TIME" \
        bash -c 'grep -Eq "^ +0 +100 +41003 +idle +- +- +- +7$" <<<"$1" && grep -q "^progress: step time -$" <<<"$1"' _ "$text"

cp "$fake/refused.json" "$reply"
fctl top -n 1 >"$out" 2>&1
rc=$?
check "stand-in that refuses: top says so, exit 1" \
        top_holds "$out" "$rc == 1 and frames[0][0].startswith('npuprofd: refused: the daemon is stopping')"

bad=''
for b in $(cat "$fake/broken.list"); do
        cp "$fake/$b.json" "$reply"
        for cmd in "top -n 1" status ranks; do
                # shellcheck disable=SC2086
                fctl $cmd >"$out" 2>&1
                rc=$?
                if [ "$rc" -gt 3 ] || grep -qE 'Sanitizer|runtime error' "$out" || grep -q $'\x1b' "$out"; then
                        bad="$bad
$b: $cmd: exit $rc: $(head -c 600 "$out")"
                fi
        done
done
check "stand-in, broken replies ($(wc -w <"$fake/broken.list")): top, status and ranks exit 0, 1 or 3, no sanitizer report, no escape let through" \
        test -z "$bad"
[ -n "$bad" ] && echo "$bad" | sed 's/^/     | /'
cp "$fake/broken-numbers-odd.json" "$reply"
fctl top -n 1 >"$out" 2>&1
check "stand-in, odd values: a rank's message and the daemon's shown with their control characters as ?" \
        top_holds "$out" "'?[2Jcleared?second line' in text and '          ?]0;title?' in head(frames[0])"
check "stand-in, odd values: 40 stalled ranks, 16 named" \
        top_holds "$out" "'          stalled: 40 ranks: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 and 24 more' in head(frames[0])"

# Signals: one that comes while top waits for a daemon that never answers ends it at once
# (128 + the signal: no refresh was shown); one while it sleeps ends it with the last refresh's status.
signal_exit() {         # signal_exit SIGNAL INTERVAL: "EXIT SECONDS-AFTER-THE-SIGNAL FRAMES"
        rm -f "$reply.asked"
        python3 - "$npuprofctl" "$fsock" "$1" "$2" "$reply.asked" <<'EOF'
import os, signal, subprocess, sys, time
p = subprocess.Popen([sys.argv[1], "--socket", sys.argv[2], "top", "--interval", sys.argv[4]],
                     stdout=subprocess.PIPE, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
# Once top has asked (a silent daemon), or has shown its first refresh (one that answers).
deadline = time.monotonic() + 8
while not os.path.exists(sys.argv[5]) and time.monotonic() < deadline:
    time.sleep(0.01)
first = p.stdout.readline() if sys.argv[4] != "1" else b""
time.sleep(0.2)
t = time.monotonic()
p.send_signal(getattr(signal, sys.argv[3]))
try:
    out, _ = p.communicate(timeout=8)
except subprocess.TimeoutExpired:
    p.kill()
    out, _ = p.communicate()
print(p.returncode, "%.1f" % (time.monotonic() - t), (first + out).decode().count("npuprofd: "))
EOF
}
echo SILENT >"$reply"
got=$(signal_exit SIGINT 1)
check "a daemon that never answers: SIGINT ends top at once, exit 130 ($got)" \
        bash -c '[[ $1 =~ ^130\ [01]\.[0-9]\ 0$ ]]' _ "$got"
got=$(signal_exit SIGTERM 1)
check "a daemon that never answers: SIGTERM ends top at once, exit 143 ($got)" \
        bash -c '[[ $1 =~ ^143\ [01]\.[0-9]\ 0$ ]]' _ "$got"
cp "$fake/full.json" "$reply"
got=$(signal_exit SIGINT 60)
check "SIGINT while top sleeps: it ends at once with its refresh's status, exit 0 ($got)" \
        bash -c '[[ $1 =~ ^0\ [01]\.[0-9]\ 1$ ]]' _ "$got"

# On a terminal (script(1) gives one of 20 lines by 100 columns): drawn over with ANSI
# sequences, the cursor hidden and shown again; the rows of 1,024 ranks cut to fit.
if command -v script >/dev/null && script -qec true /dev/null >/dev/null 2>&1; then
        cp "$fake/many.json" "$reply"
        TERM=xterm script -qec "stty rows 20 cols 100; $npuprofctl --socket $fsock top -n 2 --interval 0.1" /dev/null \
                >"$out" 2>&1 </dev/null
        rc=$?
        check "terminal: exit 0, the cursor hidden, the screen cleared, the cursor shown again at the end" \
                python3 -c 'import sys; t = open(sys.argv[1], "rb").read(); sys.exit(0 if t.startswith(b"\x1b[?25l\x1b[H\x1b[2J") and t.rstrip().endswith(b"\x1b[?25h") else 1)' "$out"
        check "terminal: each refresh drawn from the top, in at most 19 lines of at most 100 columns, 1,024 ranks counted" \
                python3 - "$out" "$rc" <<'EOF'
import re, sys
t = open(sys.argv[1], "rb").read().decode()
frames = [f for f in t.split("\x1b[H")[1:] if "npuprofd: " in f]
def good(f):
    lines = [l.rstrip("\r") for l in f.split("\x1b[J")[0].split("\x1b[K\r\n") if l.rstrip("\r") != ""]
    rows = [l for l in lines if re.match(r"^ +\d+ +\d+ +\d+ ", l)]
    more = re.search(r"\((\d+) more ranks not shown: the terminal has 20 lines\)", f)
    return len(lines) <= 19 and all(len(l) <= 100 for l in lines) and more and len(rows) + int(more.group(1)) == 1024 \
        and len(rows) >= 10
ok = sys.argv[2] == "0" and len(frames) == 2 and all(good(f) for f in frames)
if not ok:
    print(repr(t[-1500:]))
sys.exit(0 if ok else 1)
EOF
else
        skip "terminal: script(1) is missing"
fi

echo "top: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
