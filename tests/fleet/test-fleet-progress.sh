#!/usr/bin/env bash
# npuprofctl fleet names the ranks behind the rest of the fleet: three real npuprofd, one
# per "node", keeping their records in ONE fleet directory, two real train-loop ranks on
# each. First node-3 is slower (its ranks at half and a quarter of the others' speed):
# the slowest rank is listed behind, with its node, and the node as a whole after it. Then,
# with fresh ranks, one hangs at step 600 while the others run on to 800 and hang there, as
# a collective waiting for a rank elsewhere does: fleet names the stalled rank and its node,
# says the five others wait for it, and a stale record blames nobody.
#   tests/fleet/test-fleet-progress.sh BUILD_DIR
# Waits are bounded polls, never a stopwatch.
set -u
build=${1:?usage: tests/fleet/test-fleet-progress.sh BUILD_DIR}
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl trainloop=$build/train-loop
for b in "$npuprofd" "$npuprofctl" "$trainloop"; do
        [ -x "$b" ] || { echo "test-fleet-progress: $b is not built" >&2; exit 2; }
done
here=$(cd "$(dirname "$0")/.." && pwd)

. "$here/lib.sh"
npf_harness fleetprogress
wait_ms=20000
fleet=$tmp/fleet conf=$tmp/profiler_config.json
mkdir -p "$fleet" "$tmp/out"
printf '{ "start_step": 100000000, "steps": 2 }\n' >"$conf"
declare -A dpid
declare -a rpid

fl() { timeout 20 "$npuprofctl" fleet --fleet-dir "$fleet" "$@"; }
# fj EXPR: EXPR holds of `f`, fleet --json (b: its "behind"), whatever its exit status.
fj() {
        local o
        o=$(fl --json 2>/dev/null)
        python3 -c 'import json, sys
f = json.loads(sys.argv[2]); node = {n["node"]: n for n in f["nodes"]}; b = f["behind"]
sys.exit(0 if eval("(" + sys.argv[1] + ")") else 1)' "$1" "$o" 2>/dev/null
}
diag() { echo "fleet:"; fl 2>&1 | tail -n 12; }

for k in 1 2 3; do
        "$npuprofd" --config "$conf" --shm-name "npftest-fleetprogress-$$-$k" --socket "$tmp/node$k.sock" --no-inotify \
                --poll-interval 100 --output-root "$tmp/out" --analyze-jobs 0 --log stderr \
                --stall-after 2 --fleet-dir "$fleet" --node-name "node-$k" --fleet-interval 1 \
                2>>"$tmp/node$k.log" &
        dpid[$k]=$!
        all_pids+=("${dpid[$k]}")
done
# rank R on node K, with more of train-loop's options.
rank() {
        local r=$1 k=$2; shift 2
        "$trainloop" --rank "$r" --step-ms 20 --busy 0 --shm-name "npftest-fleetprogress-$$-$k" --backend host "$@" \
                >>"$tmp/rank$r.out" 2>&1 &
        rpid[$r]=$!
        all_pids+=("${rpid[$r]}")
}
stop_ranks() { for r in "$@"; do kill -KILL "${rpid[$r]}" 2>/dev/null; wait "${rpid[$r]}" 2>/dev/null; done; }

# --- a rank that is slower --------------------------------------------------------------
rank 0 1 --steps 100000; rank 1 1 --steps 100000
rank 2 2 --steps 100000; rank 3 2 --steps 100000
rank 4 3 --steps 100000 --slow-at 1 --slow-factor 2; rank 5 3 --steps 100000 --slow-at 1 --slow-factor 4
eventually "each record carries its ranks' progress: 2 ranks with a step on each node" \
        fj 'all(node["node-%d" % k]["progress"] and node["node-%d" % k]["progress"]["ranks"] == 2 for k in (1, 2, 3))'
eventually "node-3's record lists rank 5 among its laggards, with its step" \
        fj '[l["rank"] for l in node["node-3"]["progress"]["laggards"]] == [5] and
            node["node-3"]["progress"]["laggards_more"] == 0'
eventually "fleet --json: the worst behind the fleet is rank 5 on node-3, not stalled, 20 steps or more behind" \
        fj 'b["ranks"][0]["node"] == "node-3" and b["ranks"][0]["rank"] == 5 and not b["ranks"][0]["stalled"] and
            b["ranks"][0]["behind"] >= 20 and b["stalled"] == 0 and b["message"] is None'
eventually "node-3 as a whole is behind too: one entry for its 2 ranks, after rank 5" \
        fj '[(e["node"], e["rank"], e.get("ranks")) for e in b["ranks"] if e["node"] == "node-3"] ==
            [("node-3", 5, None), ("node-3", None, 2)]'
# Eventually: at one moment another node's ranks may also be a few steps behind, and the table then names nodes.
eventually "the table lists it under the fleet's highest step" \
        sh -c "timeout 20 '$npuprofctl' fleet --fleet-dir '$fleet' | grep -A1 '^behind the fleet.s highest step' | grep -q '^  rank 5 on node-3 at step [0-9,]*, [0-9,]* behind\$'"
stop_ranks 0 1 2 3 4 5
eventually "the ranks gone: no rank attached on any node" \
        fj 'all(n["ranks"]["attached"] == 0 for n in f["nodes"])'

# --- a hang: rank 12 on node-2 stops at step 600; the others run on to 800 and wait there ---
# Late enough that an idle daemon's first sweep (every 10 s with no rank) sees every rank step
# first: a rank never seen stepping is never judged stalled (npuprofd(8), PROGRESS).
wait_ms=45000
rank 10 1 --steps 100000 --hang-at 800; rank 11 1 --steps 100000 --hang-at 800
rank 12 2 --steps 100000 --hang-at 600; rank 13 2 --steps 100000 --hang-at 800
rank 14 3 --steps 100000 --hang-at 800; rank 15 3 --steps 100000 --hang-at 800
eventually "node-2's record: rank 12 stalled at step 600" \
        fj 'node["node-2"]["progress"]["stalled"][:1] == [{"rank": 12, "step": 600,
            "stalled_for_s": node["node-2"]["progress"]["stalled"][0]["stalled_for_s"]}]'
eventually "every rank stalled: fleet names rank 12 on node-2 and says the 5 others wait for it" \
        fj 'b["stalled"] == 6 and b["message"].startswith("rank 12 on node-2 is at step 600, the 5 others at 800: they wait for it") and
            b["ranks"][0]["node"] == "node-2" and b["ranks"][0]["rank"] == 12 and b["ranks"][0]["behind"] == 200'
check "the table says it in one sentence and marks the rank STALLED" \
        sh -c "o=\$(timeout 20 '$npuprofctl' fleet --fleet-dir '$fleet'); echo \"\$o\" | grep -q '^stalled: rank 12 on node-2 is at step 600, the 5 others at 800: they wait for it' &&
               echo \"\$o\" | grep -q '^  rank 12 on node-2 at step 600, 200 behind, STALLED for '"

wait_ms=20000
# A stale record blames nobody: node-2's daemon stopped by SIGSTOP.
kill -STOP "${dpid[2]}"
eventually "node-2 stale: its ranks are not blamed, the node is said unjudged" \
        fj 'f["stale"] == ["node-2"] and b["unjudged"] == ["node-2"] and
            all(r["node"] != "node-2" for r in b["ranks"]) and "node-2" not in (b["message"] or "")'
check "the table says node-2's progress is not judged" \
        sh -c "timeout 20 '$npuprofctl' fleet --fleet-dir '$fleet' | grep -q '^progress not judged, the record stale or stopped: node-2\$'"
kill -CONT "${dpid[2]}"

echo "fleet-progress: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
