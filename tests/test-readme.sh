#!/usr/bin/env bash
# The README as a newcomer meets it: at most 1,500 words; every relative link names a file or
# folder of the checkout; and every shell, Python and C block is either run here or names the
# suite that runs its commands:
#   <!-- runnable -->               the block runs here, in a scratch directory, as on a node
#                                   whose npuprofd (this build's) watches the profiler_config.json
#                                   there, with two ranks of build/train-loop stepping, and the
#                                   build's programs first on PATH; it must exit 0. A Python or
#                                   C block is a rank's loop: it is given what it leaves to the
#                                   reader (loader and train_one_step; steps and train_one_step,
#                                   and a main() around it), a rank of its own and a window of
#                                   steps 5 to 7 (npuprofctl start), and the window must end
#                                   complete. The Python block needs torch and the plain build
#                                   (the binding is tested there); elsewhere it is a skip.
#   <!-- run by SUITE on WHERE -->  SUITE runs the block where this machine cannot (a fresh
#                                   Debian with systemd: as root, apt and systemctl): it exists
#                                   and finds the block by this very mark.
#   <!-- checked by SUITE: WORD...; SUITE: WORD... -->  each SUITE exists and holds each of
#                                   its WORDs, and so does the block: the commands that need
#                                   root, a package manager, a GPU job or a cluster, or that
#                                   run the whole suite, are run by those suites.
# A block with neither mark is a failure.
#   tests/test-readme.sh BUILD_DIR
set -u
build=$(cd "${1:?usage: tests/test-readme.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/tests/lib.sh"
npf_harness readme
readme=$here/README.md

words=$(wc -w <"$readme")
check "the README is at most 1,500 words ($words)" [ "$words" -le 1500 ]

# Relative links: [text](path) and [text](path#anchor), not URLs.
bad_links=$(grep -o '](\([^)#]*\)[^)]*)' "$readme" | sed 's/^](\([^)#]*\).*/\1/' | grep -v '^[a-z]*://' |
        while read -r l; do [ -e "$here/$l" ] || echo "$l"; done)
check "every relative link names a file of the checkout${bad_links:+ (missing: $bad_links)}" [ -z "$bad_links" ]

# The blocks: each ```sh, ```python and ```c block, with its mark (the nearest line above it
# that is not empty), as NN.sh, NN.py or NN.c.
python3 - "$readme" "$tmp/blocks" <<'PY'
import os, re, sys
lines = open(sys.argv[1]).read().split("\n")
out = sys.argv[2]
os.makedirs(out)
n = 0
i = 0
while i < len(lines):
    lang = re.match(r"^```(sh|bash|console|python|c)\s*$", lines[i])
    if lang:
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        mark = lines[j].strip() if j >= 0 else ""
        k = i + 1
        while k < len(lines) and not lines[k].startswith("```"):
            k += 1
        n += 1
        ext = {"python": "py", "c": "c"}.get(lang.group(1), "sh")
        with open(os.path.join(out, "%02d.%s" % (n, ext)), "w") as f:
            f.write("\n".join(lines[i + 1:k]) + "\n")
        with open(os.path.join(out, "%02d.mark" % n), "w") as f:
            f.write("%d %s\n" % (i + 1, mark))
        i = k
    i += 1
PY

# The node the runnable blocks meet.
node=$tmp/node
mkdir -p "$node/out" "$node/fleet"
echo '{}' >"$node/profiler_config.json"
export NPUPROF_SHM=npftest-readme-$$-1 NPUPROF_SOCKET=$node/npuprofd.sock
log=$tmp/daemon.log
"$build/npuprofd" --config "$node/profiler_config.json" --output-root "$node/out" --fleet-dir "$node/fleet" \
        --no-kineto --poll-interval 100 --analyze-jobs 0 --log stderr 2>"$log" &
dpid=$!
all_pids+=("$dpid")
wait_for test -S "$NPUPROF_SOCKET"
for r in 0 1; do
        "$build/train-loop" --rank "$r" --steps 100000 --step-ms 20 >/dev/null 2>&1 &
        all_pids+=($!)
done
diag() { tail -n 5 "$log"; }
eventually "the node's two ranks are attached" \
        sh -c '"$1/npuprofctl" ranks | grep -c "^ *[01] " | grep -qx 2' _ "$build"

# A rank's loop (a Python or C block, @b, from README line @line) as rank @rank, in a window
# of steps 5 to 7: it must exit 0 and the window end complete.
status_py='import json, sys; o = json.loads(sys.argv[2])'
generation() { npf_json_print "$status_py" 'o["config"]["generation"]' "$build/npuprofctl" status --json; }
generation_above() { npf_json_holds "$status_py" 'o["config"]["generation"] > '"$1" "$build/npuprofctl" status --json; }
rank_block() {
        local b=$1 line=$2 rank=$3 first=$4 rc man g
        g=$(generation)
        (cd "$node" && PATH=$build:$PATH timeout 20 npuprofctl start --at 5 --steps 3 --ranks "$rank") >"$tmp/run.out" 2>&1 ||
                { fail "README line $line: npuprofctl start for its rank" "$(cat "$tmp/run.out")"; return; }
        # npuprofctl start edits the file and returns: the rank starts once the daemon took it.
        wait_for generation_above "${g:-0}" ||
                { fail "README line $line: the daemon did not take npuprofctl start's edit" "$(diag)"; return; }
        case $b in
        *.py)
                { printf 'import time, torch\nloader = [torch.randn(32, 64) for _ in range(20)]\n'
                  printf 'def train_one_step(batch):\n    (batch @ batch.T).sum()\n    time.sleep(0.02)\n\n'
                  cat "$b"; } >"$tmp/block.py"
                (cd "$node" && RANK=$rank NPUPROF_LIB=$build/libnpuprof.so PYTHONPATH=$here/python \
                        timeout 120 /usr/bin/python3 "$tmp/block.py") >"$tmp/run.out" 2>&1
                rc=$?
                ;;
        *.c)
                { printf '#include <npuprof/rank.h>\n#include <unistd.h>\n\n'
                  printf 'static void train_one_step(void)\n{\n        usleep(20000);\n}\n\n'
                  printf 'int main(void)\n{\n        int64_t steps = 20;\n\n'
                  cat "$b"
                  printf '        return 0;\n}\n'; } >"$tmp/block.c"
                # A sanitizer's build is linked with its runtime, as the library was.
                san=$(basename "$build")
                case $san in address|undefined|thread) san=-fsanitize=$san ;; *) san= ;; esac
                # The library as installed: libnpuprof.so, and libnpuprof.so.0, its soname.
                mkdir -p "$tmp/lib"
                ln -sf "$build/libnpuprof.so" "$tmp/lib/libnpuprof.so"
                ln -sf "$build/libnpuprof.so" "$tmp/lib/libnpuprof.so.0"
                cc -Wall -Werror $san -I"$here/include" "$tmp/block.c" -o "$tmp/block" \
                        -L"$tmp/lib" -lnpuprof -Wl,-rpath,"$tmp/lib" >"$tmp/run.out" 2>&1 &&
                        (cd "$node" && RANK=$rank timeout 60 "$tmp/block") >>"$tmp/run.out" 2>&1
                rc=$?
                ;;
        esac
        if [ "$rc" -ne 0 ]; then
                fail "README line $line runs as rank $rank: $first (exit $rc)" "$(tail -n 15 "$tmp/run.out")"
                return
        fi
        man=$(find "$node/out" -path "*rank${rank}_start5_stop7/manifest.json" 2>/dev/null | head -n 1)
        check "README line $line runs as rank $rank, its window of steps 5 to 7 complete: $first" \
                python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["status"] != "complete")' \
                "${man:-/nonexistent}"
}

runnable=0 checked=0 rank=10
for m in "$tmp"/blocks/*.mark; do
        b=$(ls "${m%.mark}".* | grep -v '\.mark$')
        read -r line mark <"$m"
        first=$(grep -m 1 -v '^\s*$' "$b")
        case $mark:$b in
        "<!-- runnable -->:"*.sh)
                runnable=$((runnable + 1))
                (cd "$node" && PATH=$build:$PATH timeout 60 bash -e "$b") >"$tmp/run.out" 2>&1
                rc=$?
                if [ "$rc" -eq 0 ]; then
                        ok "README line $line runs: $first"
                else
                        fail "README line $line runs: $first (exit $rc)" "$(tail -n 15 "$tmp/run.out")"
                fi
                ;;
        "<!-- runnable -->:"*.py)
                runnable=$((runnable + 1)) rank=$((rank + 1))
                if ldd "$build/libnpuprof.so" | grep -q 'lib\(asan\|ubsan\|tsan\)\.so'; then
                        skip "README line $line: the Python binding with a sanitizer's library is tested on the plain build"
                elif ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
                        skip "README line $line: torch cannot be imported (Debian: apt-get install python3-torch)"
                else
                        rank_block "$b" "$line" "$rank" "$first"
                fi
                ;;
        "<!-- runnable -->:"*.c)
                runnable=$((runnable + 1)) rank=$((rank + 1))
                rank_block "$b" "$line" "$rank" "$first"
                ;;
        "<!-- run by "*" -->:"*)
                checked=$((checked + 1))
                suite=${mark#<!-- run by }
                suite=${suite%% *}
                check "README line $line is run by $suite, which finds it by its mark: $first" \
                        grep -qF -- "$mark" "$here/$suite"
                ;;
        "<!-- checked by "*" -->:"*)
                checked=$((checked + 1))
                specs=${mark#<!-- checked by }
                specs=${specs% -->}
                missing= suites=
                IFS=';' read -ra parts <<<"$specs"
                for spec in "${parts[@]}"; do
                        spec=${spec# }
                        suite=${spec%%:*}
                        suites="$suites${suites:+, }$suite"
                        if [ ! -f "$here/$suite" ]; then
                                missing="$missing the suite $suite itself"
                                continue
                        fi
                        for w in ${spec#*:}; do
                                grep -qF -- "$w" "$here/$suite" || missing="$missing $w (not in $suite)"
                                grep -qF -- "$w" "$b" || missing="$missing $w (not in the block)"
                        done
                done
                check "README line $line is run by $suites: $first${missing:+; missing:$missing}" [ -z "$missing" ]
                ;;
        *)
                fail "README line $line: a block with no mark (runnable, or checked by a suite): $first"
                ;;
        esac
done
check "the README has runnable blocks ($runnable) and checked ones ($checked)" [ "$runnable" -gt 0 -a "$checked" -gt 0 ]

npf_stop_daemon
echo "readme: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
