#!/usr/bin/env bash
# npuprofctl fleet: three real npuprofd, one per "node" (their own segment, socket and node
# name), watching ONE profiler_config.json by polling as on NFS and keeping their records
# in ONE fleet directory; two real train-loop ranks on node-3. Driven with the real
# npuprofctl: all agree after an edit; a SIGSTOPped daemon lags after the next edit and is
# stale after three intervals (exit 1); after SIGCONT it catches up and `fleet --wait`
# returns; files that are not records are listed and ignored; a broken file makes every
# node invalid; a clean stop says stopped.
#   tests/fleet/test-fleet-view.sh BUILD_DIR
# Waits are bounded polls, never a stopwatch.
set -u
build=${1:?usage: tests/fleet/test-fleet-view.sh BUILD_DIR}
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl trainloop=$build/train-loop
for b in "$npuprofd" "$npuprofctl" "$trainloop"; do
        [ -x "$b" ] || { echo "test-fleet-view: $b is not built" >&2; exit 2; }
done
here=$(cd "$(dirname "$0")/.." && pwd)

. "$here/lib.sh"
npf_harness fleetview
wait_ms=15000
fleet=$tmp/fleet out=$tmp/out conf=$tmp/shared/profiler_config.json
mkdir -p "$fleet" "$out" "$tmp/shared"
declare -A dpid

sock_of() { echo "$tmp/node$1.sock"; }
ctl() { local k=$1; shift; timeout 10 "$npuprofctl" --socket "$(sock_of "$k")" "$@"; }
fl() { timeout 20 "$npuprofctl" fleet --fleet-dir "$fleet" "$@"; }
save() { printf '%s\n' "$1" >"$conf.tmp~" && mv -f "$conf.tmp~" "$conf"; }
# fj EXPR: EXPR holds of `f`, fleet --json, whatever its exit status.
fj() {
        local o
        o=$(fl --json 2>/dev/null)
        python3 -c 'import json, sys
f = json.loads(sys.argv[2]); node = {n["node"]: n for n in f["nodes"]}
sys.exit(0 if eval("(" + sys.argv[1] + ")") else 1)' "$1" "$o" 2>/dev/null
}
status_gen() { ctl "$1" status --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["config"]["generation"])'; }
exits() { local want=$1; shift; "$@" >/dev/null 2>&1; [ $? = "$want" ]; }
diag() {
        echo "fleet: $(fl 2>&1 | head -n 20)"
        for k in 1 2 3; do echo "node-$k log:"; tail -n 4 "$tmp/node$k.log" 2>/dev/null; done
}

start_node() {
        local k=$1
        "$npuprofd" --config "$conf" --shm-name "npftest-fleetview-$$-$k" --socket "$(sock_of "$k")" --no-inotify \
                --poll-interval 100 --output-root "$out" --analyze-jobs 0 --log stderr \
                --fleet-dir "$fleet" --node-name "node-$k" --fleet-interval 0.5 \
                --metrics-file "$tmp/node$k.prom" --metrics-interval 0.25 2>>"$tmp/node$k.log" &
        dpid[$k]=$!
        all_pids+=("${dpid[$k]}")
}

save '{ "start_step": 100000, "steps": 2 }'
for k in 1 2 3; do start_node "$k"; done

eventually "three daemons, one file: every node agrees (exit 0)" \
        sh -c "timeout 20 '$npuprofctl' fleet --fleet-dir '$fleet' | grep -q '^3 nodes: every node agrees'"
check "the table names the three nodes and says they agree" \
        sh -c "fl() { timeout 20 '$npuprofctl' fleet --fleet-dir '$fleet'; }; o=\$(fl); echo \"\$o\" | grep -q '^node-1 ' && echo \"\$o\" | grep -q '^node-3 ' && echo \"\$o\" | grep -q '3 nodes: every node agrees'"
check "--json: three nodes, one newest version held by all three, no list has a name" \
        fj 'len(f["nodes"]) == 3 and len(f["newest"]) == 1 and f["newest"][0]["nodes"] == 3 and
            not (f["lagging"] or f["stale"] or f["stopped"] or f["invalid"] or f["unreadable"])'
check "each node's generation in force is the one the node's status gives" \
        fj "all(node['node-%d' % k]['generation'] == g for k, g in ((1, $(status_gen 1)), (2, $(status_gen 2)), (3, $(status_gen 3))))"
check "without --fleet-dir, the directory is the local daemon's" \
        npf_json_holds 'import json, sys; o = json.loads(sys.argv[2])' 'o["dir"] == "'"$fleet"'" and len(o["nodes"]) == 3' \
        ctl 1 fleet --json
check "status tells the daemon's fleet record" \
        npf_json_holds 'import json, sys; o = json.loads(sys.argv[2])' \
        'o["daemon"]["fleet"]["node"] == "node-1" and o["daemon"]["fleet"]["dir"] == "'"$fleet"'"' ctl 1 status --json
# Two ranks on node-3, which nobody asks anything from now on: its record alone tells of them.
for r in 0 1; do
        "$trainloop" --rank "$r" --steps 100000 --step-ms 20 --busy 0 --shm-name "npftest-fleetview-$$-3" \
                --backend host >"$tmp/rank$r.out" 2>&1 &
        all_pids+=($!)
done
eventually "node-3's record: 2 ranks stepping, found without a request to its daemon" \
        fj 'node["node-3"]["ranks"]["attached"] == 2 and node["node-3"]["ranks"]["step_min"] >= 1 and
            node["node-2"]["ranks"]["attached"] == 0'
# A window 150 steps (3 s) ahead of the ranks, as their record says, opened with the real
# npuprofctl start editing the file itself.
at=$(fl --json | python3 -c 'import json, sys; print(max(n["ranks"]["step_max"] or 0 for n in json.load(sys.stdin)["nodes"]) + 150)')
timeout 10 "$npuprofctl" start --config "$conf" --at "$at" --steps 2 >/dev/null
eventually "node-3's record: the window done on both ranks, each in the newest windows with its directory" \
        fj 'node["node-3"]["windows"]["done"] == 2 and len(node["node-3"]["recent"]) == 2 and
            all(w["outcome"] == "done" and w["start_step"] == '"$at"' and w["output"].startswith("'"$out"'")
                for w in node["node-3"]["recent"]) and node["node-2"]["windows"]["done"] == 0'
# A node without ranks sweeps at its record's interval (0.5 s), not at the idle 10 s, so a
# record never waits 10 s to tell of ranks come or gone: as node_exporter reads it.
sweeps() { sed -n 's/^npuprof_sweeps_total \([0-9]*\)$/\1/p' "$tmp/node$1.prom"; }
s0=$(sweeps 2)
wait_ms=8000
eventually "an idle node with a fleet record sweeps at the record's interval (4 sweeps within 8 s)" \
        sh -c "[ \"\$(sed -n 's/^npuprof_sweeps_total \([0-9]*\)\$/\1/p' '$tmp/node2.prom')\" -ge $((s0 + 4)) ]"
wait_ms=15000
check "no record is larger than 64 KiB" sh -c "[ -z \"\$(find '$fleet' -name '*.json' -size +64k)\" ]"

# A daemon stopped by SIGSTOP (hung, swapped out, its node paused) misses the next edit.
g1=$(status_gen 1)
kill -STOP "${dpid[2]}"
save '{ "start_step": 100000, "steps": 3 }'
eventually "after the edit, nodes 1 and 3 publish a new generation" \
        sh -c "[ \"\$('$npuprofctl' --socket '$(sock_of 1)' config | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"generation\"])')\" -gt $g1 ] &&
               [ \"\$('$npuprofctl' --socket '$(sock_of 3)' config | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"generation\"])')\" -gt $g1 ]"
eventually "the stopped node-2 lags: it read another version than the newest" fj 'f["lagging"] == ["node-2"]'
check "fleet exits 1 while a node lags" exits 1 fl
eventually "after three intervals without a record, node-2 is stale too" \
        fj 'f["stale"] == ["node-2"] and f["lagging"] == ["node-2"] and node["node-2"]["age_ms"] > 1500'
check "the table marks node-2 LAGGING and STALE and counts them" \
        sh -c "o=\$(timeout 20 '$npuprofctl' fleet --fleet-dir '$fleet'); echo \"\$o\" | grep -q '^node-2 .*LAGGING STALE' && echo \"\$o\" | grep -q '1 lagging (node-2); 1 stale (node-2)'"
check "fleet --wait --timeout 0.5 gives up with exit 1, saying who it waits for" \
        sh -c "o=\$(timeout 20 '$npuprofctl' fleet --fleet-dir '$fleet' --wait --timeout 0.5); [ \$? = 1 ] && echo \"\$o\" | grep -q 'waiting for 1 lagging: node-2'"
timeout 60 "$npuprofctl" fleet --fleet-dir "$fleet" --wait --timeout 30 >"$tmp/wait.out" 2>&1 &
waiter=$!
all_pids+=("$waiter")
sleep 0.3
check "the waiter is still waiting while node-2 is stopped" kill -0 "$waiter"
kill -CONT "${dpid[2]}"
wait "$waiter"
check "after SIGCONT node-2 catches up and fleet --wait returns 0" test $? = 0
check "... having said whom it waited for, then that every node agrees" \
        sh -c "grep -q 'waiting for.*node-2' '$tmp/wait.out' && grep -q '3 nodes: every node agrees' '$tmp/wait.out'"
check "every node now holds the newest version" fj 'f["newest"][0]["nodes"] == 3 and not f["lagging"]'

# Records are judged by their content: a copy of node-1's record as node-9, written now but
# with an mtime of 2001, is fresh; written a minute ago with an mtime of now, it is stale.
python3 - "$fleet" <<'PY'
import json, os, sys, time
d = sys.argv[1]
r = json.load(open(os.path.join(d, "node-1.json")))
r["node"] = "node-9"
r["written_unix_ms"] = int(time.time() * 1000)
json.dump(r, open(os.path.join(d, "node-9.json"), "w"))
os.utime(os.path.join(d, "node-9.json"), (1e9, 1e9))
PY
check "a fresh record with an mtime of 2001 is not stale" fj '"node-9" in node and not node["node-9"]["stale"]'
python3 - "$fleet" <<'PY'
import json, os, sys, time
p = os.path.join(sys.argv[1], "node-9.json")
r = json.load(open(p))
r["written_unix_ms"] = int(time.time() * 1000) - 60000
json.dump(r, open(p, "w"))
PY
check "a record written a minute ago at a 0.5 s interval is stale, whatever its mtime" fj 'f["stale"] == ["node-9"]'
rm -f "$fleet/node-9.json"

# Files in the directory that are not records.
printf '{"format": 1, "node": "tr' >"$fleet/truncated.json"
printf '\177ELF\002\001' >"$fleet/binary.json"
printf '{"format": 9, "node": "v9"}' >"$fleet/v9.json"
python3 - "$fleet" <<'PY'
import json, os, sys, time
d = sys.argv[1]
r = json.load(open(os.path.join(d, "node-1.json")))
r["node"] = "future"
r["written_unix_ms"] = int(time.time() * 1000) + 3 * 3600 * 1000
json.dump(r, open(os.path.join(d, "future.json"), "w"))
open(os.path.join(d, "huge.json"), "w").write(" " * (4 << 20))
PY
mkfifo "$fleet/fifo.json"
ln -s /dev/zero "$fleet/zero.json"
printf 'x' >"$fleet/.node-7.json.tmp"
check "seven files that are not records: each listed with its reason, the fleet still agrees (exit 0)" \
        fj 'len(f["unreadable"]) == 7 and len(f["nodes"]) == 3 and not f["lagging"] and
            {u["file"]: u["reason"].split(":")[0].split(" ")[0] for u in f["unreadable"]} ==
            {"truncated.json": "truncated", "binary.json": "not", "v9.json": "a", "future.json": "written",
             "huge.json": "larger", "fifo.json": "not", "zero.json": "cannot"}'
check "... and the command exits 0 with them there" exits 0 fl
check "the table says why each is unreadable" \
        sh -c "o=\$(timeout 20 '$npuprofctl' fleet --fleet-dir '$fleet'); echo \"\$o\" | grep -q '^unreadable: v9.json: a record of format 9' && echo \"\$o\" | grep -q '^unreadable: future.json: written'"
rm -f "$fleet"/truncated.json "$fleet"/binary.json "$fleet"/v9.json "$fleet"/future.json "$fleet"/huge.json \
        "$fleet"/fifo.json "$fleet"/zero.json

# A broken file: every node keeps its configuration in force and says the file is invalid.
save '{ "start_step": 100000, "steps": "three" }'
eventually "a broken file: all three nodes invalid, exit 1" \
        fj 'f["invalid"] == ["node-1", "node-2", "node-3"] and node["node-1"]["file"]["error"]["key"] == "steps"'
check "the table shows the error's line, column and key" \
        sh -c "timeout 20 '$npuprofctl' fleet --fleet-dir '$fleet' | grep -q '^node-1 .* 1:[0-9]*: steps: '"
save '{ "start_step": 100000, "steps": 4 }'
eventually "the file mended: every node agrees again" exits 0 fl

# A clean stop says so.
kill -TERM "${dpid[3]}"
wait "${dpid[3]}"
check "node-3 stopped cleanly: its record says stopped, fleet exits 1" \
        fj 'f["stopped"] == ["node-3"] and node["node-3"]["state"] == "stopped" and not f["stale"]'
check "... and exits 1" exits 1 fl

# Usage and an unreadable directory.
check "--timeout without --wait is a usage error (exit 2)" exits 2 fl --timeout 3
check "a directory that cannot be read: exit 3" exits 3 timeout 10 "$npuprofctl" fleet --fleet-dir "$tmp/none"
check "npuprofd refuses a node name that cannot name a file (exit 2)" \
        exits 2 "$npuprofd" --config "$conf" --fleet-dir "$fleet" --node-name ../etc/passwd

echo "fleet-view: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
