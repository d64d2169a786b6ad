#!/usr/bin/env bash
# A fleet on one machine: K nodes, each in its own mount namespace with a private tmpfs on
# /dev/shm and /run, each with its own real npuprofd (--no-inotify, polling as on NFS) and M
# real train-loop ranks linked with libnpuprof, all watching ONE profiler_config.json in a
# shared directory. The test reaches each node's daemon through a socket in a shared
# directory, reads the ranks' window output in a shared output root, and collects the
# nodes' --metrics-file files as node_exporter's textfile collector would.
#   tests/fleet/test-fleet.sh BUILD_DIR        (root: unshare --mount, mount, nsenter)
# Asserted: steps, counts, generations. Measured and printed, never asserted: the spread
# between the first and the last node to publish each generation (from the daemons' own
# publication times), the catch-up of a restarted node, the daemons' CPU time and memory.
set -u
build=${1:?usage: tests/fleet/test-fleet.sh BUILD_DIR}
build=$(cd "$build" && pwd)     # absolute: nsenter starts a daemon from inside a node
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl trainloop=$build/train-loop
for b in "$npuprofd" "$npuprofctl" "$trainloop"; do
        [ -x "$b" ] || { echo "test-fleet: $b is not built" >&2; exit 2; }
done
here=$(cd "$(dirname "$0")/.." && pwd)
promtext=$here/promtext.py
K=${NPF_FLEET_NODES:-8} M=${NPF_FLEET_RANKS:-8}
STEP_MS=50 STEPS=3          # a window of 3 steps of 50 ms
POLL_MS=100
if [ "$(id -u)" != 0 ] || ! unshare --mount --propagation private true 2>/dev/null; then
        echo "test-fleet: needs root and mount namespaces (unshare --mount)"
        exit 77
fi

. "$here/lib.sh"
npf_harness fleet
wait_ms=15000
shared=$tmp/shared out=$tmp/out textfile=$tmp/textfile socks=$tmp/sock logs=$tmp/logs
conf=$shared/profiler_config.json
mkdir -p "$shared" "$out" "$textfile" "$socks" "$logs"
node_pid=()             # per node: the namespace's first process, leader of its process group
restarted_pid=''

# Each node is a process group: everything in it is killed at the end, whatever happened.
fleet_cleanup() {
        local k
        for k in "${!node_pid[@]}"; do kill -KILL -- "-${node_pid[$k]}" 2>/dev/null; done
        [ -n "$restarted_pid" ] && kill -KILL -- "-$restarted_pid" 2>/dev/null
        npf_cleanup
}
trap fleet_cleanup EXIT

shm_of() { echo "npftest-fleet-$$-$1"; }
sock_of() { echo "$socks/node$1.sock"; }
prom_of() { echo "$textfile/node$1.prom"; }
ctl() { local k=$1; shift; timeout 10 "$npuprofctl" --socket "$(sock_of "$k")" "$@"; }
save() { printf '%s\n' "$1" >"$conf.tmp~" && mv -f "$conf.tmp~" "$conf"; }
now_s() { echo "${EPOCHREALTIME}"; }
since() { awk -v a="$1" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }'; }

daemon_args() {
        echo --config "$conf" --shm-name "$(shm_of "$1")" --socket "$(sock_of "$1")" --no-inotify \
                --poll-interval "$POLL_MS" --output-root "$out" --metrics-file "$(prom_of "$1")" \
                --metrics-interval 1 --analyze-jobs 0 --log stderr
}

# start_node K: a new session and mount namespace holding node K's daemon and its M ranks.
start_node() {
        local k=$1 j ranks=()
        for j in $(seq 0 $((M - 1))); do ranks+=($((k * M + j))); done
        # shellcheck disable=SC2046
        setsid unshare --mount --propagation private sh -c '
                mount -t tmpfs -o mode=1777 tmpfs /dev/shm && mount -t tmpfs -o mode=0755 tmpfs /run || exit 1
                sock=$1 log=$2 trainloop=$3 shm=$4 logdir=$5 step_ms=$6; shift 6
                ranks=$1; shift
                "$@" 2>>"$log" &
                while [ ! -S "$sock" ]; do sleep 0.02; done
                for r in $ranks; do
                        "$trainloop" --rank "$r" --steps 4000 --step-ms "$step_ms" --busy 0 --shm-name "$shm" \
                                --backend host >"$logdir/rank$r.out" 2>&1 &
                done
                wait' sh "$(sock_of "$k")" "$logs/node$k.log" "$trainloop" "$(shm_of "$k")" "$logs" "$STEP_MS" \
                "${ranks[*]}" "$npuprofd" $(daemon_args "$k") &
        node_pid[$k]=$!
        disown          # killed with its group at the end, unannounced
}

# jnode K EXPR [COMMAND]: node K's `COMMAND --json` (status by default) satisfies EXPR (`o`).
jnode() {
        local k=$1 expr=$2 cmd=${3:-status}
        npf_json_holds 'import json, sys; o = json.loads(sys.argv[2])' "$expr" ctl "$k" "$cmd" --json
}
vnode() {
        local k=$1 expr=$2 cmd=${3:-status}
        npf_json_print 'import json, sys; o = json.loads(sys.argv[2])' "json.dumps($expr)" ctl "$k" "$cmd" --json
}

# fleet_metrics: every node's file, parsed as a collector would: {node: {metric: value}}.
fleet_metrics() {
        python3 - "$promtext" "$textfile" "$K" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import promtext
d, k = sys.argv[2], int(sys.argv[3])
fleet = {}
for n in range(k):
    try:
        with open(os.path.join(d, "node%d.prom" % n)) as f:
            fleet[n] = {promtext.key(name, labels): v for (name, labels), v in promtext.parse(f.read()).items()}
    except (OSError, promtext.Invalid) as e:
        fleet[n] = {"error": str(e)}
print(json.dumps(fleet))
PY
}
# all_at GEN: every node's metrics file shows generation GEN.
all_at() {
        npf_json_holds 'import json, sys; f = json.loads(sys.argv[2])' \
                "all(f[n].get('npuprof_generation') == $1 for n in f)" fleet_metrics
}
# at_gen NODES GEN: the nodes listed show GEN.
at_gen() {
        local nodes=$1 gen=$2
        npf_json_holds 'import json, sys; f = json.loads(sys.argv[2])' \
                "all(f[str(n)].get('npuprof_generation') == $gen for n in [$nodes])" fleet_metrics
}

# spread GEN EDIT_S NODES: print when each listed node published GEN, from its own record.
spread() {
        fleet_metrics | python3 -c '
import json, sys
f, gen, edit, nodes = json.load(sys.stdin), int(sys.argv[1]), float(sys.argv[2]), [int(n) for n in sys.argv[3].split(",")]
ts = sorted((f[str(n)]["npuprof_generation_published_timestamp_seconds"], n) for n in nodes
            if f[str(n)].get("npuprof_generation") == gen)
if len(ts) < len(nodes):
    print("     generation %d: only %d of %d nodes published it" % (gen, len(ts), len(nodes)))
    sys.exit()
lat = [t - edit for t, _ in ts]
print("     generation %d on %d nodes: spread first..last %.0f ms (node %d first, node %d last);"
      " edit to publication min %.0f, median %.0f, max %.0f ms" % (gen, len(ts), (ts[-1][0] - ts[0][0]) * 1000,
      ts[0][1], ts[-1][1], min(lat) * 1000, sorted(lat)[len(lat) // 2] * 1000, max(lat) * 1000))
' "$1" "$2" "$3"
}

# max_step NODES: the highest step any rank of the listed nodes is at, from their daemons.
max_step() {
        local k s max=0
        for k in $1; do
                s=$(vnode "$k" 'max([r["step"] or 0 for r in o["ranks"]] or [0])' ranks) || return 1
                [ "$s" -gt "$max" ] && max=$s
        done
        echo "$max"
}

# windows_ok GEN START NODES: on each listed node, `windows --json` lists its M ranks' window
# START..START+STEPS-1 of generation GEN, done.
windows_ok() {
        local gen=$1 start=$2 k
        for k in $3; do
                jnode "$k" "sorted(w['rank'] for w in o['windows'] if w['generation'] == $gen and w['start_step'] == $start and w['stop_step'] == $start + $STEPS - 1 and w['outcome'] == 'done') == list(range($k * $M, $k * $M + $M))" windows \
                        || return 1
        done
}

# outputs_ok GEN START: every rank of the fleet wrote rank<R>_start<START>_stop<STOP>/, its
# manifest complete and of generation GEN, its trace exactly ProfilerStep#START..#STOP.
# Prints the faults; empty is all well.
outputs() {
        python3 - "$out" "$((K * M))" "$1" "$2" "$STEPS" <<'PY'
import json, os, sys
out, n, gen, start, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
stop, bad = start + steps - 1, []
want = ["ProfilerStep#%d" % s for s in range(start, stop + 1)]
for r in range(n):
    d = os.path.join(out, "rank%d_start%d_stop%d" % (r, start, stop))
    try:
        m = json.load(open(os.path.join(d, "manifest.json")))
        t = json.load(open(os.path.join(d, "trace.json")))
        spans = [e["name"] for e in t["traceEvents"] if e.get("ph") == "X"]
        if m["status"] != "complete" or m["generation"] != gen or m["window"]["start_step"] != start or spans != want:
            bad.append("rank %d: %s gen %s start %s %s" % (r, m["status"], m["generation"], m["window"]["start_step"], spans))
    except (OSError, ValueError, KeyError) as e:
        bad.append("rank %d: %s" % (r, e))
print("; ".join(bad[:6]) + (" (and %d more)" % (len(bad) - 6) if len(bad) > 6 else ""))
PY
}
outputs_done() { [ -z "$(outputs "$1" "$2")" ]; }

# window_checks WHAT GEN START: every rank of the fleet ran the window of generation GEN at
# START, as its output and its node's daemon say.
window_checks() {
        local what=$1 gen=$2 start=$3 bad stop=$(($3 + STEPS - 1)) k
        wait_for outputs_done "$gen" "$start"
        bad=$(outputs "$gen" "$start")
        if [ -z "$bad" ]; then ok "$what: all $((K * M)) ranks opened at step $start and closed after $stop (manifest complete, generation $gen, trace ProfilerStep#$start..#$stop)"
        else fail "$what: not every rank's window is $start..$stop" "$bad"; fi
        if wait_for windows_ok "$gen" "$start" "$all_nodes"; then ok "$what: each node's \`windows --json\` lists its $M ranks' window $start..$stop, done"
        else fail "$what: a node's windows differ" "$(for k in $all_nodes; do echo "node $k: $(ctl "$k" windows 2>&1 | head -n 20)"; done)"; fi
}

# The window directories in the output root, by start step: "START:COUNT ...".
window_dirs() { ls "$out" | sed -n 's/^rank[0-9]*_start\([0-9]*\)_stop[0-9]*$/\1/p' | sort -n | uniq -c | awk '{printf "%s:%s ", $2, $1}'; }

# cpu_rss PID: "CPU seconds, RSS KiB, peak RSS KiB" of a process.
cpu_rss() {
        local t
        t=$(awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null) || return
        printf '%s s CPU, RSS %s KiB, peak %s KiB' "$(awk -v t="$t" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }')" \
                "$(awk '/^VmRSS/ {print $2}' "/proc/$1/status")" "$(awk '/^VmHWM/ {print $2}' "/proc/$1/status")"
}

# --- the fleet comes up ----------------------------------------------------------------------

all_nodes=$(seq -s ' ' 0 $((K - 1)))
save '{}'
t0=$(now_s)
for k in $all_nodes; do start_node "$k"; done
up() { jnode "$1" "o['config']['generation'] == 1 and len(o['ranks']) == $M and all(r['pid'] for r in o['ranks'])"; }
for k in $all_nodes; do
        wait_for up "$k" || { fail "node $k: its daemon and $M ranks did not come up" "$(tail -n 5 "$logs/node$k.log")"; }
done
echo "     $K nodes of $M ranks up in $(since "$t0") s"
check_nodes() { local k; for k in $all_nodes; do up "$k" || return 1; done; }
if check_nodes; then ok "fleet: $K daemons up, each with its own segment and $M ranks attached, generation 1"
else fail "fleet: not every node came up"; fi
isolated() {
        local k pid
        for k in $all_nodes; do
                pid=$(vnode "$k" 'o["daemon"]["pid"]') || return 1
                # Each daemon's /dev/shm is its own: its segment is there, the others' are not.
                [ -e "/proc/$pid/root/dev/shm/$(shm_of "$k").ctl" ] || return 1
                [ "$(nsenter -t "$pid" -m ls /dev/shm | wc -l)" = 2 ] || return 1
                [ "$(readlink "/proc/$pid/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] || return 1
        done
}
if isolated; then ok "fleet: each node's /dev/shm is private (its own two segment files only, its own mount namespace)"
else fail "fleet: the nodes are not isolated"; fi
if [ -z "$(ls /dev/shm | grep "npftest-fleet-$$-")" ]; then ok "fleet: no segment leaked into the host's /dev/shm"
else fail "fleet: segments in the host's /dev/shm" "$(ls /dev/shm | grep "npftest-fleet-$$-")"; fi

# --- one edit, every rank of every node at the same step --------------------------------------

s=$(max_step "$all_nodes")
S1=$((s + 2000 / STEP_MS))                  # two seconds ahead of the furthest rank
save "{ \"start_step\": $S1, \"steps\": $STEPS }"
e1=$(now_s)
if wait_for all_at 2; then ok "edit 1: all $K nodes published generation 2 (window $S1..$((S1 + STEPS - 1)); the ranks were at step $s at most)"
else fail "edit 1: not every node published generation 2" "$(fleet_metrics)"; fi
spread 2 "$e1" "$(seq -s , 0 $((K - 1)))"
window_checks "edit 1" 2 "$S1"

# --- a node killed, an edit while it is down, the node back ------------------------------------

X=$((K / 2))
live=$(for k in $all_nodes; do [ "$k" != "$X" ] && echo "$k"; done | paste -sd ' ')
xpid=$(vnode "$X" 'o["daemon"]["pid"]')
kill -KILL "$xpid"
if wait_for sh -c "! kill -0 $xpid 2>/dev/null || grep -q '^State:.*Z' /proc/$xpid/status"; then
        ok "restart: node $X's daemon (pid $xpid) is SIGKILLed"
else fail "restart: node $X's daemon survived SIGKILL"; fi
xranks() { [ "$(ps -o pid= --ppid "${node_pid[$X]}" | wc -l)" -ge "$M" ]; }
if xranks; then ok "restart: node $X's $M ranks train on without it"
else fail "restart: node $X's ranks are gone" "$(ps -f --ppid "${node_pid[$X]}")"; fi
s=$(max_step "$live")
S2=$((s + 4000 / STEP_MS))                  # four seconds ahead: the downtime is inside
save "{ \"start_step\": $S2, \"steps\": $STEPS }"
e2=$(now_s)
if wait_for at_gen "${live// /,}" 3; then ok "restart: the $((K - 1)) live nodes published generation 3 (window $S2..$((S2 + STEPS - 1)))"
else fail "restart: the live nodes did not publish generation 3" "$(fleet_metrics)"; fi
check_stale() { npf_json_holds 'import json, sys; f = json.loads(sys.argv[2])' "f['$X']['npuprof_generation'] == 2 and f['$X']['npuprof_up'] == 1" fleet_metrics; }
if check_stale; then
        ok "restart: node $X's metrics file still says generation 2, up 1 (a monitor sees only its age: $(($(date +%s) - $(stat -c %Y "$(prom_of "$X")"))) s)"
else fail "restart: node $X's metrics file moved while its daemon was dead" "$(fleet_metrics)"; fi
r2=$(now_s)
# shellcheck disable=SC2046
setsid nsenter --target "${node_pid[$X]}" --mount "$npuprofd" $(daemon_args "$X") 2>>"$logs/node$X.log" &
restarted_pid=$!
disown
if wait_for at_gen "$X" 3; then ok "restart: node $X's new daemon adopted its segment and published generation 3"
else fail "restart: node $X did not catch up" "$(tail -n 6 "$logs/node$X.log")"; fi
npf_json_print 'import json, sys; f = json.loads(sys.argv[2])' \
        "'     restart: node $X caught up %.0f ms after its daemon started (its own record), %.0f ms after the restart command, %.0f ms after the edit' % ((f['$X']['npuprof_generation_published_timestamp_seconds'] - f['$X']['npuprof_start_time_seconds']) * 1000, (f['$X']['npuprof_generation_published_timestamp_seconds'] - $r2) * 1000, (f['$X']['npuprof_generation_published_timestamp_seconds'] - $e2) * 1000)" \
        fleet_metrics
spread 3 "$e2" "${live// /,}"
spread 3 "$e2" "$(seq -s , 0 $((K - 1)))"
if wait_for grep -q "adopted segment $(shm_of "$X") at generation 2 with $M ranks attached" "$logs/node$X.log"; then
        ok "restart: its log says it adopted the segment at generation 2 with $M ranks"
else fail "restart: no adoption in node $X's log" "$(tail -n 6 "$logs/node$X.log")"; fi
window_checks "restart (node $X's ranks and new daemon too)" 3 "$S2"
if windows_ok 2 "$S1" "$live"; then ok "restart: the live nodes still list the first window too"
else fail "restart: a live node lost its first window"; fi
dirs=$(window_dirs)
if [ "$dirs" = "$S1:$((K * M)) $S2:$((K * M)) " ]; then ok "windows: exactly two windows per rank, no other ($dirs)"
else fail "windows: other windows than $S1 and $S2 were opened" "$dirs"; fi
no_other() { local k; for k in $all_nodes; do jnode "$k" "all(w['outcome'] == 'done' for w in o['windows']) and o['outcomes']['done'] == len(o['windows'])" windows || return 1; done; }
if no_other; then ok "windows: no node recorded a missed, failed or lost window"
else fail "windows: a window did not end done" "$(for k in $all_nodes; do ctl "$k" windows; done)"; fi

# --- the fleet as a monitor sees it: the textfile collector's directory ------------------------

fleet_ok() {
        local gen=$1
        python3 "$promtext" check "$textfile"/node*.prom || return 1
        npf_json_holds 'import json, sys; f = json.loads(sys.argv[2])' \
                "len(f) == $K and all(f[n]['npuprof_up'] == 1 and f[n]['npuprof_generation'] == $gen and f[n]['npuprof_config_valid'] == 1 and f[n]['npuprof_ranks{state=\"done\"}'] == $M and f[n]['npuprof_metrics_file_errors_total'] == 0 and f[n]['npuprof_windows_total{outcome=\"done\"}'] == ($M if n == '$X' else 2 * $M) for n in f)" \
                fleet_metrics
}
if wait_for fleet_ok 3; then ok "monitor: $K valid files; each node up, generation 3, $M ranks done, its windows counted (node $X's since its restart)"
else fail "monitor: the collected files disagree" "$(fleet_metrics)"; fi
fleet_metrics | python3 -c '
import json, sys
f = json.load(sys.stdin)
print("     node  up  gen  published            windows_done  ranks_done  file_errors")
for n in sorted(f, key=int):
    m = f[n]
    print("     %4s  %2d  %3d  %.3f  %12d  %10d  %11d" % (n, m["npuprof_up"], m["npuprof_generation"],
          m["npuprof_generation_published_timestamp_seconds"], m["npuprof_windows_total{outcome=\"done\"}"],
          m["npuprof_ranks{state=\"done\"}"], m["npuprof_metrics_file_errors_total"]))'
for k in $all_nodes; do
        pid=$(vnode "$k" 'o["daemon"]["pid"]')
        echo "     node $k daemon (pid $pid, up $(vnode "$k" 'o["daemon"]["uptime_s"]') s): $(cpu_rss "$pid")"
done
echo "     total run $(since "$t0") s; windows by start step: $(window_dirs)"

echo "fleet: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
