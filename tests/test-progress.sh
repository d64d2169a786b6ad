#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The watch of progress with the real npuprofd and four real train-loop ranks, stepping
# every 20 ms (+-10%) and swept ten times a second, driven by the real npuprofctl: no
# slowdown over their first 400 steps, while each rank's step time is known and the
# metrics file is not rewritten at every sweep; from step 400 every step takes 1.5 times
# as long: a slowdown found, once, at most about 60 steps on and placed at its step, in
# status --json, the metrics and the log; rank 3 stops at step 560 while the others step
# on: stalled after --stall-after 2 s and not before, named in progress.message as behind
# the others, npuprof_ranks_stalled 1, logged once; killed, its stall is over.
#   tests/test-progress.sh BUILD_DIR
# Ends with "progress: N passed, N failed".
set -u
build=${1:?usage: tests/test-progress.sh BUILD_DIR}
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl trainloop=$build/train-loop
for b in "$npuprofd" "$npuprofctl" "$trainloop"; do
        [ -x "$b" ] || { echo "test-progress: $b is not built" >&2; exit 2; }
done

. "$(dirname "$0")/lib.sh"
npf_harness progress
wait_ms=15000

diag() {
        echo "status: $(timeout 10 "$npuprofctl" --socket "$sock" --shm-name "$shm" status --json 2>&1 | head -c 3000)"
        echo "daemon log (last lines):"
        tail -n 12 "$log" 2>/dev/null
}

ctl() { timeout 10 "$npuprofctl" --socket "$sock" --shm-name "$shm" "$@"; }

# Python on a --json reply: `o` is the object, R(n) rank n's row, P its progress.
py_prelude='
import json, sys
o = json.loads(sys.argv[2])
def R(n):
    return next((x for x in (o.get("ranks") or []) if x.get("rank") == n), None)
P = o.get("progress") or {}
mf = (o.get("daemon") or {}).get("metrics_file") or {}
steps = [x["step"] for x in (o.get("ranks") or []) if x.get("step") is not None]
'
js() { npf_json_holds "$py_prelude" "$1" ctl status --json; }
jv() { npf_json_print "$py_prelude" "json.dumps($1)" ctl status --json; }
# metric NAME: its value in the metrics command's text.
metric() { ctl metrics | awk -v n="$1" '$1 == n { print $2 }'; }
file_metric() { awk -v n="$1" '$1 == n { print $2 }' "$prom"; }

t_progress() {
        local k pid rank3='' looks=0 bad='' w0 w1 s0 since seen first last
        prom=$dir/npuprof.prom
        # A window armed far ahead: armed ranks are timed as idle ones are.
        printf '{"start_step": 100000, "steps": 2}\n' >"$conf"
        "$npuprofd" --config "$conf" --shm-name "$shm" --socket "$sock" --output-root "$out" --analyze-jobs 0 \
                --poll-interval 100 --log stderr --stall-after 2 --slowdown-pct 20 --slowdown-steps 50 \
                --metrics-file "$prom" --metrics-interval 3600 2>>"$log" &
        dpid=$!
        all_pids+=("$dpid") test_pids+=("$dpid")
        wait_for ctl status >/dev/null 2>&1 || { fail "the daemon did not start" "$(diag)"; return; }
        for k in 0 1 2 3; do
                local hang=()
                [ "$k" = 3 ] && hang=(--hang-at 560)
                "$trainloop" --rank "$k" --steps 100000 --step-ms 20 --busy 0 --jitter 10 --slow-at 400 \
                        --slow-factor 1.5 "${hang[@]}" --shm-name "$shm" --backend host >"$dir/rank$k.out" 2>&1 &
                pid=$!
                all_pids+=("$pid") test_pids+=("$pid")
                [ "$k" = 3 ] && rank3=$pid
        done
        eventually "4 ranks attached, each with stalled false" \
                js "len(o['ranks']) == 4 and all(x['stalled'] is False for x in o['ranks'])"
        check "the daemon shows its settings: stall_after_s 2, stall_factor 20, slowdown_pct 20, slowdown_steps 50" \
                js "o['daemon']['stall_after_s'] == 2 and o['daemon']['stall_factor'] == 20 and o['daemon']['slowdown_pct'] == 20 and o['daemon']['slowdown_steps'] == 50"

        # Steps 1 to 390: looked at as often as a status allows (under a sanitizer, a few times a second), never a slowdown.
        eventually "each rank's step time is known, about 20 ms" \
                js "all(x['step_time_ms'] is not None and 15 <= x['step_time_ms'] <= 28 for x in o['ranks'])"
        wait_for js "min(steps) >= 100" || { fail "the ranks did not reach step 100" "$(diag)"; return; }
        w0=$(jv 'mf["writes"]') s0=$(metric npuprof_sweeps_total) first=$(jv 'min(steps)')
        while last=$(jv 'min(steps)') && [ "$last" -lt 390 ]; do
                looks=$((looks + 1))
                js "P['slowdown'] is None and P['message'] is None and P['stalled_ranks'] == []" || bad="$bad $(jv 'P')"
                sleep 0.05
        done
        check "no slowdown, no stall at any of $looks looks, steps $first to $last" test "$looks" -ge 10 -a -z "$bad"
        check "the job's step time is about 20 ms, the fastest step known" \
                js "15 <= P['step_time_ms'] <= 28 and P['fastest_step'] >= 390"
        check "nothing is logged of slowdowns or stalls" test "$(grep -cE 'slowdown|progress( stall)?:' "$log")" -eq 0
        w1=$(jv 'mf["writes"]')
        check "the metrics file is not rewritten at every sweep ($w0 writes, then $w1, over $(($(metric npuprof_sweeps_total) - s0)) sweeps)" \
                test "$w1" -eq "$w0" -a "$(($(metric npuprof_sweeps_total) - s0))" -ge 20
        check "npuprof_slowdowns_total 0, npuprof_slowdown 0, npuprof_ranks_stalled 0" \
                test "$(metric npuprof_slowdowns_total) $(metric npuprof_slowdown) $(metric npuprof_ranks_stalled)" = "0 0 0"

        # From step 400 each step takes 1.5 times as long.
        eventually "a slowdown is found" js "P['slowdown'] is not None"
        since=$(jv 'P["slowdown"]["since_step"]')
        check "... since step $since, within 30 of step 400" js "abs(P['slowdown']['since_step'] - 400) <= 30"
        check "... a factor of about 1.5 ($(jv 'P["slowdown"]["factor"]')) over a baseline of about 20 ms ($(jv 'P["slowdown"]["baseline_ms"]'))" \
                js "1.3 <= P['slowdown']['factor'] <= 1.75 and 15 <= P['slowdown']['baseline_ms'] <= 26"
        check "... the message says since when" js "'its baseline since step $since' in P['message']"
        check "... npuprof_slowdowns_total 1, npuprof_slowdown 1" \
                test "$(metric npuprof_slowdowns_total) $(metric npuprof_slowdown)" = "1 1"
        check "... logged once, with its step" \
                test "$(grep -c "slowdown since step $since: the job's step time is" "$log")" -eq 1
        seen=$(sed -n 's/.*slowdown since step .*(seen at step \([0-9,]*\)).*/\1/p' "$log" | tr -d ,)
        check "... seen at step ${seen:-?}, at most 75 steps after step 400" test "${seen:-1000}" -le 475 -a "${seen:-0}" -ge 440
        eventually "... and the metrics file says so at once" test "$(file_metric npuprof_slowdowns_total)" = 1

        # Rank 3 stops at step 560; the others step on.
        wait_for js "R(3)['step'] == 560" || { fail "rank 3 did not reach step 560" "$(diag)"; return; }
        check "rank 3 is not stalled at once" js "R(3)['stalled'] is False and P['stalled_ranks'] == []"
        eventually "rank 3 is stalled, and no other" \
                js "R(3)['stalled'] is True and P['stalled_ranks'] == [3] and all(R(k)['stalled'] is False for k in (0, 1, 2))"
        check "... for 2 s at least ($(jv 'R(3)["stalled_for_s"]')), its state still armed" \
                js "R(3)['stalled_for_s'] >= 2 and R(3)['state'] == 'armed' and R(0)['stalled_for_s'] is None"
        check "... named in the message, behind the 3 others: $(jv 'P["message"]')" \
                js "P['message'].startswith('rank 3 is stalled at step 560 (no step for ') and 'behind the 3 others, at steps ' in P['message']"
        check "... the others ahead: fastest_step beyond 560" js "P['fastest_step'] > 560"
        check "... npuprof_ranks_stalled 1, npuprof_rank_step{rank=\"3\"} 560, rank 0 beyond, with step times" \
                test "$(metric npuprof_ranks_stalled) $(metric 'npuprof_rank_step{rank="3"}')" = "1 560" -a \
                "$(metric 'npuprof_rank_step{rank="0"}')" -gt 560 -a -n "$(metric 'npuprof_rank_step_time_seconds{rank="0"}')"
        eventually "... the metrics file says so at once" test "$(file_metric npuprof_ranks_stalled)" = 1
        check "... logged once: the rank and the sentence" \
                test "$(grep -c 'progress stall: rank 3 has made no step for 2' "$log")" -eq 1 -a \
                "$(grep -c 'progress: rank 3 is stalled at step 560' "$log")" -eq 1
        sleep 0.5
        check "... and not again" test "$(grep -c 'progress stall: rank 3' "$log")" -eq 1

        kill -KILL "$rank3"
        { wait "$rank3"; } 2>/dev/null
        eventually "rank 3 killed: its stall is over" js "P['stalled_ranks'] == [] and R(3) is None"
        check "... logged once" test "$(grep -c 'progress stall over: rank 3 left, stalled at step 560' "$log")" -eq 1
        check "the slowdown was found once" test "$(metric npuprof_slowdowns_total)" = 1

        npf_stop_daemon
}

t_usage() {
        local o rc
        o=$("$npuprofd" --config "$conf" --slowdown-steps 2 2>&1); rc=$?
        check "usage: --slowdown-steps 2 is refused (exit 2)" test "$rc" = 2 -a -n "$(grep -F -- '--slowdown-steps takes' <<<"$o")"
        o=$("$npuprofd" --config "$conf" --stall-after 0.5 2>&1); rc=$?
        check "usage: --stall-after 0.5 is refused (exit 2)" test "$rc" = 2 -a -n "$(grep -F -- '--stall-after takes seconds from 1' <<<"$o")"
        o=$("$npuprofd" --help)
        check "usage: --help tells of the four settings" \
                test "$(grep -cE -- '--(stall-after|stall-factor|slowdown-pct|slowdown-steps) ' <<<"$o")" -eq 4
}

npf_run t_progress
npf_run t_usage

echo "progress: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
