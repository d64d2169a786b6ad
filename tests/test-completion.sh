#!/usr/bin/env bash
# Bash completion of npuprofctl and npuprof-replay: each file sourced into bash (with
# bash-completion's helpers, as it loads them, and alone), its function called with
# COMP_WORDS as bash would, and the candidates compared with what the programs take: every
# command and option that the built programs' --help lists is offered where it applies.
#   tests/test-completion.sh BUILD_DIR
set -u
build=${1:?usage: tests/test-completion.sh BUILD_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/tests/lib.sh"
npf_harness completion
ctl=$build/npuprofctl replay=$build/npuprof-replay
for f in "$ctl" "$replay"; do
        [ -x "$f" ] || { echo "test-completion: $f is not built"; exit 1; }
done
bash_completion=/usr/share/bash-completion/bash_completion

# complete WITH FUNCTION WORD...: the candidates, sorted, one per line, for the command line
# WORD... (the last word is the one being completed), in a bash that sourced the two files,
# after bash-completion's helpers when WITH is "full".
complete_words() {
        local with=$1 fn=$2
        shift 2
        (cd "$tmp/cwd" && bash -c '
                [ "$1" = full ] && . "$2"
                . "$3"; . "$4"
                fn=$5; shift 5
                COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
                COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
                COMPREPLY=()
                "$fn"
                printf "%s\n" "${COMPREPLY[@]}"' sh "$with" "$bash_completion" \
                "$here/client/npuprofctl.bash-completion" "$here/replay/npuprof-replay.bash-completion" "$fn" "$@") | sort
}
# has WITH FUNCTION "WANTED..." WORD...: every one of WANTED is a candidate.
has() {
        local with=$1 fn=$2 want=$3 got w missing=
        shift 3
        got=$(complete_words "$with" "$fn" "$@")
        for w in $want; do grep -qxF -- "$w" <<<"$got" || missing="$missing $w"; done
        [ -z "$missing" ] && return 0
        echo "     | [$*]: missing$missing; offered: $(tr '\n' ' ' <<<"$got")"
        return 1
}
# is WITH FUNCTION "EXACTLY..." WORD...: the candidates are exactly these.
is() {
        local with=$1 fn=$2 want got
        want=$(tr ' ' '\n' <<<"$3" | sort)
        shift 3
        got=$(complete_words "$with" "$fn" "$@")
        [ "$got" = "$want" ] && return 0
        echo "     | [$*]: offered $(tr '\n' ' ' <<<"$got"), want $3"
        return 1
}

mkdir -p "$tmp/cwd/windows/rank0_start4_stop6" && : >"$tmp/cwd/snapshot.pickle" && : >"$tmp/cwd/profiler_config.json"

# What the programs say they take. npuprofctl: the commands of --help, its global options,
# and each command's options from the usage lines of `npuprofctl COMMAND --help`.
commands=$("$ctl" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p' | sort -u)
global=$("$ctl" --help | sed -n '/^Options:/,/^$/p' | grep -oE '^  --[a-z-]+(, --[a-z-]+)*' | grep -oE -- '--[a-z-]+')
options_of() {  # the options in the usage of `npuprofctl $1 --help`, after the command's name
        "$ctl" "$1" --help 2>/dev/null | sed -n '1,/^$/p' | sed "1s/^.* $1 //" | grep -oE -- '(^|[[ |])--?[a-z][a-z-]*' |
                grep -oE -- '--?[a-z][a-z-]*' | sort -u
}
replay_opts=$("$replay" --help | sed -n '/^Options:/,/^$/p' | grep -oE '^ +(-[a-z], )?--[a-z-]+' | grep -oE -- '--?[a-z-]+')
split_opts=$("$replay" --help | sed -n 's/^.*npuprof-replay split //p' | grep -oE -- '--?[a-z][a-z-]*')

check "npuprofctl --help lists commands (${commands//$'\n'/ })" test -n "$commands"
for with in full alone; do
        [ "$with" = full ] && [ ! -r "$bash_completion" ] && { skip "with bash-completion: $bash_completion is absent"; continue; }
        echo "# $with: sourced ${with/full/after bash-completion}"
        check "$with: npuprofctl <TAB> offers every command of its --help" has $with _npuprofctl "$commands" npuprofctl ""
        check "$with: npuprofctl - offers its global options (${global//$'\n'/ })" has $with _npuprofctl "$global" npuprofctl -
        check "$with: npuprofctl st<TAB> is status, start, stop" is $with _npuprofctl "start status stop" npuprofctl st
        check "$with: the command is found after --socket PATH" \
                is $with _npuprofctl "start status stop" npuprofctl --socket /run/x.sock st
        for c in $commands; do
                [ "$c" = help ] && continue
                o=$(options_of "$c")
                check "$with: npuprofctl $c - offers ${o//$'\n'/ }" has $with _npuprofctl "$o --help" npuprofctl "$c" -
        done
        check "$with: start --level offers torch_npu's levels" \
                is $with _npuprofctl "Level0 Level1 Level2 Level_none" npuprofctl start --at 10 --level ""
        check "$with: start --backend offers acl, host, auto" is $with _npuprofctl "acl auto host" npuprofctl start --backend ""
        check "$with: validate completes file names" \
                is $with _npuprofctl "profiler_config.json" npuprofctl validate prof
        check "$with: analyze completes paths" is $with _npuprofctl "windows" npuprofctl analyze win
        check "$with: analyze -o completes directories only" is $with _npuprofctl "windows" npuprofctl analyze -o ""

        check "$with: npuprof-replay - offers every option of its --help" \
                has $with _npuprof_replay "$replay_opts" npuprof-replay -
        check "$with: npuprof-replay split - offers ${split_opts//$'\n'/ }" \
                has $with _npuprof_replay "$split_opts" npuprof-replay split -
        check "$with: npuprof-replay <TAB> offers cluster, split and paths" \
                has $with _npuprof_replay "cluster split snapshot.pickle windows" npuprof-replay ""
        check "$with: npuprof-replay cluster completes directories only" \
                is $with _npuprof_replay "windows" npuprof-replay cluster --json ""
        check "$with: npuprof-replay sn<TAB> is the snapshot" is $with _npuprof_replay "snapshot.pickle" npuprof-replay sn
done

echo "completion: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
