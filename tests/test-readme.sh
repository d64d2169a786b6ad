#!/usr/bin/env bash
# The README as a newcomer meets it: at most 1,500 words; every relative link names a file or
# folder of the checkout; and every shell block is either run here or names the suite that
# runs its commands:
#   <!-- runnable -->               the block runs here, in a scratch directory, as on a node
#                                   whose npuprofd (this build's) watches the profiler_config.json
#                                   there, with two ranks of build/train-loop stepping, and the
#                                   build's programs first on PATH; it must exit 0.
#   <!-- checked by SUITE: WORD...; SUITE: WORD... -->  each SUITE exists and holds each of
#                                   its WORDs, and so does the block: the commands that need
#                                   root, a package manager, a GPU job or a cluster, or that
#                                   run the whole suite, are run by those suites.
# A shell block with neither mark is a failure.
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

# The blocks: each ```sh block, with its mark (the nearest line above it that is not empty).
python3 - "$readme" "$tmp/blocks" <<'PY'
import os, re, sys
lines = open(sys.argv[1]).read().split("\n")
out = sys.argv[2]
os.makedirs(out)
n = 0
i = 0
while i < len(lines):
    if re.match(r"^```(sh|bash|console)\s*$", lines[i]):
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        mark = lines[j].strip() if j >= 0 else ""
        k = i + 1
        while k < len(lines) and not lines[k].startswith("```"):
            k += 1
        n += 1
        with open(os.path.join(out, "%02d.sh" % n), "w") as f:
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

runnable=0 checked=0
for m in "$tmp"/blocks/*.mark; do
        b=${m%.mark}.sh
        read -r line mark <"$m"
        first=$(grep -m 1 -v '^\s*$' "$b")
        case $mark in
        "<!-- runnable -->")
                runnable=$((runnable + 1))
                (cd "$node" && PATH=$build:$PATH timeout 60 bash -e "$b") >"$tmp/run.out" 2>&1
                rc=$?
                if [ "$rc" -eq 0 ]; then
                        ok "README line $line runs: $first"
                else
                        fail "README line $line runs: $first (exit $rc)" "$(tail -n 15 "$tmp/run.out")"
                fi
                ;;
        "<!-- checked by "*" -->")
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
                fail "README line $line: a shell block with no mark (runnable, or checked by a suite): $first"
                ;;
        esac
done
check "the README has runnable blocks ($runnable) and checked ones ($checked)" [ "$runnable" -gt 0 -a "$checked" -gt 0 ]

npf_stop_daemon
echo "readme: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
