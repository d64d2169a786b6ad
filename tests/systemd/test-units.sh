#!/bin/bash
# The systemd units, checked by systemd-analyze and then run under a real systemd.
#
# Part (a): `systemd-analyze verify` on the units (ExecStart pointed at the build) and
# `systemd-analyze security --offline=true`, which must rate the service OK or better.
# Part (b): systemd runs as PID 1 of private namespaces (../shared/notes/real-systemd.md)
# with a unit path of our own, and the real systemctl shows that npuprofd.service reaches
# active with its STATUS= text, that reload reloads, that the watchdog restarts a daemon
# stopped with SIGSTOP, that npuprofd.socket starts the daemon on the first
# `npuprofctl status`, that with all the hardening on the segment is created in the
# host's /dev/shm where a process outside the unit can map it, and that unmodified
# MindSpore and torch_npu jobs of root, of another user and in containers, and libnpuprof
# ranks in containers, are driven by it (jobs-under-unit.py), npuprof-shmopen.socket
# handing the daemon the jobs' own objects.
#
# The units under test are the shipped ones with three lines changed: ExecStart= names
# the build's binary and a private config, EnvironmentFile= a private one (NPUPROFD_OPTS
# gives a private shm name), WatchdogSec=3s.  A drop-in adds BindReadOnlyPaths= for the
# private config directory, which PrivateTmp=yes would otherwise hide, and LimitCORE=0.
#
# NPUPROF_ROOT=DIR tests an installed tree's units, files and binaries instead (with
# NPUPROFD and NPUPROFCTL naming its binaries).
#
# Run as root.  Exit 0 when every check passed, 1 otherwise, 77 when it cannot run here.

set -u

top=$(cd "$(dirname "$0")/../.." && pwd)
units_src=$top/systemd
unit_dir=$units_src etc_dir=$units_src/etc
sysusers_conf=$units_src/sysusers.d/npuprof.conf tmpfiles_conf=$units_src/tmpfiles.d/npuprof.conf
# NPUPROF_ROOT may name an installed tree instead (tests/test-deb.sh: the package installed
# into a scratch root): its units, sysusers.d and tmpfiles.d files and /etc/npuprof.
if [ -n "${NPUPROF_ROOT:-}" ]; then
    root=$(readlink -f -- "$NPUPROF_ROOT")
    unit_dir=$root/lib/systemd/system
    [ -e "$unit_dir/npuprofd.service" ] || unit_dir=$root/usr/lib/systemd/system
    etc_dir=$root/etc/npuprof
    sysusers_conf=$root/usr/lib/sysusers.d/npuprof.conf tmpfiles_conf=$root/usr/lib/tmpfiles.d/npuprof.conf
fi
# NPUPROFD, NPUPROFCTL and SHMOPEN may name other binaries (an installed build, say).
npuprofd=${NPUPROFD:-$top/build/npuprofd}
npuprofctl=${NPUPROFCTL:-$top/build/npuprofctl}
shmopen=${SHMOPEN:-$(dirname "$npuprofd")/npuprof-shmopen}
train_loop=${TRAIN_LOOP:-$top/build/train-loop}
# systemd needs an absolute ExecStart=, and commands run inside the namespaces from "/".
npuprofd=$(readlink -f -- "$npuprofd")
npuprofctl=$(readlink -f -- "$npuprofctl")
shmopen=$(readlink -f -- "$shmopen")
systemd_bin=/lib/systemd/systemd
shm_name=npftest-sd-$$

skip() { echo "skip systemd: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "must run as root (it starts systemd in private namespaces)"
[ -x "$systemd_bin" ] || skip "no systemd at $systemd_bin"
for tool in systemd-analyze systemctl systemd-sysusers systemd-tmpfiles unshare nsenter setpriv timeout; do
    command -v "$tool" >/dev/null || skip "$tool is missing"
done

passed=0
failed=0
ok()   { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1${2:+: $2}"; failed=$((failed + 1)); }
# check NAME COMMAND...: one check, passed when COMMAND succeeds.
check() { local name=$1; shift; if "$@"; then ok "$name"; else fail "$name"; fi; }

tmp=$(mktemp -d /tmp/npftest-sd.XXXXXX) || exit 1
chmod 0755 "$tmp"
unshare_pid=
sd=

cleanup() {
    if [ -n "$sd" ] && [ -d "/proc/$sd" ]; then
        # A clean stop lets systemd remove the service's PrivateTmp= directories.
        timeout 20 nsenter -t "$sd" -m -p systemctl stop npuprofd.socket npuprofd.service \
            >/dev/null 2>&1
        kill -KILL "$sd" 2>/dev/null
    elif [ -n "$unshare_pid" ]; then
        # PID 1 never came up: unshare --kill-child takes it along.
        kill -KILL "$unshare_pid" 2>/dev/null
    fi
    [ -n "$unshare_pid" ] && wait "$unshare_pid" 2>/dev/null
    rm -f "/dev/shm/$shm_name.ctl" "/dev/shm/$shm_name.ranks"
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# wait_for SECONDS COMMAND...: poll COMMAND every 0.1 s until it succeeds or time is up.
wait_for() {
    local deadline=$((SECONDS + $1)); shift
    until "$@"; do
        [ "$SECONDS" -ge "$deadline" ] && return 1
        sleep 0.1
    done
}

# ---------------------------------------------------------------------------------------
# (a) systemd-analyze

[ -x "$npuprofd" ] || fail "npuprofd built" "$npuprofd is missing (run make)"

mkdir "$tmp/verify"
sed "s|^ExecStart=/usr/sbin/npuprofd|ExecStart=$npuprofd|" "$unit_dir/npuprofd.service" \
    > "$tmp/verify/npuprofd.service"
cp "$unit_dir/npuprofd.socket" "$unit_dir/npuprof-shmopen.socket" "$tmp/verify/"
sed "s|^ExecStart=/usr/sbin/npuprof-shmopen|ExecStart=$shmopen|" "$unit_dir/npuprof-shmopen@.service" \
    > "$tmp/verify/npuprof-shmopen@.service"
if [ -x "$npuprofd" ]; then
    out=$(systemd-analyze verify --man=no "$tmp/verify/npuprofd.service" \
          "$tmp/verify/npuprofd.socket" "$tmp/verify/npuprof-shmopen.socket" 2>&1)
    rc=$?
    if [ "$rc" = 0 ] && ! grep -q npuprof <<<"$out"; then
        ok "systemd-analyze verify npuprofd.service npuprofd.socket npuprof-shmopen.socket"
    else
        fail "systemd-analyze verify npuprofd.service npuprofd.socket npuprof-shmopen.socket" "exit $rc"
        sed 's/^/    /' <<<"$out"
    fi
fi

# rated UNIT MAX: systemd-analyze security's overall exposure of UNIT is MAX or lower.
rated() {
    local out line level
    out=$(systemd-analyze security --offline=true --no-pager "$unit_dir/$1" 2>&1)
    line=$(grep 'Overall exposure level' <<<"$out")
    level=$(sed -n 's/.*Overall exposure level for [^:]*: *\([0-9.]*\).*/\1/p' <<<"$line")
    echo "#   ${line#→ }"
    if awk -v l="${level:-99}" -v m="$2" 'BEGIN { exit !(l <= m) }'; then
        ok "systemd-analyze security rates $1 $level, at most $2"
    else
        fail "systemd-analyze security rates $1 at most $2" "got '${level:-nothing}'"
        sed 's/^/    /' <<<"$out"
    fi
}
# The daemon holds no privilege: 0.6 SAFE, below the 0.8 it had before the opener. The
# opener, the one privileged unit (CAP_DAC_OVERRIDE alone, a user of its own), 0.6 SAFE.
rated npuprofd.service 0.6
rated npuprof-shmopen@.service 0.6
check "npuprof-shmopen@.service bounds its capabilities to CAP_DAC_OVERRIDE alone" \
    grep -qx 'CapabilityBoundingSet=CAP_DAC_OVERRIDE' "$unit_dir/npuprof-shmopen@.service"

if [ -x "$npuprofctl" ]; then
    check "etc/profiler_config.json is valid" \
        "$npuprofctl" validate "$etc_dir/profiler_config.json" >/dev/null
fi

if [ ! -x "$npuprofd" ] || [ ! -x "$npuprofctl" ]; then
    echo "#   the build has no npuprofd or npuprofctl: the checks under systemd are not run"
    echo "systemd: $passed passed, $failed failed"
    exit 1
fi

# ---------------------------------------------------------------------------------------
# (b) under a real systemd

getent passwd npuprof >/dev/null || systemd-sysusers "$sysusers_conf"
user_exists() { getent passwd npuprof >/dev/null; }
check "user npuprof exists" user_exists

units=$tmp/units
conf=$tmp/etc
mkdir "$units" "$units/npuprofd.service.d" "$conf"

# Stubs for the targets that services pull in by default; nothing of the machine runs.
for t in sysinit basic sockets paths timers slices local-fs local-fs-pre remote-fs \
         multi-user shutdown umount swap; do
    printf '[Unit]\nDescription=test stub for %s.target\n' "$t" > "$units/$t.target"
done
# journald, so that `journalctl -u` has something to show.
wants=
for u in systemd-journald.service systemd-journald.socket systemd-journald-dev-log.socket; do
    [ -f "/lib/systemd/system/$u" ] && cp "/lib/systemd/system/$u" "$units/" && wants="$wants $u"
done
printf '[Unit]\nDescription=npuprof test target\nWants=%s\n' "$wants" > "$units/npf-test.target"

cp "$etc_dir/profiler_config.json" "$conf/"
printf 'NPUPROFD_OPTS="--shm-name %s --output-root /var/lib/npuprof/output"\n' "$shm_name" \
    > "$conf/npuprofd.conf"
# The unit runs as npuprof with PrivateTmp=yes: a checkout under /tmp is hidden from it, one
# under a 0700 home is closed to it. The binaries go where the unit is given a view anyway.
cp "$npuprofd" "$npuprofctl" "$shmopen" "$conf/"
npuprofd=$conf/npuprofd npuprofctl=$conf/npuprofctl shmopen=$conf/npuprof-shmopen
chmod -R a+rX "$conf"

sed -e "s|^ExecStart=/usr/sbin/npuprofd --config /etc/npuprof/profiler_config.json |ExecStart=$npuprofd --config $conf/profiler_config.json |" \
    -e "s|^EnvironmentFile=.*|EnvironmentFile=$conf/npuprofd.conf|" \
    -e "s|^WatchdogSec=.*|WatchdogSec=3s|" \
    "$unit_dir/npuprofd.service" > "$units/npuprofd.service"
cp "$unit_dir/npuprofd.socket" "$unit_dir/npuprof-shmopen.socket" "$units/"
sed "s|^ExecStart=/usr/sbin/npuprof-shmopen|ExecStart=$shmopen|" "$unit_dir/npuprof-shmopen@.service" \
    > "$units/npuprof-shmopen@.service"
# LimitCORE=0: the watchdog's SIGABRT must not leave a core dump of the test on the host.
printf '[Service]\nBindReadOnlyPaths=%s\nLimitCORE=0\n' "$conf" \
    > "$units/npuprofd.service.d/test.conf"
mkdir "$units/npuprof-shmopen@.service.d"
cp "$units/npuprofd.service.d/test.conf" "$units/npuprof-shmopen@.service.d/"

check "test opener unit = shipped unit but ExecStart" \
    test "$(diff "$unit_dir/npuprof-shmopen@.service" "$units/npuprof-shmopen@.service" | grep -c '^>')" = 1
# The test copy differs from the shipped unit in exactly those three lines.
changed=$(diff "$unit_dir/npuprofd.service" "$units/npuprofd.service" | grep -c '^>')
check "test unit = shipped unit but ExecStart, EnvironmentFile, WatchdogSec" \
    test "$changed" = 3
grep -q "^ExecStart=$npuprofd " "$units/npuprofd.service" || fail "ExecStart rewritten"

# PID 1 of the namespaces: private /run, /var/lib (StateDirectory) and journal, so that
# nothing of the machine's is touched; /dev/shm stays the host's.
cat > "$tmp/boot.sh" <<EOF
#!/bin/sh
set -e
mount -t tmpfs -o mode=0755 npftest-run /run
mount -t tmpfs -o mode=0755 npftest-varlib /var/lib
if [ -d /var/log/journal ]; then mount -t tmpfs -o mode=0755 npftest-journal /var/log/journal; fi
exec $systemd_bin --system --unit=npf-test.target --log-target=journal --show-status=no
EOF
chmod +x "$tmp/boot.sh"

SYSTEMD_UNIT_PATH=$units unshare --pid --fork --kill-child --mount --mount-proc --net --uts --ipc \
    "$tmp/boot.sh" > "$tmp/systemd.log" 2>&1 < /dev/null &
unshare_pid=$!

# The namespace's PID 1 is the only child of unshare; found by pid, never by name.
find_pid1() {
    sd=$(cat "/proc/$unshare_pid/task/$unshare_pid/children" 2>/dev/null | tr -d ' ')
    [ -n "$sd" ] && [ "$(cat "/proc/$sd/comm" 2>/dev/null)" = systemd ]
}
ns() { timeout -k 5 40 nsenter -t "$sd" -m -p "$@"; }
target_up() { [ "$(ns systemctl show -P ActiveState npf-test.target 2>/dev/null)" = active ]; }
if ! wait_for 20 find_pid1 || ! wait_for 30 target_up; then
    fail "systemd runs as PID 1 of private namespaces"
    sed 's/^/    /' "$tmp/systemd.log"
    echo "systemd: $passed passed, $failed failed"
    exit 1
fi
ok "systemd runs as PID 1 of private namespaces (pid $sd outside)"

ns systemd-tmpfiles --create "$tmpfiles_conf"
check "tmpfiles.d creates /var/lib/npuprof/output 1777" \
    test "$(ns stat -c '%a %U' /var/lib/npuprof/output)" = "1777 npuprof"

prop() { ns systemctl show -P "$1" "$2" 2>/dev/null; }
svc_running() {
    [ "$(prop ActiveState npuprofd.service)" = active ] &&
    [ "$(prop SubState npuprofd.service)" = running ]
}
# journal_mark: a cursor; journal_after CURSOR: every entry written since, as
# "IDENTIFIER[PID]: MESSAGE".  No matches here: journalctl 252 with a match and
# --after-cursor skips the first matching entry; callers grep instead.
journal_mark() { ns journalctl -n 0 --show-cursor 2>/dev/null | sed -n 's/^-- cursor: //p'; }
journal_after() {
    ns journalctl --no-pager -o short --no-hostname ${1:+--after-cursor "$1"} 2>/dev/null |
        sed 's/^[A-Z][a-z][a-z] [ 0-9][0-9] [0-9:]* //'
}

# --- 1. start, active, STATUS= ---------------------------------------------------------
t0=$(journal_mark)
ns systemctl start npuprofd.service
if wait_for 30 svc_running; then
    ok "npuprofd.service reaches active (running)"
else
    fail "npuprofd.service reaches active (running)" "$(prop ActiveState npuprofd.service)"
    ns systemctl status --no-pager npuprofd.service | sed 's/^/    /'
    journal_after "$t0" | tail -30 | sed 's/^/    /'
    echo "#   the other checks need a running daemon: not run"
    echo "systemd: $passed passed, $failed failed"
    exit 1
fi
status_set() { [ -n "$(prop StatusText npuprofd.service)" ]; }
wait_for 10 status_set
status_text=$(prop StatusText npuprofd.service)
echo "#   STATUS=$status_text"
if [ -n "$status_text" ] &&
   ns systemctl status --no-pager npuprofd.service | grep -qF "Status: \"$status_text\""; then
    ok "systemctl status shows the daemon's STATUS= text"
else
    fail "systemctl status shows the daemon's STATUS= text"
    ns systemctl status --no-pager npuprofd.service | sed 's/^/    /'
fi
check "the daemon runs as npuprof" \
    test "$(ns ps -o user= -p "$(prop MainPID npuprofd.service)")" = npuprof

# --- 2. segment in the host's /dev/shm, mappable from outside ------------------------------
ctl=/dev/shm/$shm_name.ctl
ranks=/dev/shm/$shm_name.ranks
check "segment $shm_name.ctl in the host's /dev/shm, mode 0644" \
    test "$(stat -c %a "$ctl" 2>/dev/null)" = 644
check "segment $shm_name.ranks in the host's /dev/shm, mode 0666" \
    test "$(stat -c %a "$ranks" 2>/dev/null)" = 666
map_ro() {
    setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c '
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
sys.exit(0 if len(m) > 0 and any(m[:64]) else 1)' "$1"
}
check "a process outside the unit (uid 65534) maps the control block read-only" map_ro "$ctl"
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups \
      "$npuprofctl" --shm-name "$shm_name" --socket "$tmp/no.sock" status 2>&1)
rc=$?
if [ "$rc" = 3 ] && grep -qi generation <<<"$out"; then
    ok "npuprofctl status outside the unit reads the segment (daemon unreachable: exit 3)"
else
    fail "npuprofctl status outside the unit reads the segment" "exit $rc"
    sed 's/^/    /' <<<"$out"
fi

# --- 3. reload ---------------------------------------------------------------------------
pid_before=$(prop MainPID npuprofd.service)
t0=$(journal_mark)
if ns systemctl reload npuprofd.service; then
    ok "systemctl reload npuprofd.service exits 0"
else
    fail "systemctl reload npuprofd.service exits 0"
fi
# The daemon's own words, not only the manager's "Reloading..." line.
reloaded() {
    svc_running && journal_after "$t0" | grep -qi "\[$pid_before\]: .*reload"
}
if wait_for 10 reloaded && [ "$(prop MainPID npuprofd.service)" = "$pid_before" ]; then
    ok "the daemon reloaded in place (journal shows the reload, same MainPID)"
else
    fail "the daemon reloaded in place" "MainPID $pid_before -> $(prop MainPID npuprofd.service)"
    journal_after "$t0" | sed 's/^/    /'
fi
journal_after "$t0" | grep -i reload | sed 's/^/#   /'
# Under systemd stderr is the journal (JOURNAL_STREAM), so the daemon logs through
# sd_journal_send with its own fields: the publication carries its generation and file.
published_fields() {
    ns journalctl --no-pager -o verbose SYSLOG_IDENTIFIER=npuprofd 2>/dev/null |
        awk '/MESSAGE=published generation/ { hit = 1 } hit && /^$/ { exit } hit' |
        grep -q "NPUPROF_GENERATION=1" &&
    ns journalctl --no-pager -o verbose SYSLOG_IDENTIFIER=npuprofd 2>/dev/null | grep -q "NPUPROF_CONFIG=/"
}
check "the journal has the daemon's structured fields (NPUPROF_GENERATION, NPUPROF_CONFIG)" wait_for 10 published_fields

# --- 4. watchdog -----------------------------------------------------------------------
generation() { prop StatusText npuprofd.service | sed -n 's/.*generation \([0-9]*\).*/\1/p'; }
gen_before=$(generation)
restarts_before=$(prop NRestarts npuprofd.service)
pid_before=$(prop MainPID npuprofd.service)
t0=$(journal_mark)
# Never "kill 0" or "kill -1": only a real main pid is stopped.
case $pid_before in
    ''|0|1|*[!0-9]*) fail "npuprofd.service has a main pid to stop" "MainPID '$pid_before'" ;;
    *) ns kill -STOP "$pid_before" ;;
esac
restarted() {
    local n p
    n=$(prop NRestarts npuprofd.service)
    p=$(prop MainPID npuprofd.service)
    [ "${n:-0}" -gt "${restarts_before:-0}" ] && [ "${p:-0}" != 0 ] &&
        [ "$p" != "$pid_before" ] && svc_running
}
if wait_for 30 restarted; then
    ok "a daemon stopped with SIGSTOP is restarted by the watchdog (NRestarts $restarts_before -> $(prop NRestarts npuprofd.service), MainPID $pid_before -> $(prop MainPID npuprofd.service))"
else
    fail "a daemon stopped with SIGSTOP is restarted by the watchdog"
    ns systemctl status --no-pager npuprofd.service | sed 's/^/    /'
fi
wait_for 10 status_set
check "the restarted daemon adopted the segment (generation ${gen_before:-?} -> $(generation))" \
    test -n "$gen_before" -a "$(generation)" = "$gen_before"
if journal_after "$t0" | grep -q 'npuprofd.service: Watchdog timeout'; then
    ok "the journal says why: watchdog timeout"
else
    fail "the journal says why: watchdog timeout"
    journal_after "$t0" | tail -20 | sed 's/^/    /'
fi

# --- 5. socket activation ------------------------------------------------------------------
sock=/run/npuprof/npuprofd.sock
ns systemctl stop npuprofd.service 2>/dev/null
ns systemctl start npuprofd.socket
svc_inactive() { [ "$(prop ActiveState npuprofd.service)" = inactive ]; }
sock_listening() {
    [ "$(prop ActiveState npuprofd.socket)" = active ] && ns test -S "$sock"
}
if wait_for 15 svc_inactive && wait_for 10 sock_listening; then
    ok "npuprofd.socket listens on $sock with npuprofd.service stopped"
else
    fail "npuprofd.socket listens on $sock with npuprofd.service stopped" \
        "service $(prop ActiveState npuprofd.service), socket $(prop ActiveState npuprofd.socket)"
fi
check "the socket is npuprof:npuprof 0660" \
    test "$(ns stat -c '%a %U %G' "$sock")" = "660 npuprof npuprof"
inode_before=$(ns stat -c %i "$sock")
out=$(ns "$npuprofctl" --socket "$sock" status 2>&1)
rc=$?
if [ "$rc" = 0 ]; then
    ok "the first npuprofctl status starts the daemon through the socket and is answered"
    head -4 <<<"$out" | sed 's/^/#   /'
else
    fail "the first npuprofctl status starts the daemon through the socket" "exit $rc"
    sed 's/^/    /' <<<"$out"
fi
check "npuprofd.service is active after socket activation" wait_for 10 svc_running
check "the daemon serves systemd's socket, not one of its own (same inode)" \
    test "$(ns stat -c %i "$sock")" = "$inode_before"
out=$(ns "$npuprofctl" --socket "$sock" status 2>&1)
check "a second npuprofctl status is answered" test $? = 0
head -4 <<<"$out" | sed 's/^/#   /'

# PrivateUsers=yes: root and npuprof keep their uids for SO_PEERCRED, other peers are
# seen as 65534, which may read but not reload.
out=$(ns "$npuprofctl" --socket "$sock" reload 2>&1)
rc=$?
check "npuprofctl reload as root is accepted through the sandbox" test "$rc" = 0
[ "$rc" = 0 ] || sed 's/^/    /' <<<"$out"
npuprof_gid=$(getent group npuprof | cut -d: -f3)
as_member() { ns setpriv --reuid=65534 --regid="$npuprof_gid" --clear-groups "$npuprofctl" --socket "$sock" "$@"; }
out=$(as_member status 2>&1)
rc=$?
check "npuprofctl status by another user of group npuprof is answered" test "$rc" = 0
[ "$rc" = 0 ] || sed 's/^/    /' <<<"$out"
out=$(as_member reload 2>&1)
rc=$?
check "npuprofctl reload by another user of group npuprof is refused (exit 1)" test "$rc" = 1
sed 's/^/#   /' <<<"$out"

# --- 5b. libkineto's endpoint: a PyTorch job's poll, as another user, answered and listed -----
# libkineto binds a socket of its own in the directory too (KINETO_IPC_SOCKET_DIR), so the
# daemon makes it writable by all and sticky; the datagram is the 40-byte header and "req".
check "libkineto's socket directory /run/npuprof/kineto: writable by all, sticky, the endpoint in it" \
    ns sh -c 'test "$(stat -c %a /run/npuprof/kineto)" = 1777 && test -S /run/npuprof/kineto/dynolog'
kineto_poll() {
    ns setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c '
import os, socket, struct, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
me = "/run/npuprof/kineto/dynoconfigclient-units-%d" % os.getpid()
s.bind(me)
os.chmod(me, 0o666)             # as libkineto does (Endpoint.h:98-103): the daemon may answer
p = struct.pack("<iiq", 2, 1, 0) + struct.pack("<i", os.getpid())
s.settimeout(5)
s.sendto(struct.pack("<Q32s", len(p), b"req") + p, "/run/npuprof/kineto/dynolog")
size, t = struct.unpack("<Q32s", s.recv(65536)[:40])
print(os.getpid())
time.sleep(2)
sys.exit(0 if t.rstrip(b"\0") == b"req" else 1)' >"$tmp/kineto.pid" &
    local poller=$!
    sleep 1
    local pid
    pid=$(cat "$tmp/kineto.pid")
    ns "$npuprofctl" --socket "$sock" status --json >"$tmp/kineto.json"
    wait "$poller" || return 1
    [ -n "$pid" ] && /usr/bin/python3 -c '
import json, sys
K = json.load(open(sys.argv[1]))["kineto"]
sys.exit(0 if any(c["pid"] == int(sys.argv[2]) and c["host_pid"] for c in K["clients"]) else 1)' "$tmp/kineto.json" "$pid"
}
check "a libkineto request of uid 65534 through the sandbox is answered, and the process listed" kineto_poll

# --- 6. unmodified jobs of any user, ranks in containers ------------------------------------
# The operator's options add --legacy (the units stay as shipped). The jobs run in this
# systemd's namespaces, /dev/shm the host's: MindSpore's and torch_npu's own code, as root,
# as nobody and in containers, and libnpuprof ranks in containers (jobs-under-unit.py).
printf 'NPUPROFD_OPTS="--shm-name %s --output-root /var/lib/npuprof/output --legacy torch_npu,mindspore-packed"\n' \
    "$shm_name" > "$conf/npuprofd.conf"
mkdir -m 0777 "$tmp/jobs"
timeout -k 5 300 nsenter -t "$sd" -m -p /usr/bin/python3 "$top/tests/systemd/jobs-under-unit.py" \
    "$conf/profiler_config.json" "$npuprofctl" "$train_loop" "$shm_name" "$tmp/jobs" > "$tmp/jobs.out" 2>&1
sed -n '/^ok \|^FAIL\|^     |\|^skip/p' "$tmp/jobs.out"
jobs_passed=$(sed -n 's/^jobs: \([0-9]*\) passed, [0-9]* failed$/\1/p' "$tmp/jobs.out")
jobs_failed=$(sed -n 's/^jobs: [0-9]* passed, \([0-9]*\) failed$/\1/p' "$tmp/jobs.out")
if [ -n "$jobs_passed" ]; then
    passed=$((passed + jobs_passed)) failed=$((failed + jobs_failed))
else
    fail "the jobs under the unit ran to their end" "$(tail -n 20 "$tmp/jobs.out")"
fi
journal_after "" | grep -i 'shmopen' | tail -n 30 | sed 's/^/#   /'

# --- 7. clean stop -------------------------------------------------------------------------
ns systemctl stop npuprofd.service 2>/dev/null
if wait_for 15 svc_inactive && [ "$(prop Result npuprofd.service)" = success ]; then
    ok "systemctl stop: npuprofd.service inactive, result success"
else
    fail "systemctl stop: npuprofd.service inactive, result success" \
        "$(prop ActiveState npuprofd.service), $(prop Result npuprofd.service)"
fi

echo "systemd: $passed passed, $failed failed"
[ "$failed" = 0 ]
