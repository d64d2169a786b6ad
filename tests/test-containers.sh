#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Ranks in containers: real train-loop ranks, each in a pid namespace of its own (unshare
# --pid --fork --mount-proc, as Docker and Kubernetes start them, so that each is pid 1 in
# its namespace), sharing /dev/shm with the real npuprofd, driven by the real npuprofctl.
# They attach (status shows their step, state and pid as the daemon sees it), collect a long
# window that the daemon watches with ten sweeps a second, die by SIGKILL mid-window
# (recorded lost, once) or exit cleanly (recorded done); a rank id held in one namespace is
# given to no claimant of another while its holder lives. And --rank-group: the rank table
# is mode 0660 with that group, attachable by its members only; mode 0666 without it.
#   tests/test-containers.sh BUILD_DIR
# Needs root (pid namespaces, and becoming nobody). Ends with "containers: N passed, N failed".
set -u
build=${1:?usage: tests/test-containers.sh BUILD_DIR}
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl trainloop=$build/train-loop driver=$build/tests/rank-driver
for b in "$npuprofd" "$npuprofctl" "$trainloop" "$driver"; do
        [ -x "$b" ] || { echo "test-containers: $b is not built" >&2; exit 2; }
done
if [ "$(id -u)" -ne 0 ] || ! unshare --pid --fork --mount-proc true 2>/dev/null; then
        echo "test-containers: needs root and pid namespaces (unshare --pid --fork --mount-proc)"
        exit 77
fi

. "$(dirname "$0")/lib.sh"
npf_harness c
wait_ms=10000
chmod 0711 "$tmp"
group=npftest-cont-$$
have_group=''
if command -v groupadd >/dev/null && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null &&
   groupadd "$group" 2>/dev/null; then
        have_group=yes
        trap 'groupdel "$group" 2>/dev/null; npf_cleanup' EXIT
fi

diag() {
        echo "status: $(timeout 10 "$npuprofctl" --socket "$sock" --shm-name "$shm" status --json 2>&1 | head -c 3000)"
        echo "windows: $(timeout 10 "$npuprofctl" --socket "$sock" --shm-name "$shm" windows --json 2>&1 | head -c 2000)"
        echo "daemon log (last lines):"
        tail -n 8 "$log" 2>/dev/null
}

ctl() { timeout 10 "$npuprofctl" --socket "$sock" --shm-name "$shm" "$@"; }

# as_nobody [--groups GID] CMD...: CMD as nobody, in its own group and no other unless given.
as_nobody() {
        local groups=(--clear-groups)
        [ "$1" = --groups ] && { groups=(--groups "$2"); shift 2; }
        timeout 10 setpriv --reuid "$(id -u nobody)" --regid "$(id -g nobody)" "${groups[@]}" -- "$@"
}

# Python on a --json reply: `o` is the object, R(n) rank n's row, W(n) rank n's windows.
py_prelude='
import json, sys
o = json.loads(sys.argv[2])
def R(n):
    return next((x for x in (o.get("ranks") or []) if x.get("rank") == n), None)
def W(n):
    return [x for x in (o.get("windows") or []) if x.get("rank") == n]
'
js() { npf_json_holds "$py_prelude" "$1" ctl status --json; }
jw() { npf_json_holds "$py_prelude" "$1" ctl windows --json; }
jv() { npf_json_print "$py_prelude" "json.dumps($1)" ctl status --json; }

# start_daemon [ARGS...]: npuprofd on this test's config, shm and socket, sweeping ten times a second.
start_daemon() {
        "$npuprofd" --config "$conf" --shm-name "$shm" --socket "$sock" --output-root "$out" --analyze-jobs 0 \
                --poll-interval 100 --log stderr "$@" 2>>"$log" &
        dpid=$!
        all_pids+=("$dpid") test_pids+=("$dpid")
        wait_for ctl status >/dev/null 2>&1
}

# in_container NAME CMD...: CMD as pid 1 of a new pid namespace with its own /proc, sharing
# /dev/shm; its output in $dir/NAME.out. Sets ns_unshare (the unshare process).
in_container() {
        local name=$1; shift
        unshare --pid --fork --mount-proc "$@" >"$dir/$name.out" 2>&1 </dev/null &
        ns_unshare=$!
        all_pids+=("$ns_unshare") test_pids+=("$ns_unshare")
}

# host_pid UNSHARE PROGRAM: the pid, here, of the namespace's pid 1 once it runs PROGRAM.
host_pid() {
        local p
        p=$(cut -d' ' -f1 "/proc/$1/task/$1/children" 2>/dev/null)
        [ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$2" ] && echo "$p"
}
wait_host_pid() {
        local deadline=$(($(now_ms) + wait_ms)) p
        until p=$(host_pid "$1" "$2"); do
                [ "$(now_ms)" -ge "$deadline" ] && return 1
                sleep 0.02
        done
        echo "$p"
}

# manifest_field DIR KEY: a key of DIR/manifest.json.
manifest_field() {
        python3 -c 'import json, sys; print(json.load(open(sys.argv[1] + "/manifest.json")).get(sys.argv[2]))' "$1" "$2" \
                2>/dev/null
}

# --- one rank in a container: attached, a long window, done ------------------------------

t_long_window() {
        local host u wdir looks=0 bad=0 seen first='' last=''
        printf '{"start_step": 30, "steps": 400}\n' >"$conf"
        start_daemon || { fail "window: the daemon did not start" "$(diag)"; return; }
        in_container rank0 "$trainloop" --rank 0 --steps 500 --step-ms 10 --busy 0 --shm-name "$shm" --backend host
        u=$ns_unshare
        host=$(wait_host_pid "$u" train-loop)
        [ -n "$host" ] || { fail "window: the rank did not start in its namespace" "$(cat "$dir/rank0.out")"; return; }
        eventually "window: status shows the namespaced rank attached, collecting, with its pid here ($host)" \
                js "R(0) is not None and R(0)['pid'] == $host and R(0)['state'] == 'collecting'"
        check "window: one rank attached" js "len(o['ranks']) == 1"
        check "window: the text status shows its pid here and its state" \
                grep -qE "^ +0 +$host +[0-9]+ +collecting " <(ctl status)
        # Watched through its window, ten sweeps a second: at every look until the window
        # closes it is attached, with its pid here and a step that moves on.
        while seen=$(jv '[R(0)["pid"], R(0)["state"], R(0)["step"]] if R(0) else None'); do
                case $seen in
                "[$host, \"collecting\", "*) ;;
                "[$host, \"flushing\", "*|"[$host, \"done\", "*) break ;;
                *) bad=$((bad + 1)); break ;;
                esac
                looks=$((looks + 1))
                last=${seen##*, } last=${last%]}
                [ -n "$first" ] || first=$last
                sleep 0.1
        done
        check "window: attached and collecting at each of $looks looks (steps $first to $last), then ended" \
                test "$looks" -ge 3 -a "$bad" -eq 0 -a "${last:-0}" -ge "$((${first:-0} + 100))"
        check "window: no window was recorded lost meanwhile" jw "o['outcomes']['lost'] == 0"
        wait "$u"
        check "window: the rank ran to its end" grep -q 'window done' "$dir/rank0.out"
        eventually "window: the window is recorded done" jw "[w['outcome'] for w in W(0)] == ['done']"
        check "window: done once and never lost, with its pid here" \
                jw "o['outcomes']['done'] == 1 and o['outcomes']['lost'] == 0 and W(0)[0]['pid'] == $host and W(0)[0]['start_step'] == 30 and W(0)[0]['stop_step'] == 429"
        wdir=$out/rank0_start30_stop429
        check "window: its manifest is complete" test "$(manifest_field "$wdir" status)" = complete
        check "window: the rank recorded pid 1, its own in its namespace" test "$(manifest_field "$wdir" pid)" = 1
        eventually "window: the rank is detached once gone" js "o['ranks'] == []"
        check "window: the log says nothing was lost" test "$(grep -c ' lost' "$log")" -eq 0
        npf_stop_daemon window
}

# --- two ranks in containers, both pid 1 there: one killed mid-window, one done ------------

t_kill_and_finish() {
        local u1 u2 h1 h2 wdir
        printf '{"start_step": 30, "steps": 200}\n' >"$conf"
        start_daemon || { fail "kill: the daemon did not start" "$(diag)"; return; }
        in_container rank1 "$trainloop" --rank 1 --steps 100000 --step-ms 10 --busy 0 --shm-name "$shm" --backend host
        u1=$ns_unshare
        in_container rank2 "$trainloop" --rank 2 --steps 700 --step-ms 10 --busy 0 --shm-name "$shm" --backend host
        u2=$ns_unshare
        h1=$(wait_host_pid "$u1" train-loop) h2=$(wait_host_pid "$u2" train-loop)
        if [ -z "$h1" ] || [ -z "$h2" ]; then
                fail "kill: the ranks did not start" "$(cat "$dir"/rank*.out)"
                return
        fi
        eventually "kill: both namespaced ranks (pid 1 each, there) are attached, collecting, with their pids here" \
                js "R(1) and R(2) and R(1)['pid'] == $h1 and R(2)['pid'] == $h2 and R(1)['state'] == R(2)['state'] == 'collecting'"
        kill -KILL "$h1"
        eventually "kill: the killed rank's window is recorded lost" jw "[w['outcome'] for w in W(1)] == ['lost']"
        check "kill: the lost window names the rank's pid here" jw "W(1)[0]['pid'] == $h1 and W(1)[0]['start_step'] == 30"
        check "kill: the other rank stays attached" js "R(1) is None and R(2) is not None and R(2)['pid'] == $h2"
        wait "$u2"
        check "kill: the other rank ran to its end" grep -q 'window done' "$dir/rank2.out"
        eventually "kill: the other rank's window is recorded done" jw "[w['outcome'] for w in W(2)] == ['done']"
        sleep 1         # ten sweeps more: nothing is recorded twice
        check "kill: lost once, done once, nothing else" \
                jw "o['outcomes']['lost'] == 1 and o['outcomes']['done'] == 1 and len(o['windows']) == 2 and W(2)[0]['pid'] == $h2"
        check "kill: the log says lost once" test "$(grep -c "rank 1 (pid $h1): window 30..229 lost" "$log")" -eq 1
        wdir=$out/rank1_start30_stop229
        eventually "kill: the daemon marked the killed rank's window incomplete" \
                test "$(manifest_field "$wdir" written_by)" = npuprofd
        check "kill: ... as incomplete" test "$(manifest_field "$wdir" status)" = incomplete
        check "kill: the finished rank's manifest is complete" \
                test "$(manifest_field "$out/rank2_start30_stop229" status)" = complete
        check "kill: no rank is attached" js "o['ranks'] == []"
        npf_stop_daemon kill
}

# --- a rank id held in a container is given to no one else while its holder lives ---------

t_never_twice() {
        local u h out2
        printf '{"start_step": 100000, "steps": 2}\n' >"$conf"
        start_daemon || { fail "twice: the daemon did not start" "$(diag)"; return; }
        in_container holder "$driver" --shm "$shm" --rank 3 --step 5 --hold
        u=$ns_unshare
        h=$(wait_host_pid "$u" rank-driver)
        eventually "twice: the namespaced holder of rank 3 is attached with its pid here" \
                js "R(3) is not None and R(3)['pid'] == $h and R(3)['step'] == 5"
        sleep 0.5       # five sweeps
        out2=$(unshare --pid --fork --mount-proc "$driver" --shm "$shm" --rank 3 2>&1)
        check "twice: a claimant in another container is refused" \
                grep -q 'already claimed by a live process of another pid namespace, pid 1 there' <<<"$out2"
        out2=$("$driver" --shm "$shm" --rank 3 2>&1)
        check "twice: a claimant in the daemon's namespace is refused" grep -q 'already claimed' <<<"$out2"
        check "twice: the holder keeps its slot, alone" js "len(o['ranks']) == 1 and R(3)['pid'] == $h"
        kill -KILL "$h"
        eventually "twice: killed, its slot is freed" js "o['ranks'] == []"
        out2=$(unshare --pid --fork --mount-proc "$driver" --shm "$shm" --rank 3 2>&1)
        check "twice: then rank 3 may be claimed in a container" grep -q '^claimed slot' <<<"$out2"
        npf_stop_daemon twice
}

# --- --rank-group: mode 0660 and a group, and who may attach ---------------------------------

t_rank_group() {
        local gid out2
        [ -n "$have_group" ] || { skip "rank-group: needs groupadd, the user nobody and setpriv"; return; }
        gid=$(getent group "$group" | cut -d: -f3)
        printf '{"start_step": 100000, "steps": 2}\n' >"$conf"

        start_daemon || { fail "rank-group: the daemon did not start" "$(diag)"; return; }
        check "rank-group: without it the rank table is mode 0666" test "$(stat -c %a "/dev/shm/$shm.ranks")" = 666
        out2=$(as_nobody "$driver" --shm "$shm" --rank 20 2>&1)
        check "rank-group: without it any user attaches a rank" grep -q '^claimed slot' <<<"$out2"
        kill -KILL "$dpid"
        wait "$dpid" 2>/dev/null

        # The same segment adopted by a daemon given the group is put to its mode and group.
        start_daemon --rank-group "$group" || { fail "rank-group: the daemon did not start" "$(diag)"; return; }
        check "rank-group: the rank table is mode 0660 with the group" \
                test "$(stat -c '%a %G' "/dev/shm/$shm.ranks")" = "660 $group"
        check "rank-group: the control block stays mode 0644" test "$(stat -c %a "/dev/shm/$shm.ctl")" = 644
        out2=$(as_nobody "$driver" --shm "$shm" --rank 21 2>&1)
        check "rank-group: a user outside the group cannot attach" grep -q 'Permission denied' <<<"$out2"
        out2=$(as_nobody --groups "$gid" "$driver" --shm "$shm" --rank 22 2>&1)
        check "rank-group: a member of the group attaches" grep -q '^claimed slot' <<<"$out2"
        kill -TERM "$dpid"
        wait "$dpid" 2>/dev/null

        # Made anew, it is never open to others: created readable by the daemon's user alone.
        shm=$shm-new
        start_daemon --rank-group "$group" || { fail "rank-group: the daemon did not start" "$(diag)"; return; }
        check "rank-group: a new rank table is mode 0660 with the group" \
                test "$(stat -c '%a %G' "/dev/shm/$shm.ranks")" = "660 $group"
        out2=$("$npuprofd" --config "$conf" --shm-name "$shm-x" --socket "$dir/x.sock" --rank-group no-such-group-$$ 2>&1)
        check "rank-group: an unknown group is a usage error" \
                grep -q "rank-group: no group 'no-such-group-$$'" <<<"$out2"
}

npf_run t_long_window
npf_run t_kill_and_finish
npf_run t_never_twice
npf_run t_rank_group

echo "containers: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
