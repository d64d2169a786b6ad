#!/usr/bin/env bash
# Integration tests of npuprofd: the real daemon on a private config directory, shm name and
# socket, driven by the real npuprofctl and by rank-driver, which plays a training rank
# through the real slot API.
#   tests/test-npuprofd.sh BUILD_DIR
# Every test starts its own daemon and cleans up after itself; nothing depends on the order
# the tests run in. Waits are bounded polls (wait_for, 5 s), never a stopwatch.
set -u
build=${1:?usage: tests/test-npuprofd.sh BUILD_DIR}
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl driver=$build/tests/rank-driver
for b in "$npuprofd" "$npuprofctl" "$driver"; do
        [ -x "$b" ] || { echo "test-npuprofd: $b is not built" >&2; exit 2; }
done

. "$(dirname "$0")/lib.sh"
npf_harness d

# What the running test's daemon looks like, for a failure's report.
diag() {
        echo "status: $(timeout 10 "$npuprofctl" --socket "$sock" --shm-name "$shm" status --json 2>&1 | head -c 3000)"
        echo "daemon log (last lines):"
        tail -n 8 "$log" 2>/dev/null
}

# The running test's npuprofctl.
ctl() { timeout 10 "$npuprofctl" --socket "$sock" --shm-name "$shm" "$@"; }
quiet() { "$@" >/dev/null 2>&1; }

# Python run on a --json reply: `o` is the object, `cfg` its config, R(n) the rank n entry.
py_prelude='
import json, sys
o = json.loads(sys.argv[2])
cfg = (o.get("config") or {}) if isinstance(o, dict) else {}
def R(n):
    return next((x for x in (o.get("ranks") or []) if x.get("rank") == n), None)
'
# js EXPR: `status --json` satisfies the Python expression EXPR.
js() { npf_json_holds "$py_prelude" "$1" ctl status --json; }
# jsr EXPR: as js, on `ranks --json`.
jsr() { npf_json_holds "$py_prelude" "$1" ctl ranks --json; }
# jv EXPR: print the value of EXPR on `status --json`, as JSON.
jv() { npf_json_print "$py_prelude" "json.dumps($1)" ctl status --json || { echo unreachable; return 1; }; }
gen() { jv 'cfg["generation"]'; }

# The file status's checked_ns (CLOCK_REALTIME of the daemon's last read of the file), read
# straight from the segment: offsetof(npf_shm_ctl_t, status) + offsetof(status, checked_ns).
checked_ns() { od -An -tu8 -j $((16768 + 16)) -N8 "/dev/shm/$shm.ctl" 2>/dev/null | tr -d ' '; }
checked_after() { local c; c=$(checked_ns); [ -n "$c" ] && [ "$c" != "$1" ]; }

# The configuration file in its ways of being saved. cfg_text START STEPS.
cfg_text() { printf '{\n  "start_step": %s,\n  "steps": %s\n}\n' "$1" "$2"; }
save_rename() { cfg_text "$1" "$2" >"$conf.tmp~" && mv -f "$conf.tmp~" "$conf"; }

# The process is gone (or a zombie waiting for us to reap it).
gone() {
        local s
        s=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 0
        [ -z "$s" ] || [ "$s" = Z ]
}
alive() { ! gone "$1"; }

# start_daemon [ARGS...]: npuprofd on this test's config, shm and socket; sets dpid. Waits
# until it answers and has read its file once.
start_daemon() {
        "$npuprofd" --config "$conf" --shm-name "$shm" --socket "$sock" --log stderr "$@" 2>>"$log" &
        dpid=$!
        all_pids+=("$dpid") test_pids+=("$dpid")
        wait_for js 'cfg.get("state") not in (None, "unknown")'
}

# start_driver OUT ARGS...: a rank-driver holding its slot; sets drv_pid. Waits for its claim.
start_driver() {
        local out=$1; shift
        "$driver" --shm "$shm" "$@" --hold >"$out" 2>&1 &
        drv_pid=$!
        all_pids+=("$drv_pid") test_pids+=("$drv_pid")
        wait_for grep -q '^claimed slot' "$out"
}

# stop_pid PID: reap a process we started (SIGKILL if it still runs).
stop_pid() {
        kill -KILL "$1" 2>/dev/null
        wait "$1" 2>/dev/null
        return 0
}

# run NAME: run test function NAME in a fresh private world.
run() {
        local p
        n=$((n + 1))
        dir=$tmp/$n
        mkdir -p "$dir"
        conf=$dir/profiler_config.json shm=npftest-d-$$-$n sock=$dir/npuprofd.sock log=$dir/daemon.log
        test_pids=() dpid='' drv_pid=''
        cfg_text 10 2 >"$conf"
        "$@"
        for p in "${test_pids[@]}"; do stop_pid "$p"; done 2>/dev/null
        rm -f "/dev/shm/$shm.ctl" "/dev/shm/$shm.ranks"
}

# --- saving the file ------------------------------------------------------------------

# Each way of saving gives exactly one new generation with the new window.
t_save() {
        local how=$1 g0 ino
        shift
        start_daemon "$@" || { fail "save ($how): the daemon did not start" "$(diag)"; return; }
        g0=$(gen)
        ino=$(stat -c %i "$conf")
        case $how in
        "write in place")
                # Same inode, no O_TRUNC: overwrite the bytes, then cut the file to length.
                python3 -c 'import sys
with open(sys.argv[1], "r+") as f:
    f.write(sys.argv[2]); f.truncate()' "$conf" "$(cfg_text 20 3)"
                [ "$(stat -c %i "$conf")" = "$ino" ] || fail "save ($how): the test replaced the inode"
                ;;
        "rename over"|"rename over, polling only")
                save_rename 20 3
                ;;
        "delete then re-create")
                rm -f "$conf"
                cfg_text 20 3 >"$conf"
                ;;
        "truncate then write")
                : >"$conf"
                # The daemon sees the empty file, refuses it, and keeps the last good one.
                eventually "save ($how): the empty file is refused, generation $g0 kept" \
                        js "cfg['valid'] is False and cfg['generation'] == $g0 and cfg['window']['start_step'] == 10"
                cfg_text 20 3 >>"$conf"
                ;;
        esac
        eventually "save ($how): the new window is in force" \
                js "cfg['valid'] is True and cfg['window']['start_step'] == 20 and cfg['window']['stop_step'] == 22"
        check "save ($how): the generation moved by exactly one" js "cfg['generation'] == $g0 + 1"
}

# --- a broken file, then its fix --------------------------------------------------------

t_invalid_then_fixed() {
        local g0 c i
        start_daemon --poll-interval 50 || { fail "invalid: the daemon did not start" "$(diag)"; return; }
        g0=$(gen)
        printf '{\n  "start_step": 30,\n  "steps": "three"\n}\n' >"$conf.tmp~" && mv -f "$conf.tmp~" "$conf"
        eventually "invalid: status shows config.valid false" js "cfg['valid'] is False"
        check "invalid: the error has line 3, column 12 and key steps" \
                js "cfg['error']['line'] == 3 and cfg['error']['column'] == 12 and cfg['error']['key'] == 'steps' and 'three' in cfg['error']['message']"
        check "invalid: the last good window stays in force" \
                js "cfg['window']['start_step'] == 10 and cfg['window']['stop_step'] == 11"
        check "invalid: the generation does not move" js "cfg['generation'] == $g0"
        check "invalid: the text status names line, column and key" \
                grep -q 'error: line 3, column 12: steps: expected an integer' <(ctl status)
        # Read the broken file again and again: by touching it, and by saving it once more.
        for i in 1 2 3; do
                c=$(checked_ns)
                touch -d "@$((1000000000 + i))" "$conf"
                wait_for checked_after "$c" || break
        done
        c=$(checked_ns)
        printf '{\n  "start_step": 30,\n  "steps": "three"\n}\n' >"$conf.tmp~" && mv -f "$conf.tmp~" "$conf"
        wait_for checked_after "$c"
        sleep 0.3       # six poll intervals in which nothing must happen
        check "invalid: re-reading the same broken file does not move the generation" \
                js "cfg['generation'] == $g0 and cfg['valid'] is False"
        check "invalid: the same broken version counts as one error" js "cfg['error_count'] == 1"
        wait_for grep -q -F "$conf:3:12:" "$log"
        check "invalid: the error is logged once however often it is read" \
                test "$(grep -c -F "$conf:3:12:" "$log")" -eq 1
        # Another mistake is another error, logged once too.
        printf '{\n  "start_step": 30,\n     "steps": 0\n}\n' >"$conf.tmp~" && mv -f "$conf.tmp~" "$conf"
        eventually "invalid: a different mistake is reported with its own place" \
                js "cfg['valid'] is False and cfg['error']['line'] == 3 and cfg['error']['column'] == 15"
        check "invalid: a different broken version counts again" js "cfg['error_count'] == 2"
        wait_for grep -q -F "$conf:3:15:" "$log"
        check "invalid: a different mistake is logged once" \
                test "$(grep -c -F "$conf:3:15:" "$log")" -eq 1
        # The fix.
        save_rename 30 4
        eventually "invalid: the fix is published" \
                js "cfg['valid'] is True and cfg['error'] is None and cfg['window']['start_step'] == 30 and cfg['window']['stop_step'] == 33"
        check "invalid: the fix moves the generation by exactly one" js "cfg['generation'] == $g0 + 1"
        eventually "invalid: the log says the file is valid again" grep -q 'is valid again' "$log"
}

# --- a deleted file ---------------------------------------------------------------------

t_deleted() {
        local g0
        start_daemon || { fail "deleted: the daemon did not start" "$(diag)"; return; }
        g0=$(gen)
        rm -f "$conf"
        eventually "deleted: status shows state missing" js "cfg['state'] == 'missing' and cfg['valid'] is False"
        check "deleted: the last good configuration stays in force" \
                js "cfg['generation'] == $g0 and cfg['window']['start_step'] == 10"
        check "deleted: the error says the file is missing" \
                js "cfg['error'] is not None and 'No such file' in cfg['error']['message']"
        check "deleted: npuprofctl config still gives the configuration in force" \
                grep -q "\"generation\": *$g0" <(ctl config)
        cfg_text 10 2 >"$conf"
        eventually "deleted: the same content back makes the file valid again" js "cfg['state'] == 'valid'"
        check "deleted: the same content back is not a new generation" js "cfg['generation'] == $g0"
}

# --- identical content ----------------------------------------------------------------

t_identical() {
        local g0 c
        start_daemon || { fail "identical: the daemon did not start" "$(diag)"; return; }
        g0=$(gen)
        c=$(checked_ns)
        save_rename 10 2
        check "identical: the daemon read the re-saved file" wait_for checked_after "$c"
        c=$(checked_ns)
        cfg_text 10 2 >"$conf"
        check "identical: the daemon read the file written in place" wait_for checked_after "$c"
        check "identical: re-saving the same content does not move the generation" \
                js "cfg['generation'] == $g0 and cfg['valid'] is True"
        wait_for grep -q 'published generation' "$log"
        check "identical: nothing was published" test "$(grep -c 'published generation' "$log")" -eq 1
}

# --- SIGHUP and reload ------------------------------------------------------------------

# The daemon neither polls nor watches within the test, so only a reload can see an edit.
t_sighup() {
        local g0
        start_daemon --no-inotify --poll-interval 600000 || { fail "SIGHUP: the daemon did not start" "$(diag)"; return; }
        g0=$(gen)
        kill -HUP "$dpid"
        eventually "SIGHUP: the reload is counted" js "o['reloads'] == 1"
        check "SIGHUP: unchanged content keeps the generation" js "cfg['generation'] == $g0"
        save_rename 50 5
        kill -HUP "$dpid"
        eventually "SIGHUP: the edited file is read and published" \
                js "o['reloads'] == 2 and cfg['window']['start_step'] == 50 and cfg['generation'] == $g0 + 1"
        check "SIGHUP: the daemon still runs" alive "$dpid"
}

t_reload() {
        local g0 out
        start_daemon --no-inotify --poll-interval 600000 || { fail "reload: the daemon did not start" "$(diag)"; return; }
        g0=$(gen)
        out=$(ctl reload 2>&1)
        check "reload: unchanged content: reply with the same generation" \
                grep -q "^reloaded: generation $g0, file valid" <<<"$out"
        check "reload: counted in status" js "o['reloads'] == 1 and cfg['generation'] == $g0"
        save_rename 60 2
        out=$(ctl reload 2>&1)
        check "reload: the reply already has the new generation" \
                grep -q "^reloaded: generation $((g0 + 1)), file valid" <<<"$out"
        check "reload: the new window is in force" js "cfg['window']['start_step'] == 60 and o['reloads'] == 2"
        printf '{"start_step": }\n' >"$conf"
        out=$(ctl reload 2>&1)
        rc=$?
        check "reload: a broken file: the reply says invalid, generation kept" \
                grep -q "^reloaded: generation $((g0 + 1)), file invalid" <<<"$out"
        check "reload: a broken file exits 1 and says why to look at status" \
                test "$rc" = 1 -a -n "$(grep 'stays in force (npuprofctl status shows why)' <<<"$out")"
        rm -f "$conf"
        out=$(ctl reload 2>&1)
        check "reload: a deleted file: the reply says missing, exit 1" \
                test "$?" = 1 -a -n "$(grep -- '^reloaded: generation .*, file missing' <<<"$out")"
}

# --- ranks --------------------------------------------------------------------------------

t_ranks() {
        local out
        start_daemon || { fail "ranks: the daemon did not start" "$(diag)"; return; }
        start_driver "$dir/r5.out" --rank 5 --step 42 --state armed --window 100-104 \
                || { fail "ranks: rank-driver did not claim" "$(cat "$dir/r5.out")"; return; }
        check "ranks: ranks --json shows rank 5 with its pid, step and state" \
                jsr "R(5) is not None and R(5)['pid'] == $drv_pid and R(5)['step'] == 42 and R(5)['state'] == 'armed' and R(5)['start_step'] == 100 and R(5)['stop_step'] == 104"
        check "ranks: status --json shows the same rank" \
                js "len(o['ranks']) == 1 and R(5)['pid'] == $drv_pid and R(5)['step'] == 42 and R(5)['state'] == 'armed'"
        out=$(ctl status)
        check "ranks: the status table has the rank's row" \
                grep -Eq "^ +5 +$drv_pid +42 +armed .* 100\.\.104 " <<<"$out"
        out=$(ctl ranks)
        check "ranks: the ranks table has the rank's row" grep -Eq "^ +5 +$drv_pid +42 +armed " <<<"$out"
        check "ranks: metrics count one armed rank" \
                grep -q '^npuprof_ranks{state="armed"} 1$' <(ctl metrics)
        out=$("$driver" --shm "$shm" --rank 5 2>&1)
        check "ranks: a second claim of rank 5 fails naming the holder" \
                test $? -eq 1 -a -n "$(grep "already claimed by live process $drv_pid" <<<"$out")"
        kill -TERM "$drv_pid"
        eventually "ranks: a rank that releases its slot is gone" js "o['ranks'] == []"
        check "ranks: a released slot is no lost window" js "o['windows']['lost'] == 0"
}

# --- restart without harm ---------------------------------------------------------------

t_restart() {
        local g0 old
        start_daemon --poll-interval 50 || { fail "restart: the daemon did not start" "$(diag)"; return; }
        save_rename 70 10
        wait_for js "cfg['window']['start_step'] == 70"
        g0=$(gen)
        start_driver "$dir/r2.out" --rank 2 --step 1234 --state armed --window 70-79 \
                || { fail "restart: rank-driver did not claim" "$(cat "$dir/r2.out")"; return; }
        old=$dpid
        kill -KILL "$old"
        wait "$old" 2>/dev/null
        check "restart: the segment outlives a killed daemon" \
                test -e "/dev/shm/$shm.ctl" -a -e "/dev/shm/$shm.ranks"
        ctl status >/dev/null 2>&1
        check "restart: status with the daemon killed exits 3" test $? -eq 3
        start_daemon --poll-interval 50 || { fail "restart: the daemon did not start again" "$(diag)"; return; }
        check "restart: the new daemon is another process" test "$dpid" != "$old"
        check "restart: shm.adopted is true" js "o['shm']['adopted'] is True"
        check "restart: the generation is the same" js "cfg['generation'] == $g0 and cfg['window']['start_step'] == 70"
        check "restart: the rank, its pid, step and state are kept" \
                js "len(o['ranks']) == 1 and R(2)['pid'] == $drv_pid and R(2)['step'] == 1234 and R(2)['state'] == 'armed'"
        check "restart: the rank-driver was not disturbed" alive "$drv_pid"
        eventually "restart: the log says the segment was adopted" \
                grep -q "adopted segment $shm at generation $g0 with 1 rank attached" "$log"
        save_rename 80 2
        eventually "restart: the adopted segment takes the next generation" \
                js "cfg['generation'] == $g0 + 1 and cfg['window']['start_step'] == 80"
}

# Status of a killed daemon must exit 3: checked on its own so the exit code is what counts.
t_status_down() {
        local out status
        start_daemon || { fail "down: the daemon did not start" "$(diag)"; return; }
        start_driver "$dir/r4.out" --rank 4 --step 9 --state idle \
                || { fail "down: rank-driver did not claim" "$(cat "$dir/r4.out")"; return; }
        kill -TERM "$dpid"
        wait_for gone "$dpid"
        wait "$dpid"
        status=$?
        check "SIGTERM with a rank attached: the daemon exits 0" test "$status" -eq 0
        check "SIGTERM with a rank attached: the segment stays" \
                test -e "/dev/shm/$shm.ctl" -a -e "/dev/shm/$shm.ranks"
        check "SIGTERM with a rank attached: the log says why" grep -q "left segment $shm in place: 1 rank attached" "$log"
        out=$(ctl status 2>&1)
        status=$?
        check "down: status exits 3" test "$status" -eq 3
        check "down: status says the daemon is not reachable" grep -q '^npuprofd: not reachable' <<<"$out"
        check "down: status still shows the segment's configuration" \
                grep -q "^config:  $conf (native), generation 1, valid" <<<"$out"
        check "down: status still shows the rank" grep -Eq "^ +4 +$drv_pid +9 +idle " <<<"$out"
        out=$(ctl status --json 2>/dev/null)
        check "down: status --json: daemon null, the segment's ranks" \
                python3 -c "$py_prelude"'
sys.exit(0 if o["daemon"] is None and cfg["generation"] == 1 and R(4)["pid"] == '"$drv_pid"' else 1)' x "$out"
        "$driver" --shm "$shm" --rank 4 >/dev/null 2>&1
        check "down: the rank keeps its slot while no daemon runs" test $? -eq 1
        kill -TERM "$drv_pid"
        wait "$drv_pid" 2>/dev/null
        start_daemon || { fail "down: the daemon did not start again" "$(diag)"; return; }
        check "down: a daemon started again adopts the segment" js "o['shm']['adopted'] is True and o['ranks'] == []"
}

t_sigterm_alone() {
        local status out
        start_daemon || { fail "SIGTERM: the daemon did not start" "$(diag)"; return; }
        check "SIGTERM alone: the segment exists while the daemon runs" \
                test -e "/dev/shm/$shm.ctl" -a -e "/dev/shm/$shm.ranks"
        kill -TERM "$dpid"
        wait_for gone "$dpid"
        wait "$dpid"
        status=$?
        check "SIGTERM alone: the daemon exits 0" test "$status" -eq 0
        check "SIGTERM alone: the segment files are removed" \
                test ! -e "/dev/shm/$shm.ctl" -a ! -e "/dev/shm/$shm.ranks"
        check "SIGTERM alone: the socket is removed" test ! -e "$sock"
        out=$(ctl status 2>&1)
        status=$?
        check "SIGTERM alone: status exits 3 and says there is no segment" \
                test "$status" -eq 3 -a -n "$(grep '^npuprofd: not reachable' <<<"$out")" -a -n "$(grep "^shm: .*$shm.*No such file" <<<"$out")"
}

# --- the sweep ---------------------------------------------------------------------------

t_lost() {
        start_daemon --poll-interval 50 || { fail "lost: the daemon did not start" "$(diag)"; return; }
        start_driver "$dir/r7.out" --rank 7 --step 12 --state collecting --window 10-20 \
                || { fail "lost: rank-driver did not claim" "$(cat "$dir/r7.out")"; return; }
        check "lost: the collecting rank is shown" js "R(7)['state'] == 'collecting' and o['windows']['lost'] == 0"
        kill -KILL "$drv_pid"
        wait "$drv_pid" 2>/dev/null
        eventually "lost: the dead rank's slot is reclaimed" js "o['ranks'] == []"
        check "lost: windows.lost is 1" js "o['windows']['lost'] == 1"
        check "lost: the recent windows name rank 7's window 10..20" \
                js "o['windows']['recent'][0]['rank'] == 7 and o['windows']['recent'][0]['outcome'] == 'lost' and o['windows']['recent'][0]['start_step'] == 10"
        check "lost: metrics count one lost window" \
                grep -q '^npuprof_windows_total{outcome="lost"} 1$' <(ctl metrics)
        eventually "lost: the log says the rank died while collecting" grep -q 'rank 7 .*died while collecting' "$log"
        "$driver" --shm "$shm" --rank 7 >/dev/null 2>&1
        check "lost: the rank can be claimed again" test $? -eq 0
        sleep 0.2       # a few sweeps: the lost window is counted once
        check "lost: the lost window is counted once" js "o['windows']['lost'] == 1"
}

# A rank that dies mid-window while no daemon runs: the next daemon finds it, counts the
# window lost and says so in its log, as for a death it sees itself.
t_lost_while_down() {
        start_daemon --poll-interval 50 || { fail "lost while down: the daemon did not start" "$(diag)"; return; }
        start_driver "$dir/r6.out" --rank 6 --step 11 --state collecting --window 10-20 \
                || { fail "lost while down: rank-driver did not claim" "$(cat "$dir/r6.out")"; return; }
        stop_pid "$dpid"
        stop_pid "$drv_pid"
        start_daemon --poll-interval 50 || { fail "lost while down: the daemon did not start again" "$(diag)"; return; }
        eventually "lost while down: the dead rank's slot is reclaimed" js "o['ranks'] == [] and o['shm']['adopted'] is True"
        check "lost while down: windows.lost is 1" \
                js "o['windows']['lost'] == 1 and o['windows']['recent'][0]['rank'] == 6"
        eventually "lost while down: the log says rank 6 died while collecting" grep -q 'rank 6 .*died while collecting' "$log"
}

t_stalled() {
        start_daemon --poll-interval 50 --stall-timeout 200 || { fail "stalled: the daemon did not start" "$(diag)"; return; }
        start_driver "$dir/r1.out" --rank 1 --step 5 --state collecting --window 5-9 --beat 20 \
                || { fail "stalled: rank-driver 1 did not claim" "$(cat "$dir/r1.out")"; return; }
        start_driver "$dir/r2.out" --rank 2 --step 5 --state collecting --window 5-9 \
                || { fail "stalled: rank-driver 2 did not claim" "$(cat "$dir/r2.out")"; return; }
        eventually "stalled: a collecting rank without a heartbeat for 200 ms is stalled" \
                js "R(2)['state'] == 'stalled' and R(2)['heartbeat_age_ms'] >= 200"
        check "stalled: a collecting rank that beats is still collecting" \
                js "R(1)['state'] == 'collecting' and R(1)['step'] > 5"
        eventually "stalled: metrics count the stalled rank" \
                grep -q '^npuprof_ranks{state="stalled"} 1$' <(ctl metrics)
}

# --- metrics ------------------------------------------------------------------------------

t_metrics() {
        local m g
        start_daemon || { fail "metrics: the daemon did not start" "$(diag)"; return; }
        g=$(gen)
        m=$(ctl metrics)
        check "metrics: TYPE lines" \
                test "$(grep -cE '^# TYPE npuprof_(generation gauge|config_valid gauge|config_errors_total counter|ranks gauge|windows_total counter|reloads_total counter)$' <<<"$m")" -eq 6
        check "metrics: npuprof_generation is the generation" grep -q "^npuprof_generation $g$" <<<"$m"
        check "metrics: npuprof_config_valid 1" grep -q '^npuprof_config_valid 1$' <<<"$m"
        check "metrics: npuprof_config_errors_total 0" grep -q '^npuprof_config_errors_total 0$' <<<"$m"
        check "metrics: npuprof_reloads_total 0" grep -q '^npuprof_reloads_total 0$' <<<"$m"
        check "metrics: npuprof_ranks for every state" \
                test "$(grep -cE '^npuprof_ranks\{state="(idle|armed|collecting|flushing|done|missed|failed|filtered|lost|stalled)"\} 0$' <<<"$m")" -eq 10
        check "metrics: npuprof_windows_total for every outcome" \
                test "$(grep -cE '^npuprof_windows_total\{outcome="(done|failed|missed|filtered|lost)"\} 0$' <<<"$m")" -eq 5
        check "metrics: valid text format 0.0.4 (tests/promtext.py)" \
                python3 "$(dirname "$0")/promtext.py" check <(printf '%s\n' "$m")
        check "metrics: npuprof_up 1, npuprof_build_info, the publication time" \
                test -n "$(grep '^npuprof_up 1$' <<<"$m")" -a -n "$(grep '^npuprof_build_info{version="[0-9.]*",shm_abi="[0-9]*",protocol="[0-9]*"} 1$' <<<"$m")" \
                -a -n "$(grep -E '^npuprof_generation_published_timestamp_seconds 1[0-9]{9}\.[0-9]{3}$' <<<"$m")"
        printf '{"start_step": -4}\n' >"$conf"
        wait_for js "cfg['valid'] is False"
        ctl reload >/dev/null 2>&1
        start_driver "$dir/r3.out" --rank 3 --step 1 --state 'done' --window 1-2 \
                || { fail "metrics: rank-driver did not claim" "$(cat "$dir/r3.out")"; return; }
        m=$(ctl metrics)
        check "metrics: a broken file: valid 0, errors 1" \
                test -n "$(grep '^npuprof_config_valid 0$' <<<"$m")" -a -n "$(grep '^npuprof_config_errors_total 1$' <<<"$m")"
        check "metrics: a reload is counted" grep -q '^npuprof_reloads_total 1$' <<<"$m"
        check "metrics: a done rank and its window are counted" \
                test -n "$(grep '^npuprof_ranks{state="done"} 1$' <<<"$m")" -a -n "$(grep '^npuprof_windows_total{outcome="done"} 1$' <<<"$m")"
}

# --- the wire protocol ----------------------------------------------------------------------

cat >"$tmp/proto.py" <<'EOF'
# proto.py SOCKET CASE CONFIG: speak the raw protocol; exit 0 if the daemon answers as it must.
import json, os, re, socket, sys, time

path, case, conf = sys.argv[1], sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
s.connect(path)
buf = b""

def raw_line():
    global buf
    while b"\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise SystemExit("the connection closed without a reply; got %r" % buf[:200])
        buf += d
    l, buf = buf.split(b"\n", 1)
    return l

def line():
    return json.loads(raw_line())

def closed():
    # The daemon closes after the reply: recv sees EOF within the timeout.
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return True
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True

def send(b):
    try:
        s.sendall(b)
    except (BrokenPipeError, ConnectionResetError):
        pass            # the daemon may stop reading once it has refused

def need(cond, what, got):
    if not cond:
        raise SystemExit("%s: got %r" % (what, got))

if case == "version1":
    send(b'{"version": 1, "command": "status"}\n')
    r = line()
    e = r.get("error", "")
    need(r.get("ok") is False and r.get("version") == 2, "an error reply of version 2", r)
    need(re.search(r"\b1\b", e) and re.search(r"\b2\b", e) and "version" in e, "the error names versions 1 and 2", e)
    need(closed(), "the connection closes", "open")
elif case == "noversion":
    send(b'{"command": "status"}\n')
    r = line()
    need(r.get("ok") is False and "version" in r.get("error", ""), "an error about the version", r)
    need(closed(), "the connection closes", "open")
elif case == "garbage":
    send(b"GET / HTTP/1.0\r\n\r\n\x00\xff{{{\n")
    r = line()
    need(r.get("ok") is False and r.get("error"), "an error reply", r)
    need(closed(), "the connection closes", "open")
elif case == "oversize":
    send(b"{" + b" " * (70 * 1024) + b"}\n")
    r = line()
    need(r.get("ok") is False and re.search(r"65536|64 ?KiB", r.get("error", "")), "an error naming the cap", r)
    need(closed(), "the connection closes", "open")
elif case == "exactcap":
    req = b'{"version": 2, "command": "ranks"'
    req += b" " * (65536 - len(req) - 1) + b"}"
    assert len(req) == 65536
    send(req + b"\n")
    r = line()
    need(r.get("ok") is True and "ranks" in r.get("result", {}), "a request of exactly 64 KiB is answered", r)
elif case == "pipeline":
    send(b'{"version": 2, "command": "status"}\n{"version": 2, "command": "ranks"}\n'
         b'{"version": 2, "command": "metrics"}\n{"version": 2, "command": "nosuch"}\n'
         b'{"version": 2, "command": "config"}\n')
    a, b, c, d, e = line(), line(), line(), line(), line()
    need(a["ok"] and "daemon" in a["result"], "status first", a)
    need(b["ok"] and "ranks" in b["result"], "ranks second", b)
    need(c["ok"] and "npuprof_generation" in c["result"]["text"], "metrics third", c)
    need(d["ok"] is False and "nosuch" in d["error"] and "status" in d["error"], "an unknown command named", d)
    need(e["ok"] and e["result"]["generation"] >= 1, "config last: the connection stays open after an unknown command", e)
elif case == "pipeline-reload":
    # Many small requests queued behind a reload (which the daemon answers after reading the
    # file): each is far below the cap, so each must be answered, in order.
    n = 3000
    send(b'{"version": 2, "command": "reload"}\n' + b'{"version": 2, "command": "ranks"}\n' * n)
    r = line()
    need(r.get("ok") is True and "generation" in r.get("result", {}), "the reload answered first", r)
    for i in range(n):
        r = line()
        need(r.get("ok") is True and "ranks" in r.get("result", {}), "ranks request %d of %d answered" % (i + 1, n), r)
elif case == "split":
    # A request that arrives in pieces is one request.
    for piece in (b'{"vers', b'ion": 2, "comm', b'and": "status"}', b"\n"):
        send(piece)
        time.sleep(0.05)
    r = line()
    need(r.get("ok") is True and "daemon" in r["result"], "the reassembled request is answered", r)
elif case == "shared":
    # Requests that wait while the same request is answered share that answer, to the byte.
    STATUS = b'{"version": 2, "command": "status"}\n'
    def shared():
        send(STATUS)
        return line()["result"]["daemon"]["clients"]["shared_answers"]
    before = shared()
    send(STATUS * 50)
    answers = [raw_line() for _ in range(50)]
    need(all(json.loads(a)["ok"] is True for a in answers), "50 answers, all ok", answers[0][:200])
    n = shared() - before
    # One answer made per read of the socket: the 50 lines come in one read or very few.
    need(45 <= n <= 49, "45 to 49 of the 50 requests answered with a shared answer", n)
    need(len(set(answers)) == 50 - n, "as many different answers as answers made", len(set(answers)))
elif case == "fresh":
    # A kept answer is never given to a request that came after it was made: asked after a
    # new configuration is published, the same request tells the new one.
    STATUS = b'{"version": 2, "command": "status"}\n'
    send(STATUS)
    g = line()["result"]["config"]["generation"]
    with open(conf + ".new", "w") as f:
        f.write('{"start_step": 777, "steps": 3}\n')
    os.rename(conf + ".new", conf)
    deadline = time.monotonic() + 10
    while True:         # asked with another request, so that the kept status stays the old one
        send(b'{"version": 2, "command": "config"}\n')
        if line()["result"]["generation"] > g or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    send(STATUS)
    c = line()["result"]["config"]
    need(c["generation"] > g and c["window"]["start_step"] == 777, "the status asked after the change tells it", c)
elif case == "evict-busy":
    # With the table full (--max-clients 3), a connection whose request waits unread is not
    # idle: the longest idle one that asks nothing is closed instead; and when every one is
    # asking, the newcomer is. The daemon is stopped while each burst of connections arrives,
    # so that it accepts them all before reading any.
    import signal
    STATUS = b'{"version": 2, "command": "status"}\n'
    pid = int(os.environ["NPF_DPID"])
    s.close()
    def fresh():
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.settimeout(5)
        c.connect(path)
        return c
    def reply(c):
        got = b""
        while b"\n" not in got:
            d = c.recv(65536)
            if not d:
                return None
            got += d
        return json.loads(got.split(b"\n", 1)[0])
    def burst(asking, idle):
        deadline = time.monotonic() + 10
        while True:     # only the connection that asks this is open
            a = fresh()
            a.sendall(STATUS)
            n = reply(a)["result"]["daemon"]["clients"]["open"]
            a.close()
            if n == 1 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        os.kill(pid, signal.SIGSTOP)
        try:
            ask = [fresh() for _ in range(asking)]
            for c in ask:
                c.sendall(STATUS)
            return ask, [fresh() for _ in range(idle)]
        finally:
            os.kill(pid, signal.SIGCONT)
    busy, idle = burst(1, 4)
    r = reply(busy[0])
    need(r and r.get("ok") is True and r["result"]["daemon"]["pid"] == pid, "the asking connection is answered", r)
    need(r["result"]["daemon"]["clients"]["evicted"] == 2, "two evicted, counted", r["result"]["daemon"]["clients"])
    first = reply(idle[0])
    need(first and "to admit a new connection" in first.get("error", ""), "the longest idle is closed, and told why", first)
    second = reply(idle[1])
    need(second and "to admit a new connection" in second.get("error", ""), "then the next longest idle", second)
    for c in busy + idle:
        c.close()
    busy, idle = burst(3, 1)
    for c in busy:
        r = reply(c)
        need(r and r.get("ok") is True and r["result"]["daemon"]["clients"]["evicted"] == 2,
             "all three asking connections answered, none evicted", r)
    r = reply(idle[0])
    need(r and "every one of the longest idle is being answered" in r.get("error", ""),
         "the newcomer is closed when all the others ask, and told why", r)
else:
    raise SystemExit("no such case " + case)
EOF

proto() { timeout 20 python3 "$tmp/proto.py" "$sock" "$1" "$conf" 2>&1; }

t_protocol() {
        local c out
        local -A what=(
                [version1]="a version 1 request (rank tables as objects) gets an error naming versions 1 and 2, and the connection closes"
                [noversion]="a request without a version gets an error and the connection closes"
                [garbage]="garbage gets an error and the connection closes"
                [oversize]="a request line over 64 KiB gets an error naming the cap"
                [exactcap]="a request of exactly 64 KiB is answered"
                [pipeline]="requests sent together are answered in order; an unknown command is named"
                [pipeline-reload]="3000 small requests queued behind a reload are all answered"
                [split]="a request sent in pieces is answered"
                [shared]="requests waiting while the same request is answered share that answer (daemon.clients.shared_answers)"
                [fresh]="a kept answer is never given to a request that came after it: status after a publication tells it"
        )
        start_daemon || { fail "protocol: the daemon did not start" "$(diag)"; return; }
        for c in version1 noversion garbage oversize exactcap pipeline pipeline-reload split shared fresh; do
                out=$(proto "$c")
                if [ $? -eq 0 ]; then ok "protocol: ${what[$c]}"; else fail "protocol: ${what[$c]}" "$out"; fi
                check "protocol: the daemon carries on after $c (status answers)" quiet ctl status
        done
        check "protocol: the daemon still runs" alive "$dpid"
}

t_evict_busy() {
        local out
        start_daemon --max-clients 3 || { fail "evict: the daemon did not start" "$(diag)"; return; }
        local what="evict: with the table full, a connection whose request waits unread is answered; the longest idle are closed; when all ask, the newcomer is"
        if out=$(NPF_DPID=$dpid proto evict-busy); then ok "$what"; else fail "$what" "$out"; fi
        check "evict: the daemon still runs" alive "$dpid"
}

# --- start, stop and windows ------------------------------------------------------------------

# pyf FILE EXPR: the JSON file FILE satisfies the Python expression EXPR (the object is `f`,
# its keys in file order are `keys`).
pyf() {
        python3 -c '
import json, sys
f = json.load(open(sys.argv[1]))
keys = list(f)
sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2" 2>/dev/null
}
# jw EXPR: as js, on `windows --json` (the list is `W`).
jw() { npf_json_holds "$py_prelude"'
W = o.get("windows") or []' "$1" ctl windows --json; }
# jc EXPR: as js, on `config` (the effective configuration is `c`).
jc() { npf_json_holds "$py_prelude"'
c = o.get("config") or {}' "$1" ctl config; }

t_start_stop() {
        local g0 out status ino
        start_daemon || { fail "start: the daemon did not start" "$(diag)"; return; }
        g0=$(gen)
        ino=$(stat -c %i "$conf")
        out=$(ctl start --at 100 --steps 5 --warmup 1 --level Level1 --backend host 2>&1)
        status=$?
        check "start: exits 0 and says what it wrote" \
                test "$status" -eq 0 -a -n "$(grep -F "start: wrote $conf (native dialect): window steps 100..105" <<<"$out")"
        eventually "start: status shows the new window with a new generation" \
                js "cfg['valid'] is True and cfg['window']['start_step'] == 100 and cfg['window']['stop_step'] == 105 and cfg['generation'] == $g0 + 1"
        check "start: the file has the native keys" \
                pyf "$conf" "f['start_step'] == 100 and f['steps'] == 5 and f['warmup'] == 1 and f['level'] == 'Level1' and f['backend'] == 'host'"
        check "start: the file was replaced by rename, not rewritten in place" test "$(stat -c %i "$conf")" != "$ino"
        check "start: no temporary file is left behind" test -z "$(find "$dir" -name '.profiler_config.json.*')"
        wait_for grep -q "published generation $((g0 + 1))" "$log"
        check "start: the daemon logged the publication once" test "$(grep -c "published generation $((g0 + 1))" "$log")" -eq 1
        out=$(ctl stop 2>&1)
        status=$?
        check "stop: exits 0 and says profiling is off" \
                test "$status" -eq 0 -a -n "$(grep -F 'profiling off' <<<"$out")"
        eventually "stop: status shows profiling off in a new generation" \
                js "cfg['valid'] is True and cfg['window']['enabled'] is False and cfg['generation'] == $g0 + 2"
        check "stop: a native file loses its start_step and keeps the rest" \
                pyf "$conf" "'start_step' not in f and f['steps'] == 5 and f['level'] == 'Level1' and f['backend'] == 'host'"
        out=$(ctl start --at next --steps 3 --ranks 0-3,8 --json 2>/dev/null)
        status=$?
        check "start --json: one object with written true and the effective window" \
                python3 -c 'import json, sys
o = json.loads(sys.argv[1])
sys.exit(0 if o["written"] is True and o["dialect"] == "native" and o["config"]["window"]["start_step"] == "next" and o["config"]["ranks"] == "0-3,8" else 1)' "$out"
        check "stop --json: one object" \
                python3 -c 'import json, sys
o = json.loads(sys.argv[1])
sys.exit(0 if o["command"] == "stop" and o["written"] is True and o["config"]["window"]["enabled"] is False else 1)' "$(ctl stop --json 2>/dev/null)"
}

# A torch_npu file stays torch_npu, with every key it had, in its order.
t_start_torch() {
        local out status
        cat >"$conf" <<'EOF_T'
{
  "activities": ["CPU", "NPU"],
  "prof_dir": "./",
  "analyse": false,
  "record_shapes": true,
  "my_team_note": {"owner": "perf", "ratio": 0.1},
  "start_step": 0,
  "active": 1,
  "warmup": 0,
  "experimental_config": {"aic_metrics": "AiCoreNone", "export_type": "text"}
}
EOF_T
        start_daemon || { fail "start torch_npu: the daemon did not start" "$(diag)"; return; }
        ctl start --at 20 --steps 3 --warmup 2 --level Level2 --ranks 0-2,7 >/dev/null 2>&1
        check "start torch_npu: exits 0" test $? -eq 0
        out=$(timeout 10 "$npuprofctl" validate --json "$conf" 2>/dev/null)
        check "start torch_npu: validate --json says dialect torch_npu" \
                python3 -c 'import json, sys; o = json.loads(sys.argv[1]); sys.exit(0 if o["valid"] and o["dialect"] == "torch_npu" else 1)' "$out"
        check "start torch_npu: torch_npu's keys were set" \
                pyf "$conf" "f['start_step'] == 20 and f['active'] == 3 and f['warmup'] == 2 and f['experimental_config']['profiler_level'] == 'Level2' and f['is_rank'] is True and f['rank_list'] == [0, 1, 2, 7] and 'steps' not in f and 'level' not in f"
        check "start torch_npu: unknown keys and their order are kept" \
                pyf "$conf" "keys[:8] == ['activities', 'prof_dir', 'analyse', 'record_shapes', 'my_team_note', 'start_step', 'active', 'warmup'] and f['my_team_note'] == {'owner': 'perf', 'ratio': 0.1} and f['experimental_config']['aic_metrics'] == 'AiCoreNone'"
        eventually "start torch_npu: the daemon publishes window 20..24 for ranks 0-2,7" \
                js "cfg['dialect'] == 'torch_npu' and cfg['window']['start_step'] == 20 and cfg['window']['stop_step'] == 24 and cfg['ranks'] == '0-2,7'"
        ctl stop >/dev/null 2>&1
        check "stop torch_npu: start_step 0, the rest kept" \
                pyf "$conf" "f['start_step'] == 0 and f['active'] == 3 and f['my_team_note']['owner'] == 'perf'"
        eventually "stop torch_npu: profiling off" js "cfg['window']['enabled'] is False and cfg['dialect'] == 'torch_npu'"
}

# A MindSpore file: stop_step = N + K - 1, and its own way of turning off.
t_start_mindspore() {
        local out status
        printf '{\n  "start_step": -1,\n  "stop_step": -1,\n  "prof_path": "ms",\n  "profiler_level": 0,\n  "aicore_metrics": -1\n}\n' >"$conf"
        start_daemon || { fail "start MindSpore: the daemon did not start" "$(diag)"; return; }
        ctl start --at 30 --steps 4 --level Level1 >/dev/null 2>&1
        check "start MindSpore: exits 0" test $? -eq 0
        check "start MindSpore: start_step 30, stop_step 33, profiler_level 1 (an integer)" \
                pyf "$conf" "f['start_step'] == 30 and f['stop_step'] == 33 and f['profiler_level'] == 1 and f['prof_path'] == 'ms' and 'steps' not in f"
        eventually "start MindSpore: the daemon publishes window 30..33" \
                js "cfg['dialect'] == 'mindspore' and cfg['window']['start_step'] == 30 and cfg['window']['stop_step'] == 33"
        cp "$conf" "$dir/before"
        out=$(ctl start --at 40 --steps 2 --warmup 1 2>&1)
        status=$?
        check "start MindSpore: --warmup is refused (exit 1), the file untouched" \
                test "$status" -eq 1 -a -n "$(grep -F 'no warmup' <<<"$out")" -a -z "$(cmp "$conf" "$dir/before" 2>&1)"
        ctl stop >/dev/null 2>&1
        check "stop MindSpore: start_step and stop_step -1" pyf "$conf" "f['start_step'] == -1 and f['stop_step'] == -1"
}

# An invalid or malformed start leaves the file byte for byte as it was.
t_start_invalid() {
        local out status g0
        start_daemon || { fail "start invalid: the daemon did not start" "$(diag)"; return; }
        g0=$(gen)
        printf '{ "start_step": 10,   "steps": 2, "keep": [1,2] }' >"$conf"       # odd spacing, no newline
        wait_for js "cfg['valid'] is True"
        cp -p "$conf" "$dir/before"
        out=$(ctl start --at 10 --steps 0 2>&1)
        status=$?
        check "start invalid: --steps 0 exits 1 naming the key" \
                test "$status" -eq 1 -a -n "$(grep -E 'steps: .*from 1' <<<"$out")"
        check "start invalid: the file is byte-identical" cmp -s "$conf" "$dir/before"
        out=$(ctl start --at 10 --steps 0 --json 2>/dev/null)
        check "start invalid --json: one object with written false and the errors" \
                python3 -c 'import json, sys
o = json.loads(sys.argv[1])
sys.exit(0 if o["written"] is False and o["errors"][0]["key"] == "steps" else 1)' "$out"
        ctl start --at 10 --steps 2 --ranks 9-3 >/dev/null 2>&1
        check "start invalid: a backwards rank range exits 1" test $? -eq 1
        ctl start --at 10 --steps 2 --level Level7 >/dev/null 2>&1
        check "start invalid: an unknown level exits 1" test $? -eq 1
        ctl start --at 10 --steps two >/dev/null 2>&1
        check "start usage: --steps two exits 2" test $? -eq 2
        ctl start --steps 2 >/dev/null 2>&1
        check "start usage: no --at exits 2" test $? -eq 2
        ctl start --at 1 --steps 2 --bogus >/dev/null 2>&1
        check "start usage: an unknown option exits 2" test $? -eq 2
        check "start invalid: after all that the file is still byte-identical" cmp -s "$conf" "$dir/before"
        check "start invalid: nothing was published" js "cfg['generation'] == $g0"
        printf '{"start_step": ' >"$conf"
        cp "$conf" "$dir/broken"
        ctl start --at 10 --steps 2 --config "$conf" >/dev/null 2>&1
        check "start on a file that is not JSON: exit 1, the file untouched" \
                test $? -eq 1 -a -z "$(cmp "$conf" "$dir/broken" 2>&1)"
}

# The mode (and the owner) of the file are kept; the path may come from --config alone.
t_start_mode() {
        local status
        start_daemon || { fail "start mode: the daemon did not start" "$(diag)"; return; }
        chmod 0604 "$conf"
        ctl start --at 7 --steps 2 >/dev/null 2>&1
        check "start mode: exits 0" test $? -eq 0
        check "start mode: the file's mode 0604 is kept" test "$(stat -c %a "$conf")" = 604
        chmod 0640 "$conf"
        ctl stop >/dev/null 2>&1
        check "stop mode: the file's mode 0640 is kept" test "$(stat -c %a "$conf")" = 640
        stop_pid "$dpid"
        ctl start --at 9 --steps 1 >/dev/null 2>&1
        check "start without a daemon and without --config exits 3" test $? -eq 3
        ctl start --at 9 --steps 1 --config "$conf" >/dev/null 2>&1
        check "start without a daemon but with --config exits 0" test $? -eq 0
        check "start --config: the file has the window" pyf "$conf" "f['start_step'] == 9 and f['steps'] == 1"
        rm -f "$dir/new.json"
        ctl start --at 5 --steps 1 --config "$dir/new.json" >/dev/null 2>&1
        check "start --config on a missing file creates a native one" \
                pyf "$dir/new.json" "f == {'start_step': 5, 'steps': 1}"
}

# windows: a lost window is listed with its outcome, newest first.
t_windows() {
        local out
        start_daemon --poll-interval 50 || { fail "windows: the daemon did not start" "$(diag)"; return; }
        check "windows: none yet" jw "W == [] and o['outcomes']['lost'] == 0"
        start_driver "$dir/r4.out" --rank 4 --step 3 --state 'done' --window 1-2 --message 'all fine' \
                || { fail "windows: rank-driver 4 did not claim" "$(cat "$dir/r4.out")"; return; }
        eventually "windows: a done window is listed" jw "len(W) == 1 and W[0]['outcome'] == 'done'"
        start_driver "$dir/r7.out" --rank 7 --step 12 --state collecting --window 10-20 \
                || { fail "windows: rank-driver 7 did not claim" "$(cat "$dir/r7.out")"; return; }
        kill -KILL "$drv_pid"
        wait "$drv_pid" 2>/dev/null
        eventually "windows: the rank killed while collecting is listed first, lost" \
                jw "len(W) == 2 and W[0]['rank'] == 7 and W[0]['outcome'] == 'lost' and W[0]['start_step'] == 10 and W[0]['stop_step'] == 20 and W[1]['rank'] == 4"
        check "windows: each entry has every field" \
                jw "all(set(w) >= {'rank', 'pid', 'generation', 'start_step', 'stop_step', 'outcome', 'output', 'message', 'ended_unix_ms'} for w in W) and W[0]['generation'] == 1 and W[1]['message'] == 'all fine' and W[0]['ended_unix_ms'] >= W[1]['ended_unix_ms'] > 1700000000000"
        check "windows: outcomes count them" jw "o['outcomes']['lost'] == 1 and o['outcomes']['done'] == 1"
        out=$(ctl windows)
        check "windows: the table has the lost window's row" grep -Eq '^ +7 +1 +10\.\.20 +lost ' <<<"$out"
        check "windows: the table has the done window's message" grep -Eq '^ +4 +1 +1\.\.2 +done .*all fine' <<<"$out"
}

# A configuration that arrives during a window is taken at the step the window closes: the
# rank moves on at once, and the daemon must still record the window that ended.
t_window_then_new_config() {
        local root=$dir/out tl_pid
        mkdir -p "$root"
        printf '{ "start_step": 5, "steps": 10, "output_dir": "%s" }\n' "$root" >"$conf"
        start_daemon --output-root "$root" --poll-interval 5000 \
                || { fail "window then config: the daemon did not start" "$(diag)"; return; }
        # Ten steps of 100 ms: a window a status poll cannot miss, even on a busy machine.
        "$build/train-loop" --rank 3 --steps 30 --step-ms 100 --shm-name "$shm" --backend host >"$dir/tl.out" 2>&1 &
        tl_pid=$!
        all_pids+=("$tl_pid") test_pids+=("$tl_pid")
        eventually "window then config: the rank collects steps 5..14" js "R(3) and R(3)['state'] == 'collecting'"
        printf '{ "start_step": 20, "steps": 2, "output_dir": "%s" }\n' "$root" >"$conf.tmp~" && mv -f "$conf.tmp~" "$conf"
        for _ in 1 2; do wait_for gone "$tl_pid" && break; done   # 3 s of training
        check "window then config: both windows ran" test -d "$root/rank3_start5_stop14" -a -d "$root/rank3_start20_stop21"
        eventually "window then config: the daemon recorded both (the first though the rank moved on at once)" \
                jw "sorted((w['start_step'], w['outcome']) for w in W if w['rank'] == 3) == [(5, 'done'), (20, 'done')]"
}

# 64 ranks of one node, each its own process, open their window at the same step.
t_64_ranks() {
        local root=$dir/out r p pids=()
        mkdir -p "$root"
        printf '{ "start_step": 12, "steps": 2, "output_dir": "%s" }\n' "$root" >"$conf"
        start_daemon --output-root "$root" --poll-interval 100 \
                || { fail "64 ranks: the daemon did not start" "$(diag)"; return; }
        for r in $(seq 0 63); do
                "$build/train-loop" --rank "$r" --steps 16 --step-ms 8 --shm-name "$shm" --backend host \
                        >"$dir/tl$r.out" 2>&1 &
                pids+=($!)
        done
        all_pids+=("${pids[@]}") test_pids+=("${pids[@]}")
        for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
        check "64 ranks: every rank ran its window" test "$(ls -d "$root"/rank*_start12_stop13 2>/dev/null | wc -l)" = 64
        local bad
        bad=$(python3 - "$root" <<'PY'
import json, os, sys
root = sys.argv[1]
bad = []
for r in range(64):
    d = os.path.join(root, "rank%d_start12_stop13" % r)
    try:
        m = json.load(open(os.path.join(d, "manifest.json")))
        t = json.load(open(os.path.join(d, "trace.json")))
        spans = [e["name"] for e in t["traceEvents"] if e.get("ph") == "X"]
        if m["status"] != "complete" or spans != ["ProfilerStep#12", "ProfilerStep#13"]:
            bad.append("%d: %s %s" % (r, m["status"], spans))
    except (OSError, ValueError, KeyError) as e:
        bad.append("%d: %s" % (r, e))
print("; ".join(bad))
PY
)
        check "64 ranks: each opened at step 12 and closed after 13, manifest complete${bad:+ ($bad)}" test -z "$bad"
        eventually "64 ranks: the daemon recorded 64 windows done" jw "o['outcomes']['done'] == 64"
}

# npuprofctl start refuses to write what the daemon would refuse: a directory outside its root.
t_start_outside_root() {
        local out rc root=$dir/out
        mkdir -p "$root"
        printf '{ "output_dir": "/etc" }\n' >"$conf"
        start_daemon --output-root "$root" || { fail "start outside root: the daemon did not start" "$(diag)"; return; }
        cp "$conf" "$dir/before"
        out=$(ctl start --at 5 --steps 2 2>&1)
        rc=$?
        check "start outside root: exit 1 naming the root" \
                test "$rc" = 1 -a -n "$(grep -F "outside the output root $root" <<<"$out")"
        check "start outside root: the file is untouched" cmp -s "$conf" "$dir/before"
}

# The output root: prof_dir is confined to it, and published absolute.
t_output_root() {
        local g0 root=$dir/out
        start_daemon --output-root "$root//" || { fail "output root: the daemon did not start" "$(diag)"; return; }
        check "output root: status shows the root" js "o['daemon']['output_root'] == '$root'"
        check "output root: a file without a directory is published with the root itself" jc "c['prof_dir'] == '$root'"
        g0=$(gen)
        printf '{\n  "start_step": 10,\n  "steps": 2,\n  "output_dir": "job7/./run//"\n}\n' >"$conf.tmp~" && mv -f "$conf.tmp~" "$conf"
        eventually "output root: a relative output_dir is published as ROOT/output_dir" \
                jc "c['prof_dir'] == '$root/job7/run' and o['generation'] == $g0 + 1"
        g0=$(gen)
        printf '{\n  "start_step": 10,\n  "steps": 2,\n  "output_dir": "/etc"\n}\n' >"$conf.tmp~" && mv -f "$conf.tmp~" "$conf"
        eventually "output root: output_dir /etc is refused, the message in status" \
                js "cfg['valid'] is False and cfg['error']['key'] == 'output_dir' and cfg['error']['message'] == 'output_dir /etc is outside the output root $root' and cfg['error']['line'] == 4"
        check "output root: nothing was published" \
                jc "o['generation'] == $g0 and c['prof_dir'] == '$root/job7/run'"
        eventually "output root: the log says so" grep -qF "output_dir /etc is outside the output root $root" "$log"
        printf '{\n  "start_step": 10,\n  "steps": 2,\n  "output_dir": "../escape"\n}\n' >"$conf.tmp~" && mv -f "$conf.tmp~" "$conf"
        eventually "output root: a .. component is refused" \
                js "cfg['valid'] is False and '..' in cfg['error']['message'] and cfg['generation'] == $g0"
        printf '{\n  "start_step": 10,\n  "steps": 2,\n  "output_dir": "%s/job8"\n}\n' "$root" >"$conf.tmp~" && mv -f "$conf.tmp~" "$conf"
        eventually "output root: an absolute output_dir inside the root is published" \
                jc "c['prof_dir'] == '$root/job8' and o['generation'] == $g0 + 1"
        # torch_npu names it prof_dir, MindSpore prof_path.
        printf '{\n  "start_step": 5,\n  "active": 1,\n  "prof_dir": "/tmp"\n}\n' >"$conf.tmp~" && mv -f "$conf.tmp~" "$conf"
        eventually "output root: torch_npu's prof_dir outside is refused under its own name" \
                js "cfg['valid'] is False and cfg['error']['message'] == 'prof_dir /tmp is outside the output root $root'"
        printf '{\n  "start_step": 5,\n  "stop_step": 6,\n  "prof_path": "/"\n}\n' >"$conf.tmp~" && mv -f "$conf.tmp~" "$conf"
        eventually "output root: MindSpore's prof_path outside is refused under its own name" \
                js "cfg['valid'] is False and cfg['error']['key'] == 'prof_path'"
        "$npuprofd" --config "$conf" --shm-name "$shm-x" --socket "$dir/x.sock" --output-root relative/dir >/dev/null 2>&1
        check "output root: a relative --output-root is a usage error" test $? -eq 2
}

# --- authorization --------------------------------------------------------------------------

user=npftestuser
have_user() {
        [ "$(id -u)" -eq 0 ] || return 1
        id "$user" >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin "$user" >/dev/null 2>&1
        id "$user" >/dev/null 2>&1 && command -v runuser >/dev/null
}
as_user() { timeout 10 runuser -u "$user" -- "$@"; }
command -v setpriv >/dev/null || setpriv() { echo "setpriv is not installed" >&2; return 127; }

t_auth() {
        local group out status
        have_user || { skip "authorization: needs root, useradd and runuser"; return; }
        group=$(id -gn "$user")
        chmod 0711 "$tmp" "$dir"
        start_daemon --socket-group "$group" || { fail "auth: the daemon did not start" "$(diag)"; return; }
        check "auth: the socket is mode 0660, group $group" test "$(stat -c '%a %G' "$sock")" = "660 $group"
        out=$(as_user "$npuprofctl" --socket "$sock" --shm-name "$shm" status 2>&1)
        status=$?
        check "auth: $user may ask for status" \
                test "$status" -eq 0 -a -n "$(grep '^npuprofd: running' <<<"$out")"
        out=$(as_user "$npuprofctl" --socket "$sock" --shm-name "$shm" reload 2>&1)
        status=$?
        check "auth: $user's reload is refused, naming the rule" \
                test "$status" -eq 1 -a -n "$(grep -E "reload is for root and the daemon's own user.*you are uid $(id -u "$user")" <<<"$out")"
        check "auth: the refused reload did nothing" js "o['reloads'] == 0"
        out=$(ctl reload 2>&1)
        check "auth: root's reload works" grep -q '^reloaded: generation 1, file valid' <<<"$out"
        check "auth: root's reload is counted" js "o['reloads'] == 1"
        # A rank of another user can claim a slot: the rank table is open to all. setpriv
        # execs the driver in place, so $! is the driver and the cleanup can reach it.
        setpriv --reuid "$user" --regid "$group" --clear-groups \
                "$driver" --shm "$shm" --rank 9 --step 3 --state armed --hold </dev/null >"$dir/r9.out" 2>&1 &
        drv_pid=$!
        all_pids+=("$drv_pid") test_pids+=("$drv_pid")
        eventually "auth: a rank of another user can claim a slot" \
                js "R(9) is not None and R(9)['pid'] == $drv_pid and R(9)['step'] == 3 and R(9)['state'] == 'armed'"
        check "auth: the rank runs as $user" test "$(stat -c %U "/proc/$drv_pid")" = "$user"
        kill -TERM "$drv_pid"
        eventually "auth: the other user's rank releases its slot" js "R(9) is None"
}

t_auth_nogroup() {
        local out status
        have_user || { skip "authorization: needs root, useradd and runuser"; return; }
        chmod 0711 "$tmp" "$dir"
        start_daemon || { fail "auth: the daemon did not start" "$(diag)"; return; }
        check "auth: without --socket-group the socket is 0660, the daemon's group" \
                test "$(stat -c '%a %g' "$sock")" = "660 $(id -g)"
        out=$(as_user "$npuprofctl" --socket "$sock" --shm-name "$shm" status 2>&1)
        status=$?
        check "auth: a user outside the group cannot connect (exit 3)" \
                test "$status" -eq 3 -a -n "$(grep -i 'permission denied' <<<"$out")"
}

run t_save "write in place"
run t_save "rename over"
run t_save "delete then re-create"
run t_save "truncate then write"
run t_save "rename over, polling only" --no-inotify --poll-interval 50
run t_invalid_then_fixed
run t_deleted
run t_identical
run t_sighup
run t_reload
run t_ranks
run t_restart
run t_status_down
run t_sigterm_alone
run t_lost
run t_lost_while_down
run t_stalled
run t_metrics
run t_protocol
run t_evict_busy
run t_start_stop
run t_start_torch
run t_start_mindspore
run t_start_invalid
run t_start_mode
run t_windows
run t_window_then_new_config
run t_64_ranks
run t_start_outside_root
run t_output_root
run t_auth
run t_auth_nogroup

echo "daemon: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
