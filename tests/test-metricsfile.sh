#!/usr/bin/env bash
# npuprofd --metrics-file: the Prometheus exposition kept in a file for node_exporter's
# textfile collector. The real daemon on a private config, shm name and socket; the file is
# read as the collector reads it, and checked by tests/promtext.py (format 0.0.4).
#   tests/test-metricsfile.sh BUILD_DIR
# Every test starts its own daemon; waits are bounded polls, never a stopwatch.
set -u
build=${1:?usage: tests/test-metricsfile.sh BUILD_DIR}
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl
for b in "$npuprofd" "$npuprofctl"; do
        [ -x "$b" ] || { echo "test-metricsfile: $b is not built" >&2; exit 2; }
done
here=$(cd "$(dirname "$0")" && pwd)
promtext=$here/promtext.py

. "$here/lib.sh"
npf_harness metricsfile

diag() {
        echo "status: $(timeout 10 "$npuprofctl" --socket "$sock" status --json 2>&1 | head -c 2000)"
        echo "daemon log (last lines):"
        tail -n 8 "$log" 2>/dev/null
        echo "metrics dir: $(ls -la "$mdir" 2>&1)"
}

ctl() { timeout 10 "$npuprofctl" --socket "$sock" "$@"; }
py_prelude='
import json, sys
o = json.loads(sys.argv[2])
cfg = (o.get("config") or {}) if isinstance(o, dict) else {}
mf = (o.get("daemon") or {}).get("metrics_file") if isinstance(o, dict) else None
'
js() { npf_json_holds "$py_prelude" "$1" ctl status --json; }
jv() { npf_json_print "$py_prelude" "json.dumps($1)" ctl status --json; }
# mj EXPR: the metrics file parses, and EXPR holds of its samples `m` (keys as promtext.py json).
mj() { npf_json_holds "$py_prelude"'
m = o' "$1" python3 "$promtext" json "$prom"; }
save() { printf '{ "start_step": %s, "steps": 2 }\n' "$1" >"$conf.tmp~" && mv -f "$conf.tmp~" "$conf"; }
gone() { ! kill -0 "$1" 2>/dev/null; }

# start_daemon [ARGS...]: npuprofd with --metrics-file $prom; sets dpid, waits for its first read.
start_daemon() {
        "$npuprofd" --config "$conf" --shm-name "$shm" --socket "$sock" --log stderr --output-root "$dir" \
                --metrics-file "$prom" "$@" 2>>"$log" &
        dpid=$!
        all_pids+=("$dpid") test_pids+=("$dpid")
        wait_for js 'cfg.get("state") not in (None, "unknown")'
}

run() {
        local p
        n=$((n + 1))
        dir=$tmp/$n
        mdir=$dir/textfile
        mkdir -p "$mdir"
        conf=$dir/profiler_config.json shm=npftest-metricsfile-$$-$n sock=$dir/npuprofd.sock log=$dir/daemon.log
        prom=$mdir/npuprof.prom
        test_pids=() dpid=''
        save 10
        "$@"
        for p in "${test_pids[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
        rm -f "/dev/shm/$shm.ctl" "/dev/shm/$shm.ranks"
}

# --- the file, its format, its changes -------------------------------------------------------

t_basics() {
        local g t0
        start_daemon --metrics-interval 3600 || { fail "basics: the daemon did not start" "$(diag)"; return; }
        g=$(jv 'cfg["generation"]')
        eventually "basics: the file is there at start, generation $g, config valid" \
                mj "m['npuprof_generation'] == $g and m['npuprof_config_valid'] == 1"
        check "basics: valid text format 0.0.4 (HELP, TYPE, names, labels, values)" python3 "$promtext" check "$prom"
        # As --version says them: "npuprofd 0.1.0 (shm ABI 3, protocol 2)".
        local version abi
        version=$("$npuprofd" --version | cut -d' ' -f2)
        abi=$("$npuprofd" --version | sed -n 's/.*shm ABI \([0-9]*\),.*/\1/p')
        check "basics: npuprof_build_info names the daemon's version" \
                mj "m.get('npuprof_build_info{protocol=\"2\",shm_abi=\"$abi\",version=\"$version\"}') == 1 and m['npuprof_up'] == 1"
        t0=$(jv 'cfg["published_unix_ms"]')
        check "basics: the publication time is the one status shows" \
                mj "abs(m['npuprof_generation_published_timestamp_seconds'] * 1000 - $t0) < 1 and $t0 > 1700000000000"
        check "basics: the daemon's start time is there" \
                mj "abs(m['npuprof_start_time_seconds'] * 1000 - $(jv 'o["daemon"]["started_unix_ms"]')) < 1"
        check "basics: mode 0644, for a collector of another user" test "$(stat -c %a "$prom")" = 644
        # Every `metrics` request sweeps first, so the sweep counter is the one line that moves.
        check "basics: the file holds the metrics command's text" \
                wait_for bash -c 'cmp -s <(grep -v "^npuprof_sweeps_total " "$1") <("$2" --socket "$3" metrics | grep -v "^npuprof_sweeps_total ")' \
                bash "$prom" "$npuprofctl" "$sock"
        ln "$prom" "$dir/before-edit.prom"
        save 20
        eventually "basics: an edit is in the file at once (no interval passed): generation $((g + 1))" \
                mj "m['npuprof_generation'] == $g + 1"
        check "basics: its publication time moved to the new one's" \
                mj "m['npuprof_generation_published_timestamp_seconds'] * 1000 == $(jv 'cfg["published_unix_ms"]') > $t0"
        # A link to the old file keeps the old text: the new one came by rename, not by writing in place.
        check "basics: the file was replaced, not written in place" \
                grep -qx "npuprof_generation $g" "$dir/before-edit.prom"
        rm -f "$dir/before-edit.prom"
        check "basics: no temporary is left beside it" test "$(ls -A "$mdir")" = npuprof.prom
        printf '{"start_step": -4}\n' >"$conf"
        eventually "basics: a broken file: npuprof_config_valid 0, errors 1" \
                mj "m['npuprof_config_valid'] == 0 and m['npuprof_config_errors_total'] == 1 and m['npuprof_generation'] == $g + 1"
        kill -TERM "$dpid"
        wait_for gone "$dpid"
        check "basics: a clean stop leaves npuprof_up 0, the counts kept" \
                mj "m['npuprof_up'] == 0 and m['npuprof_config_errors_total'] == 1 and m['npuprof_generation'] == $g + 1"
        check "basics: still valid after the stop, no temporary" \
                test -z "$(python3 "$promtext" check "$prom" 2>&1)" -a "$(ls -A "$mdir")" = npuprof.prom
}

# Nothing changes: the interval alone rewrites the file (its mtime says the daemon lives).
t_interval() {
        local w
        start_daemon --metrics-interval 0.1 || { fail "interval: the daemon did not start" "$(diag)"; return; }
        wait_for js 'mf and mf["writes"] >= 1'
        w=$(jv 'mf["writes"]')
        eventually "interval: with nothing changed, it is rewritten again and again" js "mf['writes'] >= $w + 5 and mf['errors'] == 0"
        check "interval: status shows path and interval" js "mf['path'] == '$prom' and mf['interval_s'] == 0.1"
}

# A reader reading in a tight loop while the daemon rewrites the file every 10 ms and the
# file is edited: every read is a whole, valid file.
t_torn() {
        local out i saver
        start_daemon --metrics-interval 0.01 --poll-interval 50 || { fail "torn: the daemon did not start" "$(diag)"; return; }
        wait_for test -e "$prom"
        ( for i in $(seq 30 50); do save "$i"; sleep 0.07; done ) &
        saver=$!
        out=$(python3 - "$prom" "$promtext" <<'PY'
import os, sys, time
sys.path.insert(0, os.path.dirname(sys.argv[2]))
import promtext
path = sys.argv[1]
reads = partial = missing = versions = 0
last, gens, bad = None, set(), ""
end = time.monotonic() + 2.0
while time.monotonic() < end:
    try:
        with open(path, encoding="utf-8") as f:
            st = os.fstat(f.fileno())
            versions += (st.st_ino, st.st_mtime_ns) != last
            last = (st.st_ino, st.st_mtime_ns)
            text = f.read()
    except FileNotFoundError:
        missing += 1
        continue
    reads += 1
    try:
        m = promtext.parse(text)
        if ("npuprof_metrics_file_errors_total", ()) not in m:
            raise promtext.Invalid("the last metric is missing")
        gens.add(m[("npuprof_generation", ())])
    except promtext.Invalid as e:
        partial += 1
        bad = bad or "%s (%d bytes)" % (e, len(text))
print(reads, partial, missing, versions, len(gens), bad)
PY
)
        wait "$saver"
        read -r reads partial missing versions gens bad <<<"$out"
        echo "     torn: $reads reads saw $versions versions of the file (${gens} generations) in 2 s;" \
                "the daemon wrote it $(jv 'mf["writes"]') times"
        check "torn: the reader read, and the daemon rewrote the file many times (${versions:-0} versions seen)" \
                test "${reads:-0}" -gt 100 -a "${versions:-0}" -gt 20 -a "${gens:-0}" -gt 5
        check "torn: no read saw a partial file (${partial:-?} did${bad:+: $bad})" test "${partial:-1}" = 0
        check "torn: no read found the file missing (${missing:-?} did)" test "${missing:-1}" = 0
        check "torn: the daemon wrote with no error" js "mf['errors'] == 0"
}

# The directory is read-only (a bind mount in the daemon's own mount namespace): reported,
# counted, the daemon carries on; made writable again, the file is written.
t_readonly() {
        local g
        [ "$(id -u)" = 0 ] && unshare --mount true 2>/dev/null \
                || { skip "read-only: needs root and unshare --mount"; return; }
        unshare --mount --propagation private sh -c 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"' \
                sh "$mdir" "$npuprofd" --config "$conf" --shm-name "$shm" --socket "$sock" --log stderr \
                --output-root "$dir" --metrics-file "$prom" --metrics-interval 0.2 2>>"$log" &
        dpid=$!
        all_pids+=("$dpid") test_pids+=("$dpid")
        wait_for js 'cfg.get("state") not in (None, "unknown")'
        eventually "read-only: the failure is in status, with its reason" \
                js "mf['errors'] >= 1 and 'Read-only file system' in mf['last_error'] and mf['writes'] == 0"
        eventually "read-only: the log says which file and why" \
                grep -qE "cannot write the metrics file $prom: [a-z]+ $mdir/.npuprof.prom.tmp: Read-only file system" "$log"
        sleep 0.5       # a few intervals: tried again each, logged once
        check "read-only: tried again every interval, logged once" \
                test "$(jv 'mf["errors"]')" -ge 3 -a "$(grep -c 'cannot write the metrics file' "$log")" = 1
        check "read-only: nothing appeared in the directory" test -z "$(ls -A "$mdir")"
        g=$(jv 'cfg["generation"]')
        save 40
        eventually "read-only: the daemon carries on: an edit is published" js "cfg['generation'] == $g + 1"
        check "read-only: the daemon runs" kill -0 "$dpid"
        nsenter --target "$dpid" --mount mount -o remount,bind,rw "$mdir"
        eventually "read-only: writable again, the file is written, with the errors counted" \
                mj "m['npuprof_generation'] == $g + 1 and m['npuprof_metrics_file_errors_total'] >= 3"
        check "read-only: status clears the error" js "mf['last_error'] is None and mf['writes'] >= 1"
        eventually "read-only: the log says it is written again" grep -q "the metrics file $prom is written again" "$log"
}

# The rename fails (the path is a directory): the temporary is removed, the daemon carries on.
t_rename_fails() {
        mkdir "$prom"
        start_daemon --metrics-interval 0.1 || { fail "rename fails: the daemon did not start" "$(diag)"; return; }
        eventually "rename fails: reported in status" js "mf['errors'] >= 2 and 'rename over $prom' in mf['last_error']"
        check "rename fails: the daemon answers" js "cfg['valid'] is True"
        # Stopped, no write is in flight: its last one failed too, and left nothing behind.
        kill -TERM "$dpid"
        wait_for gone "$dpid"
        check "rename fails: no temporary is left" test "$(ls -A "$mdir")" = npuprof.prom
        rmdir "$prom"
        start_daemon --metrics-interval 0.1 || { fail "rename fails: the daemon did not start again" "$(diag)"; return; }
        eventually "rename fails: the path freed, the file is written" mj "m['npuprof_up'] == 1"
}

t_usage() {
        local out rc
        out=$("$npuprofd" --config "$conf" --metrics-file relative.prom 2>&1); rc=$?
        check "usage: a relative --metrics-file is refused (exit 2)" test "$rc" = 2 -a -n "$(grep -F 'absolute path' <<<"$out")"
        out=$("$npuprofd" --config "$conf" --metrics-file "$prom" --metrics-interval 0 2>&1); rc=$?
        check "usage: --metrics-interval 0 is refused (exit 2)" test "$rc" = 2 -a -n "$(grep -F 'from 0.01' <<<"$out")"
        check "usage: --help lists both options" \
                test "$("$npuprofd" --help | grep -cE '^  --metrics-(file PATH|interval S) ')" = 2
}

run t_basics
run t_interval
run t_torn
run t_readonly
run t_rename_fails
run t_usage

echo "metricsfile: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
