#!/usr/bin/env bash
# Output confinement: window output goes under the output root and nowhere else, whatever a
# configuration or a planted symbolic link asks for, and it is written as the rank's user,
# never the daemon's. The real npuprofd, real train-loop ranks (as root and as `nobody`) and
# the real npuprof-replay, on a private config directory, shm name and socket.
#   tests/hostile/test-confine.sh BUILD_DIR
set -u
build=${1:?usage: tests/hostile/test-confine.sh BUILD_DIR}
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl trainloop=$build/train-loop
for b in "$npuprofd" "$npuprofctl" "$trainloop" "$build/npuprof-replay"; do
        [ -x "$b" ] || { echo "test-confine: $b is not built" >&2; exit 2; }
done
analyzer=$(cd "$build" && pwd)/npuprof-replay
mem_opts=()
grep -qaE "__asan_init|__tsan_init" "$analyzer" && mem_opts=(--analyze-memory 0)

. "$(dirname "$0")/../lib.sh"
npf_harness c
chmod 0755 "$tmp"       # the ranks run as nobody go through it
wait_ms=10000
user=nobody uid=$(id -u nobody 2>/dev/null) gid=$(id -g nobody 2>/dev/null)

diag() {
        echo "status: $(ctl status --json 2>&1 | head -c 2000)"
        echo "daemon log (last lines):"; tail -n 8 "$log" 2>/dev/null
}
ctl() { timeout 20 "$npuprofctl" --socket "$sock" --shm-name "$shm" "$@"; }

py_status='
import json, sys
o = json.loads(sys.argv[2])
cfg = o.get("config") or {}
e = cfg.get("error") or {}
E = "%s %s:%s %s" % (e.get("key"), e.get("line"), e.get("column"), e.get("message")) if e else ""
'
js() { npf_json_holds "$py_status" "$1" ctl status --json; }
sv() { npf_json_print "$py_status" "$1" ctl status --json; }
py_windows='
import json, sys
W = json.loads(sys.argv[2]).get("windows") or []
'
jw() { npf_json_holds "$py_windows" "$1" ctl windows --json; }

# write_conf OUTPUT_DIR: the window 3..4 of every rank, written atomically.
# write_conf DIR [STEPS]: a window from step 3, of STEPS steps (2), into output_dir DIR.
write_conf() {
        printf '{\n  "start_step": 3,\n  "steps": %d,\n  "output_dir": "%s"\n}\n' "${2:-2}" "$1" >"$conf.tmp~"
        mv -f "$conf.tmp~" "$conf"
}

start_daemon() {
        ( ulimit -c 0; exec "$npuprofd" --config "$conf" --shm-name "$shm" --socket "$sock" --log stderr \
                --output-root "$root" --analyzer "$analyzer" "${mem_opts[@]}" "$@" ) 2>>"$log" &
        dpid=$!
        all_pids+=("$dpid") test_pids+=("$dpid")
        wait_for js 'cfg.get("state") not in (None, "unknown")'
}

# train RANK [AS-USER]: one train-loop through the window, to its end.
train() {
        local run=()
        [ -n "${2:-}" ] && run=(setpriv --reuid="$uid" --regid="$gid" --clear-groups)
        "${run[@]}" "$trainloop" --rank "$1" --steps 8 --step-ms 10 --shm-name "$shm" --backend host \
                >"$dir/tl$1.out" 2>&1
}

run() {
        local p
        n=$((n + 1))
        dir=$tmp/$n
        mkdir -p "$dir/root" "$dir/outside"
        chmod 0755 "$dir"
        conf=$dir/profiler_config.json shm=npftest-c-$$-$n sock=$dir/npuprofd.sock log=$dir/daemon.log
        root=$dir/root
        test_pids=() dpid=''
        write_conf "job"
        "$@"
        for p in "${test_pids[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
        rm -f "/dev/shm/$shm.ctl" "/dev/shm/$shm.ranks"
}

# A file that would publish $1 is refused, with $2 in the error at the key, and the
# configuration in force is kept.
refused() {
        local what=$1 words=$2 g0
        g0=$(sv 'cfg["generation"]')
        write_conf "$what"
        eventually "\"$what\": refused with \"$words\"" \
                js "cfg.get(\"state\") == \"invalid\" and \"output_dir\" in E and \"$words\" in E"
        check "\"$what\": the error is placed at its line and column" js '"output_dir 4:" in E'
        check "\"$what\": generation $g0 stays in force" test "$(sv 'cfg["generation"]')" = "$g0"
}

# --- refused before publication -------------------------------------------------------

t_refused() {
        start_daemon || { fail "refused: the daemon did not start" "$(diag)"; return; }
        check "refused: the good file is published" js 'cfg.get("state") == "valid" and cfg["generation"] == 1'
        refused "/etc" "outside the output root"
        refused "$dir/outside" "outside the output root"
        refused "job/../../outside" '\"..\" component'
        ln -s "$dir/outside" "$root/planted"
        refused "planted/job" "reaches through the symbolic link $root/planted (-> $dir/outside)"
        refused "$root/planted" "symbolic link"
        mkdir -p "$root/deep/er" && ln -s ../.. "$root/deep/er/up"
        refused "deep/er/up/job" "reaches through the symbolic link $root/deep/er/up"
        check "refused: nothing was made outside the root" test -z "$(ls -A "$dir/outside")"
        write_conf "job2"
        eventually "refused: a good file after them is published" js 'cfg.get("state") == "valid" and cfg["generation"] == 2'
}

# --- a link planted after publication: the rank refuses it ------------------------------

t_planted_late() {
        start_daemon --analyze-jobs 0 || { fail "late link: the daemon did not start" "$(diag)"; return; }
        write_conf "team/job"
        eventually "late link: team/job is published (it does not exist yet)" \
                js 'cfg.get("state") == "valid" and cfg["generation"] == 2'
        ln -s "$dir/outside" "$root/team"       # after the daemon's check
        train 1
        check "late link: the training loop still ran to its end" grep -q '8 steps done' "$dir/tl1.out"
        eventually "late link: the window failed, naming the link" \
                jw 'any(w["rank"] == 1 and w["outcome"] == "failed" and "symbolic link" in (w.get("message") or "") for w in W)'
        check "late link: nothing was written through it" test -z "$(ls -A "$dir/outside")"
}

# --- written as the rank's user ----------------------------------------------------------

t_rank_user() {
        local w bad
        if [ -z "$uid" ] || ! setpriv --reuid="$uid" --regid="$gid" --clear-groups true 2>/dev/null; then
                fail "rank user: cannot run a rank as $user here"
                return
        fi
        chmod 1777 "$root"
        start_daemon || { fail "rank user: the daemon did not start" "$(diag)"; return; }
        train 5 as-nobody
        w=$root/job/rank5_start3_stop4
        check "rank user: the window was written" test -s "$w/manifest.json"
        eventually "rank user: the daemon's analysis is done" \
                jw 'any(w["rank"] == 5 and (w.get("analysis") or {}).get("state") == "done" for w in W)'
        check "rank user: the report is in the window directory" test -s "$w/analysis/report.json"
        bad=$(find "$root/job" ! -uid "$uid" -printf '%u %p\n')
        check "rank user: every file and directory of the window is $user's${bad:+ (not: $bad)}" test -z "$bad"
        check "rank user: the daemon ran as root all along" test "$(stat -c %u "/proc/$dpid")" = 0
}

# A window lost with its rank: the manifest the daemon writes for it is the rank's user's too.
t_lost_user() {
        local w pid
        chmod 1777 "$root"
        # A window of 10 s (50 steps of 200 ms): still open when the rank is killed, however slow the check.
        write_conf job 50
        start_daemon --analyze-jobs 0 --poll-interval 100 || { fail "lost: the daemon did not start" "$(diag)"; return; }
        setpriv --reuid="$uid" --regid="$gid" --clear-groups "$trainloop" --rank 7 --steps 100 --step-ms 200 \
                --shm-name "$shm" --backend host >"$dir/tl7.out" 2>&1 &
        pid=$!
        all_pids+=("$pid") test_pids+=("$pid")
        w=$root/job/rank7_start3_stop52
        eventually "lost: rank 7 is collecting as $user" \
                js 'any(r["rank"] == 7 and r["state"] == "collecting" for r in o["ranks"])'
        check "lost: its window directory is there" test -d "$w"
        kill -KILL "$pid"
        wait "$pid" 2>/dev/null
        eventually "lost: the window is recorded lost" \
                jw 'any(w["rank"] == 7 and w["outcome"] == "lost" for w in W)'
        eventually "lost: the daemon wrote an incomplete manifest" grep -q '"incomplete"' "$w/manifest.json"
        check "lost: the manifest is $user's, not the daemon's" test "$(stat -c %u "$w/manifest.json")" = "$uid"
}

# A link planted in a lost window's path before the daemon sees it lost: no manifest through it.
t_lost_link() {
        local pid
        chmod 1777 "$root"
        write_conf job 50
        # Sweeps on request only: the window is found lost at the first `windows` below.
        start_daemon --analyze-jobs 0 --poll-interval 86400000 \
                || { fail "lost link: the daemon did not start" "$(diag)"; return; }
        setpriv --reuid="$uid" --regid="$gid" --clear-groups "$trainloop" --rank 8 --steps 100 --step-ms 200 \
                --shm-name "$shm" --backend host >"$dir/tl8.out" 2>&1 &
        pid=$!
        all_pids+=("$pid") test_pids+=("$pid")
        eventually "lost link: rank 8 is collecting" \
                js 'any(r["rank"] == 8 and r["state"] == "collecting" for r in o["ranks"])'
        check "lost link: its window directory is there" test -d "$root/job/rank8_start3_stop52"
        kill -KILL "$pid"
        wait "$pid" 2>/dev/null
        # The rank's own directory leads out of the root now.
        mv "$root/job" "$dir/outside/job" && ln -s "$dir/outside/job" "$root/job"
        eventually "lost link: the window is recorded lost" \
                jw 'any(w["rank"] == 8 and w["outcome"] == "lost" for w in W)'
        check "lost link: no manifest was written through the link" \
                test ! -e "$dir/outside/job/rank8_start3_stop52/manifest.json"
        eventually "lost link: the log says why" grep -q "no manifest written: .*symbolic link" "$log"
}

# The daemon running as root never writes into a rank's directory as root: a link the rank
# plants where the analyzer writes leads only where the rank itself may write.
t_analysis_link() {
        local w
        chmod 1777 "$root"
        # Sweeps on request only: the daemon sees the window end at the first `windows` below.
        start_daemon --poll-interval 86400000 || { fail "analysis link: the daemon did not start" "$(diag)"; return; }
        train 6 as-nobody
        w=$root/job/rank6_start3_stop4
        # Before the daemon sees the window end: rank 6 owns the directory and plants a link.
        setpriv --reuid="$uid" --regid="$gid" --clear-groups ln -s "$dir/outside" "$w/analysis" 2>/dev/null
        eventually "analysis link: the analysis ended" \
                jw 'any(w["rank"] == 6 and (w.get("analysis") or {}).get("state") in ("done", "failed") for w in W)'
        check "analysis link: the link was in place" test -L "$w/analysis"
        check "analysis link: nothing was written outside the root" test -z "$(ls -A "$dir/outside")"
}

run t_refused
run t_planted_late
run t_rank_user
run t_lost_user
run t_lost_link
run t_analysis_link

echo "confine: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
