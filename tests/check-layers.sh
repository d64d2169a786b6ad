#!/usr/bin/env bash
# The folders' one direction of dependency, as docs/ARCHITECTURE.md draws it: every
# `#include "…"` of a folder's sources names a folder below it, or its own.
#   tests/check-layers.sh [TREE]            (the tree of this script by default)
# The public headers count as the layer they belong to: npuprof/shm.h is the segment's ABI
# (shm), npuprof/rank.h is libnpuprof's API (rank), npuprof/protocol.h is the control
# protocol's constants, which depend on nothing and any part above lib may name.
set -u
tree=${1:-$(cd "$(dirname "$0")/.." && pwd)}
passed=0 failed=0

# What each folder may include besides itself.
declare -A allowed=(
        [lib]=""
        [shm]="lib"
        [conf]="lib shm"
        [rank]="lib shm protocol"
        [daemon]="lib shm conf protocol"
        [client]="lib shm conf protocol"
        [replay]="lib protocol"
        [opener]="lib protocol"
)

# layer_of INCLUDE: the layer a quoted include names, or nothing for a header of the
# includer's own folder or one from outside the tree (CANN's, under -I).
layer_of() {
        case $1 in
        npuprof/shm.h) echo shm ;;
        npuprof/rank.h) echo rank ;;
        npuprof/protocol.h) echo protocol ;;
        lib/* | shm/* | conf/* | rank/* | daemon/* | client/* | replay/* | opener/*) echo "${1%%/*}" ;;
        esac
}

for dir in lib shm conf rank daemon client replay opener; do
        bad=()
        for f in "$tree/$dir"/*.[ch]; do
                [ -e "$f" ] || continue
                while IFS= read -r inc; do
                        layer=$(layer_of "$inc")
                        [ -z "$layer" ] || [ "$layer" = "$dir" ] && continue
                        case " ${allowed[$dir]} " in
                        *" $layer "*) ;;
                        *) bad+=("$dir/$(basename "$f") includes \"$inc\"") ;;
                        esac
                done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
        done
        if [ ${#bad[@]} -eq 0 ]; then
                echo "ok   $dir/ includes only ${allowed[$dir]:-nothing} besides itself"
                passed=$((passed + 1))
        else
                echo "FAIL $dir/ includes what sits above it or beside it"
                printf '     | %s\n' "${bad[@]}"
                failed=$((failed + 1))
        fi
done

echo "layers: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
