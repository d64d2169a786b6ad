#!/usr/bin/env bash
# The front door: what a newcomer meets first. Every program's --version is the project's one
# version (debian/changelog's upstream version, include/npuprof/protocol.h's, the Python
# package's, the man pages'); every --help opens with an example, before its options; every
# man page renders without a groff warning and shows an EXAMPLE on its first screen; and
# the messages of the mistakes met first name the fix. The real programs are run and the
# conditions made: a daemon that is not there, a socket or segment of another user, a
# directory missing, a typo.
#   tests/test-help.sh BUILD_DIR
# What needs root (another user's socket, segment, directory) is skipped, and said so,
# without it.
set -u
build=${1:?usage: tests/test-help.sh BUILD_DIR}
build=$(cd "$build" && pwd) || exit 2
here=$(cd "$(dirname "$0")/.." && pwd)
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl replay=$build/npuprof-replay
shmopen=$build/npuprof-shmopen trainloop=$build/train-loop
for b in "$npuprofd" "$npuprofctl" "$replay" "$shmopen" "$trainloop"; do
        [ -x "$b" ] || { echo "test-help: $b is not built" >&2; exit 2; }
done
. "$here/tests/lib.sh"
npf_harness help

# expect NAME WANT-EXIT TEXT CMD...: CMD exits WANT-EXIT and its output (stdout and stderr)
# holds TEXT, a fixed string.
expect() {
        local name=$1 want=$2 text=$3 out rc
        shift 3
        out=$(timeout 10 "$@" 2>&1)
        rc=$?
        if [ "$rc" -eq "$want" ] && grep -qF -- "$text" <<<"$out"; then
                ok "$name"
        else
                fail "$name (exit $rc, want $want; the output must hold: $text)" "$out"
        fi
}
# lacks NAME TEXT CMD...: the output of CMD does not hold TEXT.
lacks() {
        local name=$1 text=$2 out
        shift 2
        out=$(timeout 10 "$@" 2>&1)
        if grep -qF -- "$text" <<<"$out"; then fail "$name" "$out"; else ok "$name"; fi
}
# "${nobody[@]}" CMD...: CMD as user nobody, no supplementary group.
nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
root=false
[ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && root=true

# --- one version --------------------------------------------------------------------------
upstream=$(sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' "$here/debian/changelog")
upstream=${upstream#*:}
upstream=${upstream%-*}
header=$(sed -n 's/^#define NPUPROF_VERSION *"\(.*\)"/\1/p' "$here/include/npuprof/protocol.h")
python=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$here/python/npuprof/__init__.py")
check "debian/changelog's upstream version ($upstream) is include/npuprof/protocol.h's ($header)" \
        test -n "$upstream" -a "$upstream" = "$header"
check "the Python package's __version__ ($python) is the same" test "$python" = "$upstream"
for p in npuprofd npuprofctl npuprof-replay npuprof-shmopen train-loop; do
        out=$(timeout 10 "$build/$p" --version 2>&1)
        rc=$?
        check "$p --version: '$(head -n 1 <<<"$out")', exit 0" \
                test "$rc" -eq 0 -a "$(head -n 1 <<<"$out" | cut -d ' ' -f 1-2)" = "$p $upstream"
done
for page in "$here"/docs/*.[1358]; do
        check "$(basename "$page") is of npuprof $upstream" grep -q "^\.TH .*\"npuprof $upstream\"" "$page"
done

# --- --help opens with an example ---------------------------------------------------------
# The first heading after the usage lines is the example, and it comes before any option.
for p in npuprofd npuprofctl npuprof-replay npuprof-shmopen train-loop; do
        out=$(timeout 10 "$build/$p" --help 2>&1)
        rc=$?
        first=$(awk 'NR > 1 && /^[A-Z][A-Za-z ]*:$/ { print; exit }' <<<"$out")
        example=$(grep -n -m 1 '^Examples\?:$' <<<"$out" | cut -d : -f 1)
        option=$(grep -n -m 1 -E '^ +--[a-z]|^(Commands|Options):' <<<"$out" | cut -d : -f 1)
        check "$p --help: exit 0, its first heading the example ($first, line ${example:-none}), before the options (line ${option:-none})" \
                test "$rc" -eq 0 -a "${first#Example}" != "$first" -a "${example:-99}" -le 6 \
                -a "${example:-99}" -lt "${option:-0}"
        lines=$(awk 'f && /^$/ { exit } f { n++ } /^Examples?:$/ { f = 1 } END { print n + 0 }' <<<"$out")
        check "$p --help: the example is short ($lines lines)" test "$lines" -ge 2 -a "$lines" -le 6
done
help=$("$npuprofctl" --help)
for e in "npuprofctl status" "npuprofctl start --at 1000 --steps 5" "npuprofctl fleet"; do
        check "npuprofctl --help shows '$e'" grep -q "^  $e  " <<<"$help"
done
# The example does what it says: a window of steps 1000 to 1004.
echo '{"start_step": 0}' >"$tmp/example.json"
expect "npuprofctl start --at 1000 --steps 5, as the example has it, is accepted" 0 "" \
        "$npuprofctl" start --at 1000 --steps 5 --config "$tmp/example.json"
expect "... and opens steps 1000 to 1004" 0 "from step 1000 to step 1004 (5 steps)" \
        "$npuprofctl" validate "$tmp/example.json"

# --- the man pages ------------------------------------------------------------------------
if command -v man >/dev/null; then
        for page in "$here"/docs/*.[1358]; do
                name=$(basename "$page")
                warnings=$(MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -E UTF-8 -l -Tutf8 -Z "$page" 2>&1 >/dev/null)
                check "$name renders without a groff warning" test -z "$warnings"
                [ -n "$warnings" ] && echo "$warnings" | head -n 5 | sed 's/^/     | /'
                at=$(MANWIDTH=80 man -l "$page" 2>/dev/null | col -b | grep -n -m 1 '^EXAMPLES\?$' | cut -d : -f 1)
                check "$name: an EXAMPLE on its first screen (line ${at:-none} of 40)" test "${at:-99}" -le 40
        done
else
        skip "the man pages: man is not installed"
fi
for page in npuprofd.8 npuprofctl.1 npuprof-replay.1 npuprof-shmopen.8; do
        check "$page documents --version under OPTIONS" \
                sh -c "sed -n '/^\.SH OPTIONS/,/^\.SH /p' '$here/docs/$page' | grep -q 'version'"
done

# --- npuprofctl: typos and misplaced options ----------------------------------------------
expect "npuprofctl: a command misspelt names the one meant" 2 \
        "npuprofctl: unknown command 'stauts'; did you mean 'status'? (see npuprofctl --help)" "$npuprofctl" stauts
expect "npuprofctl: a command begun names the one it begins" 2 "did you mean 'windows'?" "$npuprofctl" win
lacks "npuprofctl: a word near no command names none" "did you mean" "$npuprofctl" frobnicate
expect "npuprofctl: an unknown option of a command points to its --help" 2 "see npuprofctl ranks --help" \
        "$npuprofctl" ranks --bogus
expect "npuprofctl: --socket after the command is said to go before it" 2 \
        "npuprofctl: --socket PATH goes before the command: npuprofctl --socket PATH status ..." \
        "$npuprofctl" status --socket "$tmp/x.sock"
expect "npuprofctl: so is --shm-name" 2 "--shm-name NAME goes before the command" "$npuprofctl" top --shm-name x

# --- npuprofctl: no daemon ----------------------------------------------------------------
absent=$tmp/absent.sock
expect "npuprofctl: no socket: exit 3, start the daemon or name its socket" 3 \
        "cannot connect to $absent: No such file or directory; is npuprofd running? Start it (systemctl start npuprofd.socket), or name the socket it listens on with --socket PATH or NPUPROF_SOCKET" \
        "$npuprofctl" --socket "$absent" ranks
expect "npuprofctl status: no socket: the same on the line after" 3 \
        "          is npuprofd running? Start it (systemctl start npuprofd.socket)" \
        "$npuprofctl" --socket "$absent" --shm-name "npftest-help-$$-none" status
expect "npuprofctl status: no segment either: start npuprofd or name the segment" 3 \
        "no npuprofd has made it on this node: start npuprofd (systemctl start npuprofd.socket), or name the segment it serves with --shm-name NAME or NPUPROF_SHM" \
        "$npuprofctl" --socket "$absent" --shm-name "npftest-help-$$-none" status
expect "npuprofctl start: no daemon and no --config: both fixes" 3 \
        "(give --config PATH): cannot connect to $absent: No such file or directory; is npuprofd running?" \
        "$npuprofctl" --socket "$absent" start --at 10 --steps 2
expect "npuprofctl fleet: no daemon and no --fleet-dir: the same" 3 "; is npuprofd running? Start it" \
        "$npuprofctl" --socket "$absent" fleet
# A socket file that nobody listens on, as a daemon killed leaves it.
python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.close()' "$tmp/stale.sock"
expect "npuprofctl: a socket nobody listens on: start the daemon" 3 \
        "Connection refused; no npuprofd listens there: start it (systemctl start npuprofd.socket)" \
        "$npuprofctl" --socket "$tmp/stale.sock" windows

# --- the daemon ---------------------------------------------------------------------------
d=$tmp/d
mkdir -p "$d/out"
chmod 755 "$tmp" "$d"
echo '{"start_step": 0}' >"$d/profiler_config.json"
chmod 644 "$d/profiler_config.json"
# daemon NAME SHM SOCKET [ARGS...]: a daemon in the background with ARGS, its log in $d/NAME.log,
# as user nobody when who=("${nobody[@]}"); sets dpid.
who=()
daemon() {
        local name=$1 shm=$2 sock=$3
        shift 3
        "${who[@]}" "$npuprofd" --config "$d/profiler_config.json" --shm-name "$shm" --socket "$sock" --output-root "$d/out" \
                --no-kineto --analyze-jobs 0 --log stderr "$@" 2>"$d/$name.log" &
        dpid=$!
        all_pids+=("$dpid")
}
answers() { timeout 5 "$npuprofctl" --socket "$1" status >/dev/null 2>&1; }
# first NAME WANT-EXIT TEXT ARGS...: a daemon that must not start: exit WANT-EXIT, TEXT said.
first() {
        local name=$1 want=$2 text=$3
        shift 3
        expect "$name" "$want" "$text" "$npuprofd" --no-kineto --analyze-jobs 0 --log stderr "$@"
}

first "npuprofd: an unknown option points to --help" 2 "see npuprofd --help" --bogus
first "npuprofd: no --config: an example of one" 2 \
        "npuprofd: --config PATH is required: the profiler_config.json to watch, as in npuprofd --config /etc/npuprof/profiler_config.json" \
        --socket "$d/x.sock"
first "npuprofd: the file's directory is missing: create it, or give the right path" 1 \
        "npuprofd: --config $d/nodir/profiler_config.json: the directory $d/nodir does not exist: create it (mkdir -p $d/nodir) and put the file there, or give --config the file's right path" \
        --config "$d/nodir/profiler_config.json" --shm-name "npftest-help-$$-a" --socket "$d/a.sock"
: >"$d/afile"
first "npuprofd: the file's directory is a file" 1 "$d/afile is not a directory: give --config the file's right path" \
        --config "$d/afile/profiler_config.json" --shm-name "npftest-help-$$-a" --socket "$d/a.sock"
check "npuprofd: ... and it left no segment" test ! -e "/dev/shm/npftest-help-$$-a.ctl"

# A socket that a live daemon answers on; a segment that a live daemon serves.
daemon one "npftest-help-$$-1" "$d/one.sock"
one=$dpid
if wait_for answers "$d/one.sock"; then
        ok "npuprofd: the first daemon answers"
        first "npuprofd: the socket is in use: stop that daemon, or another --socket" 1 \
                "control socket: another daemon answers on $d/one.sock: stop it first (systemctl stop npuprofd.socket npuprofd.service), or give this one another --socket PATH" \
                --config "$d/profiler_config.json" --shm-name "npftest-help-$$-2" --socket "$d/one.sock" \
                --output-root "$d/out"
        first "npuprofd: the segment is served: stop that daemon, or another --shm-name" 1 \
                "cannot open segment npftest-help-$$-1: segment /npftest-help-$$-1.ctl is already served by another daemon (pid $one): stop that one first, or give this one another segment name (npuprofd --shm-name)" \
                --config "$d/profiler_config.json" --shm-name "npftest-help-$$-1" --socket "$d/two.sock" \
                --output-root "$d/out"
else
        fail "npuprofd: the first daemon answers" "$(cat "$d/one.log")"
fi
kill -TERM "$one"
wait "$one" 2>/dev/null
first "npuprofd: the socket path is a file: remove it, or another --socket" 1 \
        "control socket: $d/afile exists and is not a socket: remove it, or give --socket another path" \
        --config "$d/profiler_config.json" --shm-name "npftest-help-$$-3" --socket "$d/afile" --output-root "$d/out"
first "npuprofd: the socket's directory is missing: create it, or another --socket" 1 \
        "control socket: cannot bind $d/nodir/x.sock: the directory $d/nodir does not exist: create it, or give --socket a path in another" \
        --config "$d/profiler_config.json" --shm-name "npftest-help-$$-3" --socket "$d/nodir/x.sock" \
        --output-root "$d/out"

# An output root below a file: said at start, and the daemon goes on.
daemon four "npftest-help-$$-4" "$d/four.sock" --output-root "$d/afile/out"
if wait_for answers "$d/four.sock"; then ok "npuprofd: an output root below a file does not stop the start"
else fail "npuprofd: an output root below a file does not stop the start" "$(cat "$d/four.log")"; fi
check "npuprofd: ... and it says so, with what to do" \
        grep -qF "npuprofd: warning: --output-root $d/afile/out: $d/afile is not a directory, so no window can be written: give --output-root a directory" "$d/four.log"
kill -TERM "$dpid" 2>/dev/null
wait "$dpid" 2>/dev/null

# --- npuprof-replay -----------------------------------------------------------------------
mkdir -p "$tmp/r/empty"
echo hello >"$tmp/r/junk.txt"
expect "npuprof-replay: a path that is not there: what to give" 1 \
        "npuprof-replay: $tmp/r/run7: No such file or directory: give a window directory (npuprofctl windows lists them), a memory snapshot or a trace" \
        "$replay" -q "$tmp/r/run7"
expect "npuprof-replay: a command misspelt names the one meant" 1 \
        "npuprof-replay: clustr: No such file or directory; did you mean 'npuprof-replay cluster'?" \
        sh -c 'cd "$1" && exec "$2" -q clustr' sh "$tmp/r" "$replay"
expect "npuprof-replay: ... and with its directories too" 2 \
        "unknown command 'clustr'; did you mean 'npuprof-replay cluster'?" \
        sh -c 'cd "$1" && exec "$2" -q clustr a b' sh "$tmp/r" "$replay"
expect "npuprof-replay: two paths: one at a time, or cluster" 2 \
        "one PATH at a time; several window directories go to npuprof-replay cluster DIR..." \
        "$replay" -q "$tmp/r/empty" "$tmp/r/junk.txt"
expect "npuprof-replay: a file of unknown kind: what to give" 1 \
        "junk.txt: neither a memory snapshot (a pickle, or JSON with segments or device_traces) nor a Chrome trace (JSON with traceEvents): give a snapshot of torch.cuda.memory._dump_snapshot()" \
        "$replay" -q -o "$tmp/r/o" "$tmp/r/junk.txt"
expect "npuprof-replay: a directory with nothing to analyse: what to give" 1 \
        "no memory snapshot, no trace and no framework's profiler output in this directory: give a window directory (rank<R>_start<S>_stop<E>; npuprofctl windows lists them) or a file in one" \
        "$replay" -q "$tmp/r/empty"
expect "npuprof-replay: an unknown option points to --help, in a line" 2 "see npuprof-replay --help" "$replay" --bogus
lacks "npuprof-replay: ... without the whole usage text" "Exit status:" "$replay" --bogus
expect "npuprof-replay cluster: getopt names the command" 2 "npuprof-replay cluster: unrecognized option '--bogus'" \
        "$replay" cluster --bogus

# --- the opener and train-loop ------------------------------------------------------------
expect "npuprof-shmopen by hand: how it is started" 2 "not by hand: systemctl enable --now npuprof-shmopen.socket" \
        "$shmopen"
expect "npuprof-shmopen: an unknown option points to --help" 2 "see npuprof-shmopen --help" "$shmopen" --bogus
expect "train-loop: an unknown option points to --help" 2 "see train-loop --help" "$trainloop" --bogus

# --- another user's socket, segment and directories (root) ----------------------------------
if ! $root; then
        skip "another user's socket, segment and directories: not root, or setpriv is missing"
else
        mkdir -p "$d/open"
        chmod 1777 "$d/open"
        daemon root "npftest-help-$$-5" "$d/open/root.sock"
        rootd=$dpid
        group=$(getent group 1 | cut -d : -f 1)
        daemon group "npftest-help-$$-6" "$d/open/group.sock" --socket-group "$group"
        groupd=$dpid
        if wait_for answers "$d/open/root.sock" && wait_for answers "$d/open/group.sock"; then
                expect "npuprofctl: root's socket, as nobody: run as root, or --socket-group" 3 \
                        "Permission denied; only root may connect: run as root (sudo), or start npuprofd with --socket-group GROUP, a group of yours" \
                        "${nobody[@]}" "$npuprofctl" --socket "$d/open/root.sock" ranks
                expect "npuprofctl: a group's socket, as nobody: the group named, and how to join it" 3 \
                        "Permission denied; only root and the socket's group $group may connect: run as root (sudo), or join the group (sudo usermod -aG $group \$USER, then log in again)" \
                        "${nobody[@]}" "$npuprofctl" --socket "$d/open/group.sock" ranks
        else
                fail "npuprofctl as nobody: the daemons answer" "$(cat "$d/root.log" "$d/group.log")"
        fi
        mkdir -p "$d/closed"
        chmod 700 "$d/closed"
        expect "npuprofctl: a socket in a directory closed to this user" 3 \
                "a directory on the way to the socket is closed to this user: run as root (sudo)" \
                "${nobody[@]}" "$npuprofctl" --socket "$d/closed/x.sock" windows
        kill -TERM "$groupd"
        wait "$groupd" 2>/dev/null

        # root's segment, left by a daemon killed, is not nobody's to serve; nor nobody's root's.
        kill -KILL "$rootd"
        wait "$rootd" 2>/dev/null
        s5=npftest-help-$$-5
        check "npuprofd killed: its segment stays" test -e "/dev/shm/$s5.ctl"
        expect "npuprofd as nobody on root's segment: whose it is, and what to do" 1 \
                "cannot open segment $s5: /$s5.ctl belongs to another user (uid 0): give this daemon its own segment (--shm-name NAME), run it as that user, or, if no job uses this one: rm /dev/shm/$s5.ctl /dev/shm/$s5.ranks" \
                "${nobody[@]}" "$npuprofd" --config "$d/profiler_config.json" --shm-name "$s5" --socket "$d/open/five.sock" \
                --output-root "$d/out" --no-kineto --analyze-jobs 0 --log stderr
        chown 65534 "/dev/shm/$s5.ctl" "/dev/shm/$s5.ranks"
        expect "npuprofd as root on nobody's segment: the same, uid 65534" 1 \
                "/$s5.ctl belongs to another user (uid 65534): give this daemon its own segment (--shm-name NAME), run it as that user" \
                "$npuprofd" --config "$d/profiler_config.json" --shm-name "$s5" --socket "$d/open/five.sock" \
                --output-root "$d/out" --no-kineto --analyze-jobs 0 --log stderr
        rm -f "/dev/shm/$s5.ctl" "/dev/shm/$s5.ranks"

        # A directory this user may not read, or write.
        cp "$d/profiler_config.json" "$d/closed/"
        expect "npuprofd as nobody: the file's directory unreadable: what to do" 1 \
                "npuprofd: --config $d/closed/profiler_config.json: this user (uid 65534) may not read the directory $d/closed, which npuprofd watches" \
                "${nobody[@]}" "$npuprofd" --config "$d/closed/profiler_config.json" --shm-name "npftest-help-$$-7" \
                --socket "$d/open/seven.sock" --output-root "$d/out" --no-kineto --analyze-jobs 0 --log stderr
        mkdir -p "$d/ro"
        chmod 755 "$d/ro"
        who=("${nobody[@]}")
        daemon eight "npftest-help-$$-8" "$d/open/eight.sock" --output-root "$d/ro/out"
        who=()
        if wait_for answers "$d/open/eight.sock"; then ok "npuprofd as nobody: an output root it may not create does not stop the start"
        else fail "npuprofd as nobody: an output root it may not create does not stop the start" "$(cat "$d/eight.log")"; fi
        check "npuprofd as nobody: ... and it says so, with what to do" \
                grep -qF "npuprofd: warning: --output-root $d/ro/out does not exist, and this user (uid 65534) may not create it in $d/ro, as each rank does for its own user: create it for every user (install -d -m 1777 $d/ro/out), or give --output-root a directory the ranks may write" \
                "$d/eight.log"
        kill -TERM "$dpid"
        wait "$dpid" 2>/dev/null

        cp "$tmp/r/junk.txt" "$d/closed/"
        expect "npuprof-replay as nobody: an input it may not read: who may" 1 \
                "npuprof-replay: $d/closed/junk.txt: Permission denied: run as a user who may read it: its owner (the job's user) or root" \
                "${nobody[@]}" "$replay" -q -o "$d/open/r" "$d/closed/junk.txt"
fi

echo "help: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
