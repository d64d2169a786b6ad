# SPDX-License-Identifier: MIT
# What the integration scripts share: counters, the cleanup of every process a test started,
# and bounded waits. Sourced, never run:
#   . tests/lib.sh; npf_harness d      # tmp=/tmp/npftest-d.XXXXXX; shm names npftest-d-$$-*
# Each script adds its pids to all_pids (for the trap) and test_pids (the running test's).

passed=0 failed=0
all_pids=()
test_pids=()
n=0                     # the running test's number
wait_ms=5000            # how long wait_for retries

npf_cleanup() {
        local p
        for p in "${all_pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
        for p in "${all_pids[@]}"; do wait "$p" 2>/dev/null; done
        rm -f /dev/shm/npftest-"$npf_prefix"-$$-*
        rm -rf "$tmp"
}

# npf_harness PREFIX: the private temporary directory $tmp and the exit trap.
npf_harness() {
        npf_prefix=$1
        tmp=$(mktemp -d "/tmp/npftest-$1.XXXXXX")
        trap npf_cleanup EXIT
        trap 'exit 130' INT TERM HUP
}

# npf_plain_only SUITE BUILD WHY: a suite of the plain build only (the packaging suites): with
# another (a sanitizer's, build/address), it says so and why, and counts as skipped.
npf_plain_only() {
        [ "$2" = build ] || [ "$2" = "$npf_top/build" ] && return 0
        echo "$1: $3 (this is $2)"
        exit 77
}
npf_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# npf_run TEST [ARG...]: the next test of a suite that starts a daemon for each, numbered n:
# a fresh $dir under $tmp with $out (its output root) and its daemon's $conf, $shm
# (npftest-PREFIX-PID-n), $sock and $log. After it, the processes it put in test_pids (the
# daemon's $dpid among them) are killed and its segment removed.
npf_run() {
        local p
        n=$((n + 1))
        dir=$tmp/$n out=$tmp/$n/out
        mkdir -p "$out"
        conf=$dir/profiler_config.json shm=npftest-$npf_prefix-$$-$n sock=$dir/npuprofd.sock log=$dir/daemon.log
        test_pids=() dpid=''
        "$@"
        for p in "${test_pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
        for p in "${test_pids[@]}"; do wait "$p" 2>/dev/null; done
        rm -f "/dev/shm/$shm.ctl" "/dev/shm/$shm.ranks"
}

# npf_stop_daemon [WHAT]: SIGTERM to the daemon $dpid, which must exit 0 with no sanitizer
# report in $log: one check, named after WHAT when given.
npf_stop_daemon() {
        local rc name="${1:+$1: }the daemon stops cleanly, with no sanitizer report"
        kill -TERM "$dpid"
        wait "$dpid"
        rc=$?
        if [ "$rc" -eq 0 ] && ! grep -qE 'Sanitizer|runtime error' "$log"; then
                ok "$name"
        else
                fail "$name" "exit $rc; $(tail -n 20 "$log")"
        fi
}

ok()   { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/     | /' <<<"$2"; return 0; }
skip() { echo "skip $1"; }

now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

# wait_for CMD...: retry CMD until it succeeds, for at most $wait_ms.
wait_for() {
        local deadline=$(($(now_ms) + wait_ms))
        until "$@"; do
                [ "$(now_ms)" -ge "$deadline" ] && return 1
                sleep 0.02
        done
}

# check NAME CMD...: CMD must succeed now. eventually NAME CMD...: within $wait_ms. A failure
# shows what the suite's own diag function prints, if it has one.
npf_diag() { if declare -F diag >/dev/null; then diag; fi; }
check()      { local name=$1; shift; if "$@"; then ok "$name"; else fail "$name" "$(npf_diag)"; fi; }
eventually() { local name=$1; shift; if wait_for "$@"; then ok "$name"; else fail "$name" "$(npf_diag)"; fi; }

# npf_json_holds PRELUDE EXPR CMD...: CMD prints a JSON reply, PRELUDE (Python that reads it
# from sys.argv[2], as `o` by convention) runs, and the Python expression EXPR holds.
npf_json_holds() {
        local prelude=$1 expr=$2 out
        shift 2
        out=$("$@" 2>/dev/null) || return 1
        python3 -c "$prelude"'
sys.exit(0 if eval(sys.argv[1]) else 1)' "$expr" "$out" 2>/dev/null
}

# npf_json_print PRELUDE EXPR CMD...: as npf_json_holds, printing the value of EXPR.
npf_json_print() {
        local prelude=$1 expr=$2 out
        shift 2
        out=$("$@" 2>/dev/null) || return 1
        python3 -c "$prelude"'
print(eval(sys.argv[1]))' "$expr" "$out" 2>/dev/null
}
