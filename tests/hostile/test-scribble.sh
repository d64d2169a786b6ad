#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A scribbling rank: the real npuprofd, four real ranks (train-loop, window at steps
# 100..104) and tests/hostile/scribbler running as nobody, which writes random bytes and
# nasty values (odd sequence words, states out of range, strings without NUL, huge counts
# and indices, claims of other live processes) into its own slot, every other slot and the
# rank index, as fast as it can, while a client asks `status` and `ranks` in a loop, through
# the daemon and straight from the segment.
#   tests/hostile/test-scribble.sh BUILD_DIR
# Asserted: the scribbler cannot get the control block writable; the daemon answers every
# request, with well-formed JSON, and keeps sweeping; every rank exits 0 with its window
# done at 100..104 and its manifest on disk; the control block's configuration is unchanged;
# the daemon stops cleanly (no sanitizer report). Rates and latencies are printed, never
# asserted.
set -u
build=${1:?usage: tests/hostile/test-scribble.sh BUILD_DIR}
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl trainloop=$build/train-loop scribbler=$build/tests/scribbler
for b in "$npuprofd" "$npuprofctl" "$trainloop" "$scribbler"; do
        [ -x "$b" ] || { echo "test-scribble: $b is not built" >&2; exit 2; }
done
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null || ! id nobody >/dev/null 2>&1; then
        echo "test-scribble: needs root, setpriv and the user nobody to run the scribbler as nobody"
        exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
npf_harness scribble
wait_ms=20000           # a bound for the slowest sanitizer build, never a measurement

seconds=10 ranks=(0 1 2 3)
root=$tmp/out conf=$tmp/profiler_config.json sock=$tmp/npuprofd.sock shm=npftest-scribble-$$-1 log=$tmp/daemon.log
replies=$tmp/replies
mkdir -p "$root" "$replies" "$tmp/bin"
# nobody runs its own copy of the scribbler, where it can reach it.
chmod 755 "$tmp" "$tmp/bin"
install -m 755 "$scribbler" "$tmp/bin/scribbler"

ctl() { timeout 10 "$npuprofctl" --socket "$sock" --shm-name "$shm" "$@"; }
gone() {
        local s
        s=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 0
        [ -z "$s" ] || [ "$s" = Z ]
}
# The control block's identity and configuration: magic .. daemon_pid, config_seq and the
# configuration (offsets 0, 64, 192 of npf_shm_ctl_t; the status and heartbeat move).
ctl_config_bytes() {
        local f=/dev/shm/$shm.ctl
        { head -c 36 "$f"; tail -c +65 "$f" | head -c 8; tail -c +193 "$f" | head -c 16576; } | sha256sum
}
sweeps() { ctl metrics | sed -n 's/^npuprof_sweeps_total //p'; }

printf '{ "start_step": 100, "steps": 5, "output_dir": "w" }\n' >"$conf"
( ulimit -c 0; exec "$npuprofd" --config "$conf" --shm-name "$shm" --socket "$sock" --output-root "$root" \
        --poll-interval 100 --analyzer /bin/true --log stderr ) 2>>"$log" &
dpid=$!
all_pids+=("$dpid")
if wait_for ctl status >/dev/null 2>&1; then ok "npuprofd starts"
else fail "npuprofd starts" "$(tail -n 5 "$log")"; echo "scribble: $passed passed, $failed failed"; exit 1; fi

# The probe sees a writable control block when there is one (root may write it): the
# refusals below are the kernel's, not the probe's blindness.
probe=$("$scribbler" --shm "$shm" --probe 2>&1)
if [ $? = 3 ] && grep -q '^control block: writable shared mapping of the O_RDWR descriptor ALLOWED$' <<<"$probe"; then
        ok "as root, the scribbler's probe finds the control block writable (exit 3)"
else
        fail "as root, the scribbler's probe finds the control block writable (exit 3)" "$probe"
fi

# --- the ranks, then the scribbler while they step towards their window ----------------------
tl_pids=()
for r in "${ranks[@]}"; do
        "$trainloop" --rank "$r" --steps 400 --step-ms 25 --shm-name "$shm" --backend host >"$tmp/tl$r.out" 2>&1 &
        tl_pids+=($!)
done
all_pids+=("${tl_pids[@]}")
armed_before_window() {
        ctl ranks --json 2>/dev/null | python3 -c '
import json, sys
rs = json.load(sys.stdin)["ranks"]
sys.exit(0 if len(rs) == 4 and all(r["state"] == "armed" and (r["step"] or 0) < 100 for r in rs) else 1)'
}
if wait_for armed_before_window; then
        ok "the 4 ranks are attached and armed for 100..104, all before step 100"
else
        fail "the 4 ranks are attached and armed for 100..104, all before step 100" "$(ctl ranks)"
fi
config_before=$(ctl config --json) bytes_before=$(ctl_config_bytes) sweeps_before=$(sweeps)

setpriv --reuid=nobody --regid=nogroup --clear-groups "$tmp/bin/scribbler" --shm "$shm" --seconds "$seconds" \
        >"$tmp/scribbler.out" 2>&1 &
spid=$!
all_pids+=("$spid")

# The client: status and ranks through the daemon, and status read straight from the
# segment (a socket that does not exist), until the scribbler is done.
(
        k=0
        while ! gone "$spid"; do
                for what in status ranks direct; do
                        k=$((k + 1))
                        t0=$(now_ms)
                        case $what in
                        direct) timeout 10 "$npuprofctl" --socket "$tmp/none.sock" --shm-name "$shm" status --json ;;
                        *) ctl "$what" --json ;;
                        esac >"$replies/$k.$what" 2>"$replies/$k.$what.err"
                        echo "$? $(($(now_ms) - t0))" >"$replies/$k.$what.rc"
                done
        done
) &
cpid=$!
all_pids+=("$cpid")
wait "$spid"
scribbler_rc=$?
sweeps_after=$(sweeps)
wait "$cpid"

if [ "$scribbler_rc" = 0 ] && [ "$(grep -c '^control block: .* refused: Permission denied$' "$tmp/scribbler.out")" = 3 ] &&
   grep -q '^scribbled ' "$tmp/scribbler.out"; then
        ok "as nobody, the control block cannot be opened, mapped or made writable; the scribbler ran"
else
        fail "as nobody, the control block cannot be opened, mapped or made writable; the scribbler ran" \
                "exit $scribbler_rc: $(cat "$tmp/scribbler.out")"
fi

# Every reply, checked once by one python3: exit status 0, well-formed JSON of the right shape.
verdict=$(python3 - "$replies" <<'EOF'
import glob, json, os, sys
d = sys.argv[1]
n = {"status": 0, "ranks": 0, "direct": 0}
bad, lat = [], {"status": [], "ranks": [], "direct": []}
for rc_file in glob.glob(os.path.join(d, "*.rc")):
    base = rc_file[:-3]
    what = base.rsplit(".", 1)[1]
    rc, ms = map(int, open(rc_file).read().split())
    n[what] += 1
    lat[what].append(ms)
    text = open(base).read()
    try:
        o = json.loads(text)
        if what == "status":
            ok = rc == 0 and o["daemon"]["pid"] > 0 and o["config"]["generation"] == 1 and isinstance(o["ranks"], list)
        elif what == "ranks":
            ok = rc == 0 and isinstance(o["ranks"], list)
        else:   # read from the segment: the daemon is unreachable by design (exit 3)
            ok = rc == 3 and o["daemon"] is None and o["shm"]["error"] is None and \
                 o["config"]["generation"] == 1 and isinstance(o["ranks"], list)
    except Exception as e:
        ok = False
    if not ok:
        bad.append("%s (exit %d): %s %s" % (os.path.basename(base), rc, text[:200], open(base + ".err").read()[:200]))
def stats(v):
    v = sorted(v)
    return "p50 %d ms, max %d ms" % (v[len(v) // 2], v[-1]) if v else "none"
print(len(bad), n["status"], n["ranks"], n["direct"])
print("status %s; ranks %s; straight from the segment %s" % (stats(lat["status"]), stats(lat["ranks"]), stats(lat["direct"])))
for b in bad[:5]:
    print(b)
EOF
)
read -r nbad nstatus nranks ndirect <<<"${verdict%%$'\n'*}"
if [ "$nbad" = 0 ] && [ "$nstatus" -gt 0 ] && [ "$nranks" -gt 0 ] && [ "$ndirect" -gt 0 ]; then
        ok "all $nstatus status and $nranks ranks answers, and $ndirect direct reads of the segment, well-formed"
else
        fail "every status and ranks request answered with well-formed JSON" "$verdict"
fi
if [ -n "$sweeps_before" ] && [ -n "$sweeps_after" ] && [ "$sweeps_after" -gt "$sweeps_before" ]; then
        ok "the daemon kept sweeping the rank table ($((sweeps_after - sweeps_before)) sweeps)"
else
        fail "the daemon kept sweeping the rank table" "sweeps $sweeps_before -> $sweeps_after"
fi
if [ "$(ctl_config_bytes)" = "$bytes_before" ] && [ "$(ctl config --json)" = "$config_before" ]; then
        ok "the control block's configuration is unchanged"
else
        fail "the control block's configuration is unchanged" "$(ctl config --json | head -c 600)"
fi

# --- the ranks finished their run and their window --------------------------------------
for i in "${!ranks[@]}"; do
        r=${ranks[$i]}
        wait "${tl_pids[$i]}"
        rc=$?
        want="rank $r: 400 steps done (.*); window done in $root/w/rank${r}_start100_stop104\$"
        if [ "$rc" = 0 ] && grep -q "$want" "$tmp/tl$r.out" && [ -s "$root/w/rank${r}_start100_stop104/manifest.json" ]; then
                ok "rank $r exits 0 with its window 100..104 done and its manifest written"
        else
                fail "rank $r exits 0 with its window 100..104 done and its manifest written" \
                        "exit $rc: $(cat "$tmp/tl$r.out"; ls -la "$root/w" 2>&1)"
        fi
done

# --- the daemon is still there, and stops cleanly ------------------------------------------
if ! gone "$dpid" && ctl status >/dev/null; then ok "the daemon is alive and answers after the scribbling"
else fail "the daemon is alive and answers after the scribbling" "$(tail -n 20 "$log")"; fi
kill -TERM "$dpid"
wait "$dpid"
status=$?
if [ "$status" = 0 ] && ! grep -q 'Sanitizer\|runtime error:' "$log"; then
        ok "the daemon stops cleanly, with no sanitizer report"
else
        fail "the daemon stops cleanly, with no sanitizer report" "exit $status: $(grep -A20 'Sanitizer\|runtime error' "$log" | head -40)"
fi

echo
echo "scribbler: $(grep '^scribbled ' "$tmp/scribbler.out")"
echo "meanwhile: $((sweeps_after - sweeps_before)) sweeps, $nstatus status and $nranks ranks answers," \
     "$ndirect direct reads of the segment"
echo "latency:   ${verdict#*$'\n'}" | head -n 1
echo "scribble: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
