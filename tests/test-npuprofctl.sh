#!/usr/bin/env bash
# The real npuprofctl, run as a person would: exit codes, error lines, --json.
#   tests/test-npuprofctl.sh PATH-TO-NPUPROFCTL
set -u
ctl=$1
passed=0 failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok()   { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/     | /' <<<"$2"; }

# expect NAME WANT-EXIT WANT-REGEX CMD...: run CMD; its exit code and output must match.
expect() {
        local name=$1 want=$2 re=$3 out status
        shift 3
        out=$(timeout 10 "$@" 2>&1)
        status=$?
        if [ "$status" -eq "$want" ] && grep -Eq -- "$re" <<<"$out"; then ok "$name"
        else fail "$name (exit $status, want $want; output must match /$re/)" "$out"; fi
}

# json_expect NAME PYTHON-EXPR FILE: the --json object must satisfy EXPR (the object is `o`).
json_expect() {
        local name=$1 expr=$2 file=$3 out
        out=$(timeout 10 "$ctl" validate --json "$file" 2>&1)
        if python3 -c "import json,sys; o=json.loads(sys.argv[1]); sys.exit(0 if ($expr) else 1)" "$out" 2>/dev/null
        then ok "$name"; else fail "$name" "$out"; fi
}

expect "help"                 0 'validate \[--json\] \[--output-root DIR\] FILE'  "$ctl" --help
expect "version"              0 'shm ABI 3'                 "$ctl" --version
expect "no command"           2 'Usage'                     "$ctl"
expect "unknown command"      2 "unknown command 'frobnicate'" "$ctl" frobnicate
expect "validate no file"     2 'no FILE given'             "$ctl" validate
expect "validate bad option"  2 'npuprofctl validate: unrecognized option' "$ctl" validate --bogus x
expect "validate help"        0 'Usage: npuprofctl validate' "$ctl" validate --help

expect "native example"    0 'valid \(native dialect\)'    "$ctl" validate examples/configs/native.json
expect "native window"     0 'window +from step 2000 to step 2005 \(6 steps, 1 of them warmup\), starting at a multiple of 100$' \
        "$ctl" validate examples/configs/native.json
expect "minimal example"   0 'from step 1000 to step 1004 \(5 steps\)' "$ctl" validate examples/configs/minimal.json
expect "torch_npu example" 0 'valid \(torch_npu dialect\)' "$ctl" validate examples/configs/torch_npu.json
expect "mindspore example" 0 'valid \(mindspore dialect\)' "$ctl" validate examples/configs/mindspore.json
expect "mindspore window"  0 'window +from step 10 to step 14 \(5 steps\)$' "$ctl" validate examples/configs/mindspore.json
expect "native ranks"      0 'ranks +0-7,16'               "$ctl" validate examples/configs/native.json

expect "wrong level: place and key" 1 \
        'wrong-level.json:6:27: error: experimental_config.profiler_level: expected one of .*found the string "Level3"' \
        "$ctl" validate examples/configs/broken/wrong-level.json
expect "wrong level: every error" 1 'invalid: 3 errors' "$ctl" validate examples/configs/broken/wrong-level.json
expect "half-written file" 1 'half-written.json:5:1: error: JSON syntax error' \
        "$ctl" validate examples/configs/broken/half-written.json
expect "one bad file fails the lot" 1 'invalid' \
        "$ctl" validate examples/configs/native.json examples/configs/broken/half-written.json

mkdir "$tmp/dir"
expect "directory"  1 'is a directory, not a regular file' "$ctl" validate "$tmp/dir"
expect "missing"    1 'cannot open .*No such file'          "$ctl" validate "$tmp/absent.json"
mkfifo "$tmp/fifo"
expect "FIFO does not block" 1 'is a FIFO, not a regular file' "$ctl" validate "$tmp/fifo"
head -c 1100000 /dev/zero | tr '\0' ' ' >"$tmp/big.json"
expect "over 1 MiB"  1 'at most 1048576 are read'       "$ctl" validate "$tmp/big.json"
printf '{"start_step": 5,\n "steps": "\xff"}' >"$tmp/latin1.json"
expect "not UTF-8"   1 'latin1.json:2:12: error: the file is not UTF-8' "$ctl" validate "$tmp/latin1.json"
printf '{"start_step": 5, "colour": 1}' >"$tmp/warn.json"
expect "unknown key warns" 0 "warn.json:1:29: warning: colour: unknown key 'colour' ignored" \
        "$ctl" validate "$tmp/warn.json"
printf '{"steps": 4, "warmup": 1}' >"$tmp/nostart.json"
expect "no start_step warns" 0 \
        'nostart.json:1:11: warning: steps: no start_step: profiling is off; add "start_step" \(a step, or "next"\)' \
        "$ctl" validate "$tmp/nostart.json"

json_expect "json valid" \
        'o["valid"] and o["dialect"] == "torch_npu" and o["window"] == {"start_step": 1000, "stop_step": 1004, "warmup": 1} and o["errors"] == []' \
        examples/configs/torch_npu.json
json_expect "json mindspore" \
        'o["valid"] and o["dialect"] == "mindspore" and o["window"] == {"start_step": 10, "stop_step": 14, "warmup": 0} and o["errors"] == [] and o["warnings"] == []' \
        examples/configs/mindspore.json
json_expect "json invalid" \
        'not o["valid"] and o["window"] is None and len(o["errors"]) == 3 and {"message","line","column","key"} <= set(o["errors"][1]) and o["errors"][1]["key"] == "experimental_config.profiler_level" and o["errors"][1]["line"] == 6 and o["errors"][1]["column"] == 27' \
        examples/configs/broken/wrong-level.json
json_expect "json effective config" \
        'o["config"]["ranks"] == "0-7,16" and o["config"]["analyse"] == "async" and o["config"]["window"]["start_at_multiple_of"] == 100' \
        examples/configs/native.json
json_expect "json warnings" 'o["valid"] and o["warnings"][0]["key"] == "colour" and o["warnings"][0]["column"] == 29' "$tmp/warn.json"

# Global options in both forms, and their errors; a command's own --help.
expect "--socket=PATH form"    3 'cannot connect to /nonexistent/x.sock' "$ctl" --socket=/nonexistent/x.sock status
expect "--socket without value" 2 "option '--socket' requires an argument" "$ctl" --socket
expect "status --help"         0 'Usage: npuprofctl .*status \[--json\]' "$ctl" status --help
expect "reload --help"         0 'exit 1 if the file is invalid' "$ctl" reload --help
long=$(printf '/tmp/%0120d.sock' 0)
expect "socket path too long is a usage error" 2 'takes at most 107' "$ctl" --socket "$long" status
# The segment name matters only where a segment is read.
expect "a bad NPUPROF_SHM does not stop validate" 0 'valid \(native dialect\)' \
        env NPUPROF_SHM=bad/name "$ctl" validate examples/configs/minimal.json
expect "a bad NPUPROF_SHM stops status" 2 "may hold only letters" env NPUPROF_SHM=bad/name "$ctl" status

# top's command line; what it shows is tests/test-top.sh's.
expect "top --help"                0 'Usage: npuprofctl top \[--interval SECONDS\] \[-n\|--iterations N\]' "$ctl" top --help
expect "top: an interval under 0.1" 2 "npuprofctl top: --interval takes seconds from 0.1 to 86400, not '0.05'" \
        "$ctl" top --interval 0.05
expect "top: an interval that is no number" 2 "--interval takes seconds from 0.1 to 86400, not 'nan'" \
        "$ctl" top --interval nan
expect "top: -n 0"                 2 "npuprofctl top: --iterations takes a count from 1 to 1000000000, not '0'" "$ctl" top -n 0
expect "top: an argument"          2 "npuprofctl top: unexpected argument 'x'" "$ctl" top x
expect "top: a bad NPUPROF_SHM"    2 "may hold only letters" env NPUPROF_SHM=bad/name "$ctl" top -n 1
expect "top: no daemon, one refresh, exit 3" 3 '^npuprofd: not reachable: cannot connect to /nonexistent/x.sock' \
        "$ctl" --socket /nonexistent/x.sock top -n 1

# The Python binding reads the segment itself: its ABI number must be the C one.
abi=$("$ctl" --version | sed -n 's/.*shm ABI \([0-9]*\).*/\1/p')
expect "the Python binding speaks the same shm ABI ($abi)" 0 "^NPF_SHM_ABI_VERSION = $abi\b" \
        grep "^NPF_SHM_ABI_VERSION" python/npuprof/_lib.py

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
