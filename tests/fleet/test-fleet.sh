#!/usr/bin/env bash
# A fleet on one machine: K nodes, each in its own mount namespace with a private tmpfs on
# /dev/shm and /run, each with its own real npuprofd (--no-inotify, polling as on NFS) and M
# real train-loop ranks linked with libnpuprof, all watching ONE profiler_config.json in a
# shared directory. The test reaches each node's daemon through a socket in a shared
# directory, reads the ranks' window output in a shared output root, and collects the
# nodes' --metrics-file files as node_exporter's textfile collector would. One node's daemon
# is killed and restarted (it adopts its segment); another whole node is killed and started
# afresh, its ranks resumed from a checkpoint (it creates a segment and reads the file anew).
#   tests/fleet/test-fleet.sh BUILD_DIR        (root: unshare --mount, mount, nsenter)
# Asserted: steps, counts, generations. Measured and printed, never asserted: the spread
# between the first and the last node to publish each generation (from the daemons' own
# publication times), the catch-up of the restarted nodes, the daemons' CPU time and memory.
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

# start_node K [FIRST]: a new session and mount namespace holding node K's daemon and its M
# ranks, which start at step FIRST (1 by default), as a job resumed from a checkpoint.
start_node() {
        local k=$1 first=${2:-1} j ranks=()
        for j in $(seq 0 $((M - 1))); do ranks+=($((k * M + j))); done
        # shellcheck disable=SC2046
        setsid unshare --mount --propagation private sh -c '
                mount -t tmpfs -o mode=1777 tmpfs /dev/shm && mount -t tmpfs -o mode=0755 tmpfs /run || exit 1
                sock=$1 log=$2 trainloop=$3 shm=$4 logdir=$5 step_ms=$6 first=$7; shift 7
                ranks=$1; shift
                "$@" 2>>"$log" &
                while [ ! -S "$sock" ]; do sleep 0.02; done
                for r in $ranks; do
                        "$trainloop" --rank "$r" --steps 4000 --first-step "$first" --step-ms "$step_ms" --busy 0 \
                                --shm-name "$shm" --backend host >"$logdir/rank$r.out" 2>&1 &
                done
                wait' sh "$(sock_of "$k")" "$logs/node$k.log" "$trainloop" "$(shm_of "$k")" "$logs" "$STEP_MS" \
                "$first" "${ranks[*]}" "$npuprofd" $(daemon_args "$k") &
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
        local k replies
        replies=$(for k in $1; do ctl "$k" ranks --json || exit 1; done) || return 1
        python3 -c 'import json, sys; print(max([r["step"] or 0 for l in sys.stdin for r in json.loads(l)["ranks"]] or [0]))' \
                <<<"$replies"
}

# ahead NODES MS: sets ahead_step, a start step MS milliseconds of stepping ahead of the
# furthest rank of the listed nodes, and lead_ms, how far ahead that is. The lead grows by
# twice what reading the steps took: everything the test does from that reading until the
# ranks read the edit (saving, waiting, restarting a daemon) slows down as the reading does,
# so a loaded machine gets a longer lead, and the window checks wait as much longer.
lead_ms=0 ahead_step=0
ahead() {
        local t s took
        t=$(now_ms)
        s=$(max_step "$1") || { echo "     the steps of nodes $1 could not be read"; return 1; }
        took=$(($(now_ms) - t))
        lead_ms=$(($2 + 2 * took))
        ahead_step=$((s + lead_ms / STEP_MS))
        if [ "$took" -gt 1000 ]; then
                echo "     reading the steps of nodes $1 took $took ms: the window starts $lead_ms ms ahead"
        fi
}

# Generations are counted by each node's segment: a node started afresh counts from 1 again.
# GENS is one generation for every node, or "G N:GN ...": G, but GN on node N.
gen_of() {
        local k=$2 p g=${1%% *}
        for p in $1; do [ "$p" != "${p%%:*}" ] && [ "${p%%:*}" = "$k" ] && g=${p#*:}; done
        echo "$g"
}
gens_text() {
        local g=${1%% *} p t
        t="generation $g"
        for p in ${1#"$g"}; do t+=", node ${p%%:*}'s ${p#*:}"; done
        echo "$t"
}

# windows_ok GENS START NODES: on each listed node, `windows --json` lists its M ranks' window
# START..START+STEPS-1 of its generation in GENS, done.
windows_ok() {
        local gens=$1 start=$2 k
        for k in $3; do
                jnode "$k" "sorted(w['rank'] for w in o['windows'] if w['generation'] == $(gen_of "$gens" "$k") and w['start_step'] == $start and w['stop_step'] == $start + $STEPS - 1 and w['outcome'] == 'done') == list(range($k * $M, $k * $M + $M))" windows \
                        || return 1
        done
}

# outputs GENS START [NODES]: every rank of the listed nodes (the fleet by default) wrote
# rank<R>_start<START>_stop<STOP>/, its manifest complete and of its node's generation in
# GENS, its trace exactly ProfilerStep#START..#STOP. Prints the faults; empty is all well.
outputs() {
        python3 - "$out" "$M" "$1" "$2" "$STEPS" "${3:-$all_nodes}" <<'PY' || echo "outputs: the check itself failed"
import json, os, sys
out, per, spec, start, steps = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), int(sys.argv[4]), int(sys.argv[5])
gens = {int(n): int(g) for n, g in (p.split(":") for p in spec[1:])}
stop, bad = start + steps - 1, []
want = ["ProfilerStep#%d" % s for s in range(start, stop + 1)]
for r in (n * per + j for n in map(int, sys.argv[6].split()) for j in range(per)):
    gen = gens.get(r // per, int(spec[0]))
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
outputs_done() { [ -z "$(outputs "$@")" ]; }

# window_checks WHAT GENS START [NODES]: every rank of the listed nodes (the fleet by default)
# ran the window of its node's generation in GENS at START, as its output and its node's
# daemon say.
window_checks() {
        local what=$1 gens=$2 start=$3 nodes=${4:-$all_nodes} bad stop=$(($3 + STEPS - 1)) k n
        local wait_ms=$((wait_ms + lead_ms))   # the window is that far ahead of the edit
        n=$(($(wc -w <<<"$nodes") * M))
        wait_for outputs_done "$gens" "$start" "$nodes"
        bad=$(outputs "$gens" "$start" "$nodes")
        if [ -z "$bad" ]; then ok "$what: all $n ranks opened at step $start and closed after $stop (manifest complete, $(gens_text "$gens"), trace ProfilerStep#$start..#$stop)"
        else fail "$what: not every rank's window is $start..$stop" "$bad"; fi
        if wait_for windows_ok "$gens" "$start" "$nodes"; then ok "$what: each node's \`windows --json\` lists its $M ranks' window $start..$stop, done"
        else fail "$what: a node's windows differ" "$(for k in $nodes; do echo "node $k: $(ctl "$k" windows 2>&1 | head -n 20)"; done)"; fi
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

ahead "$all_nodes" 2000; S1=$ahead_step      # two seconds ahead of the furthest rank
e1=$(now_s)          # before the rename: a daemon may publish before the shell runs again
save "{ \"start_step\": $S1, \"steps\": $STEPS }"
if wait_for all_at 2; then ok "edit 1: all $K nodes published generation 2 (window $S1..$((S1 + STEPS - 1)))"
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
ahead "$live" 4000; S2=$ahead_step          # four seconds ahead: the downtime is inside
e2=$(now_s)
save "{ \"start_step\": $S2, \"steps\": $STEPS }"
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

# --- a whole node killed (a reboot), an edit while it is down, the node started afresh ---------

# Node Y's process group is SIGKILLed: its daemon, its ranks and, with its last process, its
# mount namespace and the private tmpfs on /dev/shm that held its segment. The live nodes
# publish the next edit and run its window while it is down. Node Y comes back as a rebooted
# node does: a new namespace, an empty /dev/shm, a new daemon that creates a segment and reads
# the shared file, and ranks resumed from a checkpoint at about the step the fleet is at, past
# the window of the edit it missed. Its segment counts generations from 1 again.
Y=$(((X + 1) % K))
live2=$(for k in $all_nodes; do [ "$k" != "$Y" ] && echo "$k"; done | paste -sd ' ')
ypgid=${node_pid[$Y]}
ypid=$(vnode "$Y" 'o["daemon"]["pid"]')
yns=$(stat -L -c %i "/proc/$ypid/ns/mnt")
kill -KILL -- "-$ypgid"
# node_gone PGID NS: no process of the group is left but zombies, none is in the mount namespace.
node_gone() {
        local p
        for p in $(pgrep -g "$1"); do grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null || return 1; done
        ! stat -L -c %i /proc/[0-9]*/ns/mnt 2>/dev/null | grep -qx "$2"
}
if wait_for node_gone "$ypgid" "$yns"; then
        ok "reboot: node $Y's process group (daemon pid $ypid and its $M ranks) is SIGKILLed; no process is left in its mount namespace, its /dev/shm is gone"
else fail "reboot: node $Y survived" "$(ps -o pid,stat,args -g "$ypgid")"; fi
ahead "$live2" 2000; S4=$ahead_step         # two seconds ahead: run by the live nodes only
e4=$(now_s)
save "{ \"start_step\": $S4, \"steps\": $STEPS }"
if wait_for at_gen "${live2// /,}" 4; then ok "reboot: the $((K - 1)) live nodes published generation 4 (window $S4..$((S4 + STEPS - 1))) while node $Y is down"
else fail "reboot: the live nodes did not publish generation 4" "$(fleet_metrics)"; fi
window_checks "reboot (the live nodes, while node $Y is down)" 4 "$S4" "$live2"
# Node Y's ranks resume at the step the fleet is at now: past the window they missed.
F=$(max_step "$live2")
if [ "$F" -gt $((S4 + STEPS - 1)) ]; then ok "reboot: node $Y's ranks will resume at step $F, past the window $S4..$((S4 + STEPS - 1)) they were down for"
else fail "reboot: the live nodes are at step $F, not past the window $S4..$((S4 + STEPS - 1))"; fi
rm -f "$(sock_of "$Y")"                     # its /run went with it: no socket to wait for
r4=$(now_s)
start_node "$Y" "$F"
if wait_for up "$Y"; then ok "reboot: node $Y started afresh: a new daemon, $M new ranks attached, generation 1 of its own segment"
else fail "reboot: node $Y did not come up" "$(tail -n 6 "$logs/node$Y.log")"; fi
# same_config K REF: node K's configuration in force is node REF's, their generations aside.
same_config() { [ "$(vnode "$1" '[o["config"][k] for k in ("window", "ranks", "dialect", "valid")]')" = "$(vnode "$2" '[o["config"][k] for k in ("window", "ranks", "dialect", "valid")]')" ]; }
if jnode "$Y" "o['config']['window']['start_step'] == $S4 and not o['shm']['adopted']" && same_config "$Y" "${live2%% *}"; then
        ok "reboot: node $Y caught up: its new daemon read the shared file on start and publishes what the live nodes do (window $S4..$((S4 + STEPS - 1))), from a segment it created"
else fail "reboot: node $Y's configuration is not the fleet's" "$(vnode "$Y" 'o["config"]'; vnode "${live2%% *}" 'o["config"]')"; fi
if [ "$(grep -c "created segment $(shm_of "$Y")\$" "$logs/node$Y.log")" = 2 ] && ! grep -q "adopted segment" "$logs/node$Y.log"; then
        ok "reboot: node $Y's log says it created its segment on each start, and never adopted one"
else fail "reboot: node $Y's log does not say it created a fresh segment" "$(grep segment "$logs/node$Y.log")"; fi
# (The old namespace is gone, so the new one may have its inode number: the kernel reuses them.)
ypid2=$(vnode "$Y" 'o["daemon"]["pid"]')
if [ "$ypid2" != "$ypid" ] && [ "$(readlink "/proc/$ypid2/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] \
        && [ "$(nsenter -t "$ypid2" -m ls /dev/shm | wc -l)" = 2 ] && [ -e "/proc/$ypid2/root/dev/shm/$(shm_of "$Y").ctl" ]; then
        ok "reboot: node $Y's new daemon (pid $ypid2) runs in a mount namespace of its own, its /dev/shm holds only its new segment's two files"
else fail "reboot: node $Y is not isolated" "$(nsenter -t "$ypid2" -m ls -l /dev/shm)"; fi
# Its metrics file, the one the dead daemon left, is the new daemon's once it says so.
y_fresh() { npf_json_holds 'import json, sys; f = json.loads(sys.argv[2])' "f['$Y']['npuprof_start_time_seconds'] >= int($r4) and f['$Y']['npuprof_generation'] == 1" fleet_metrics; }
if wait_for y_fresh; then
        npf_json_print 'import json, sys; f = json.loads(sys.argv[2])' \
                "'     reboot: node $Y caught up %.0f ms after its daemon started (its own record), %.0f ms after the start command, %.0f ms after the edit made while it was down' % ((f['$Y']['npuprof_generation_published_timestamp_seconds'] - f['$Y']['npuprof_start_time_seconds']) * 1000, (f['$Y']['npuprof_generation_published_timestamp_seconds'] - $r4) * 1000, (f['$Y']['npuprof_generation_published_timestamp_seconds'] - $e4) * 1000)" \
                fleet_metrics
else fail "reboot: node $Y's metrics file is not its new daemon's" "$(fleet_metrics)"; fi
# It missed the window it was down for: each of its ranks read it at its first step, F or
# later (if the daemon published after it), past the start step, as the rank itself says.
y_missed() {
        jnode "$Y" "sorted(w['rank'] for w in o['windows'] if w['generation'] == 1 and w['start_step'] == $S4 and w['outcome'] == 'missed' and int(__import__('re').match(r'read the configuration at step (\d+), after the start step', w['message']).group(1)) >= $F) == list(range($Y * $M, $Y * $M + $M))" windows
}
if wait_for y_missed && [ -z "$(ls "$out" | grep -E "^rank($(seq -s '|' $((Y * M)) $((Y * M + M - 1))))_start${S4}_")" ]; then
        ok "reboot: node $Y's $M ranks did not open the window $S4..$((S4 + STEPS - 1)): each read it at step $F or later, its daemon records them as missed, no output"
else fail "reboot: node $Y's ranks did not miss the window they were down for" "$(ctl "$Y" windows 2>&1 | head -n 12; ls "$out" | grep "_start${S4}_")"; fi
# Once each has stepped, each is at step F or later: a loop started at 1 would take ~F * STEP_MS.
stepping() { jnode "$Y" "len(o['ranks']) == $M and all(r['step'] for r in o['ranks'])" ranks; }
if wait_for stepping && jnode "$Y" "min(r['step'] for r in o['ranks']) >= $F" ranks; then ok "reboot: node $Y's ranks resumed at step $F, not 1"
else fail "reboot: node $Y's ranks did not resume at step $F" "$(ctl "$Y" ranks)"; fi
# One more edit: every rank of the fleet, node Y's new ones too, opens it at the same step.
ys=$(vnode "$Y" 'min([r["step"] or 0 for r in o["ranks"]])')
s=$(max_step "$all_nodes")
echo "     reboot: node $Y's ranks at step $ys, $((s - ys)) steps behind the furthest rank of the fleet ($s)"
ahead "$all_nodes" 4000; S5=$ahead_step     # four seconds ahead of the furthest rank
e5=$(now_s)
save "{ \"start_step\": $S5, \"steps\": $STEPS }"
if wait_for at_gen "${live2// /,}" 5 && wait_for at_gen "$Y" 2; then
        ok "reboot: the next edit is generation 5 on the live nodes and 2 on node $Y (window $S5..$((S5 + STEPS - 1)))"
else fail "reboot: not every node published the next edit" "$(fleet_metrics)"; fi
if same_config "$Y" "${live2%% *}"; then ok "reboot: node $Y's configuration in force is still the fleet's"
else fail "reboot: node $Y's configuration differs from the fleet's" "$(vnode "$Y" 'o["config"]'; vnode "${live2%% *}" 'o["config"]')"; fi
spread 5 "$e5" "${live2// /,}"
npf_json_print 'import json, sys; f = json.loads(sys.argv[2])' \
        "'     reboot: node $Y published it (its generation 2) %.0f ms after the edit' % ((f['$Y']['npuprof_generation_published_timestamp_seconds'] - $e5) * 1000)" \
        fleet_metrics
window_checks "reboot (node $Y's new ranks and daemon too)" "5 $Y:2" "$S5"
dirs=$(window_dirs)
if [ "$dirs" = "$S1:$((K * M)) $S2:$((K * M)) $S4:$(((K - 1) * M)) $S5:$((K * M)) " ]; then
        ok "windows: four windows per rank, but for node $Y's $M ranks the one they were down for, no other ($dirs)"
else fail "windows: other windows than $S1, $S2, $S4 (without node $Y) and $S5 were opened" "$dirs"; fi
all_ended() {
        local k
        for k in $live2; do
                jnode "$k" "all(w['outcome'] == 'done' for w in o['windows']) and o['outcomes']['done'] == len(o['windows'])" windows || return 1
        done
        jnode "$Y" "sorted((w['generation'], w['start_step'], w['outcome']) for w in o['windows']) == [(1, $S4, 'missed')] * $M + [(2, $S5, 'done')] * $M and o['outcomes']['done'] == o['outcomes']['missed'] == $M" windows
}
if all_ended; then ok "windows: no live node recorded a missed, failed or lost window; node $Y recorded $M missed and $M done, nothing else"
else fail "windows: a window ended otherwise" "$(for k in $all_nodes; do ctl "$k" windows; done)"; fi

# --- the fleet as a monitor sees it: the textfile collector's directory ------------------------

# fleet_ok: node X's daemon counts the windows since its restart (3), node Y's since its
# reboot (the one missed, then 1), the others all four; node Y's segment counts generations anew.
fleet_ok() {
        python3 "$promtext" check "$textfile"/node*.prom || return 1
        npf_json_holds 'import json, sys; f = json.loads(sys.argv[2])' \
                "len(f) == $K and all(f[n]['npuprof_up'] == 1 and f[n]['npuprof_generation'] == (2 if n == '$Y' else 5) and f[n]['npuprof_config_valid'] == 1 and f[n]['npuprof_ranks{state=\"done\"}'] == $M and f[n]['npuprof_metrics_file_errors_total'] == 0 and f[n]['npuprof_windows_total{outcome=\"done\"}'] == {'$X': 3, '$Y': 1}.get(n, 4) * $M and f[n]['npuprof_windows_total{outcome=\"missed\"}'] == ($M if n == '$Y' else 0) for n in f)" \
                fleet_metrics
}
if wait_for fleet_ok; then ok "monitor: $K valid files; each node up, generation 5 (node $Y's 2), $M ranks done, its windows counted (node $X's since its restart, node $Y's since its reboot: $M missed, $M done)"
else fail "monitor: the collected files disagree" "$(fleet_metrics)"; fi
fleet_metrics | python3 -c '
import json, sys
f = json.load(sys.stdin)
print("     node  up  gen  published            windows_done  windows_missed  ranks_done  file_errors")
for n in sorted(f, key=int):
    m = f[n]
    print("     %4s  %2d  %3d  %.3f  %12d  %14d  %10d  %11d" % (n, m["npuprof_up"], m["npuprof_generation"],
          m["npuprof_generation_published_timestamp_seconds"], m["npuprof_windows_total{outcome=\"done\"}"],
          m["npuprof_windows_total{outcome=\"missed\"}"], m["npuprof_ranks{state=\"done\"}"],
          m["npuprof_metrics_file_errors_total"]))'
for k in $all_nodes; do
        pid=$(vnode "$k" 'o["daemon"]["pid"]')
        echo "     node $k daemon (pid $pid, up $(vnode "$k" 'o["daemon"]["uptime_s"]') s): $(cpu_rss "$pid")"
done
echo "     total run $(since "$t0") s; windows by start step: $(window_dirs)"

echo "fleet: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
