#!/usr/bin/env python3
"""npuprofd and systemd: the sd_notify messages and socket activation, without systemd.

    tests/test-notify.py BUILD_DIR

The test owns a NOTIFY_SOCKET (an AF_UNIX datagram socket, as systemd's manager does) and
starts the real npuprofd with NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID. It checks
READY=1 (once the segment exists), STATUS= (one at start, one per change, never the same
twice in a row), WATCHDOG=1 from the loop, RELOADING=1 with MONOTONIC_USEC= then READY=1
around a SIGHUP, and STOPPING=1 on SIGTERM. Then it hands the daemon a listening socket the
way systemd does (systemd-socket-activate, and LISTEN_FDS/LISTEN_PID by hand) and talks to
it with the real npuprofctl. Waits are bounded polls; every daemon started is killed and
every segment unlinked at the end.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import npftest
from npftest import Notify, check, fail, wait_for

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
NPUPROFD = os.path.join(BUILD, "npuprofd")
NPUPROFCTL = os.path.join(BUILD, "npuprofctl")
DRIVER = os.path.join(BUILD, "tests", "rank-driver")
WAIT = npftest.WAIT = 5.0      # the longest any condition is waited for, in seconds

procs = []      # every process started, killed at the end
shm_names = []  # every segment name used, unlinked at the end
tmp = tempfile.mkdtemp(prefix="npftest-n.")


def write_config(path, start, steps):
    tmp_path = path + ".tmp~"
    with open(tmp_path, "w") as f:
        f.write('{\n  "start_step": %d,\n  "steps": %d\n}\n' % (start, steps))
    os.rename(tmp_path, path)


# Run as the daemon's first image: put the passed socket at fd 3 and name this pid (which
# the daemon keeps, exec does not change it) in WATCHDOG_PID and LISTEN_PID, as systemd does.
SHIM = """
import os, sys
fd, watchdog, listen_pid, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
if watchdog == "self":
    os.environ["WATCHDOG_PID"] = str(os.getpid())
if fd >= 0:
    if fd != 3:
        os.dup2(fd, 3)
        os.close(fd)
    os.set_inheritable(3, True)
    os.environ["LISTEN_FDS"] = "1"
    os.environ["LISTEN_PID"] = str(os.getpid()) if listen_pid == "self" else listen_pid
os.execv(argv[0], argv)
"""


def start_daemon(args, env_extra, log, watchdog_pid_self=True, listen_fd=None, listen_pid_self=True):
    """Start npuprofd with a clean systemd environment plus @env_extra; the daemon's pid is
    the Popen's pid."""
    env = dict(os.environ)
    for k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES",
              "JOURNAL_STREAM", "NPUPROF_SHM", "NPUPROF_SOCKET"):
        env.pop(k, None)
    env.update(env_extra)
    fd = -1 if listen_fd is None else listen_fd
    p = subprocess.Popen([sys.executable, "-c", SHIM, str(fd), "self" if watchdog_pid_self else "-",
                          "self" if listen_pid_self else "1", NPUPROFD] + args, env=env,
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                         pass_fds=() if listen_fd is None else (listen_fd,))
    procs.append(p)
    return p


def ctl(sock, shm, *args):
    r = subprocess.run([NPUPROFCTL, "--socket", sock, "--shm-name", shm] + list(args), capture_output=True,
                       text=True, timeout=15)
    return r.returncode, r.stdout, r.stderr


def status_json(sock, shm):
    rc, out, err = ctl(sock, shm, "status", "--json")
    if rc != 0:
        return None
    try:
        return json.loads(out)
    except ValueError:
        return None


def stop(p):
    if p.poll() is None:
        p.kill()
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        pass


def log_tail(path, n=8):
    try:
        with open(path) as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


# --- sd_notify ----------------------------------------------------------------------------

def test_notify():
    d = os.path.join(tmp, "notify")
    os.makedirs(d)
    conf = os.path.join(d, "profiler_config.json")
    shm = "npftest-n-%d-1" % os.getpid()
    shm_names.append(shm)
    sock = os.path.join(d, "npuprofd.sock")
    logpath = os.path.join(d, "daemon.log")
    write_config(conf, 10, 2)
    n = Notify(os.path.join(d, "notify.sock"))
    # Note, on arrival, whether the segment exists when READY=1 comes.
    seg_at_ready = []
    n.hooks.append(lambda m: seg_at_ready.append(os.path.exists("/dev/shm/%s.ctl" % shm))
                   if m[2].get("READY") == "1" and not seg_at_ready else None)
    log = open(logpath, "w")
    p = start_daemon(["--config", conf, "--shm-name", shm, "--socket", sock, "--poll-interval", "50", "--log",
                      "stderr"], {"NOTIFY_SOCKET": n.path, "WATCHDOG_USEC": "200000"}, log)
    try:
        ready = n.wait("READY", "1")
        if not check("notify: READY=1", ready, log_tail(logpath)):
            return
        check("notify: the segment exists when READY=1 comes", seg_at_ready == [True], seg_at_ready)
        # STATUS= may say "not read yet" first; the one in force at READY=1 tells the truth.
        at_ready = [m[2]["STATUS"] for m in n.snapshot()[:n.index_of(ready)] if "STATUS" in m[2]]
        check("notify: a STATUS= at start, before READY=1", at_ready, n.snapshot()[:5])
        check("notify: the STATUS= at READY=1 says generation 1, valid, no ranks",
              at_ready and re.search(r"generation 1, config valid, 0 ranks attached, 0 windows open", at_ready[-1]),
              at_ready)
        # The watchdog: WATCHDOG_USEC=200000 means a WATCHDOG=1 every 100 ms from the loop.
        t0 = time.monotonic()
        time.sleep(1.05)
        dogs = [m for m in n.snapshot() if m[2].get("WATCHDOG") == "1" and t0 <= m[0] <= t0 + 1.0]
        check("notify: WATCHDOG=1 at least 3 times within 1 s", len(dogs) >= 3, "%d in 1 s" % len(dogs))

        # Quiet: sweeps run every 50 ms, but an unchanged state sends no new STATUS=.
        mark = n.mark()
        time.sleep(0.5)
        check("notify: no STATUS= while nothing changes", n.statuses(mark) == [], n.statuses(mark))

        # A broken file changes the state: a new STATUS=.
        mark = n.mark()
        with open(conf + ".tmp~", "w") as f:
            f.write('{"start_step": "soon"}\n')
        os.rename(conf + ".tmp~", conf)
        m = wait_for(lambda: next((s for s in n.statuses(mark) if "INVALID" in s), None))
        check("notify: a broken file brings a new STATUS=, generation 1 in force",
              m is not None and "generation 1," in m, n.statuses(mark))

        # A rank attaching changes it too.
        if os.access(DRIVER, os.X_OK):
            mark = n.mark()
            drv = subprocess.Popen([DRIVER, "--shm", shm, "--rank", "0", "--step", "1", "--state", "collecting",
                                    "--window", "1-3", "--hold"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
            procs.append(drv)
            m = wait_for(lambda: next((s for s in n.statuses(mark) if "1 rank attached" in s), None))
            check("notify: a rank attaching brings a STATUS= with 1 rank and 1 window open",
                  m is not None and "1 window open" in m, n.statuses(mark))
            drv.stdin.close()     # the driver releases its slot when its stdin closes
            drv.wait(5)
            m = wait_for(lambda: next((s for s in n.statuses(mark) if "0 ranks attached" in s), None))
            check("notify: the rank leaving brings a STATUS= with 0 ranks", m is not None, n.statuses(mark))

        # A fix: back to valid, generation 2.
        mark = n.mark()
        write_config(conf, 20, 2)
        m = wait_for(lambda: next((s for s in n.statuses(mark) if "generation 2, config valid" in s), None))
        check("notify: the fix brings STATUS= with generation 2, valid", m is not None, n.statuses(mark))

        # SIGHUP: RELOADING=1 with MONOTONIC_USEC=, then READY=1.
        mark = n.mark()
        before = time.monotonic()
        p.send_signal(signal.SIGHUP)
        rl = n.wait("RELOADING", "1", since=mark)
        if check("notify: SIGHUP brings RELOADING=1", rl is not None, log_tail(logpath)):
            usec = rl[2].get("MONOTONIC_USEC", "")
            check("notify: RELOADING=1 comes with MONOTONIC_USEC= of CLOCK_MONOTONIC",
                  usec.isdigit() and before * 1e6 - 1e6 <= int(usec) <= rl[0] * 1e6 + 1e6,
                  "MONOTONIC_USEC=%r, sent between %d and %d" % (usec, before * 1e6, rl[0] * 1e6))
            ready2 = n.wait("READY", "1", since=n.index_of(rl) + 1)
            check("notify: READY=1 after the reload", ready2 is not None, n.snapshot()[mark:])

        # Never the same STATUS= twice in a row, over the whole run.
        sts = n.statuses()
        repeats = [s for a, s in zip(sts, sts[1:]) if a == s]
        check("notify: no STATUS= repeated", not repeats and len(sts) >= 3, sts)

        # SIGTERM: STOPPING=1, and the daemon exits 0.
        mark = n.mark()
        p.send_signal(signal.SIGTERM)
        check("notify: SIGTERM brings STOPPING=1", n.wait("STOPPING", "1", since=mark) is not None,
              n.snapshot()[mark:])
        try:
            rc = p.wait(WAIT)
        except subprocess.TimeoutExpired:
            rc = None
        check("notify: the daemon exits 0 after SIGTERM", rc == 0, "exit %r" % rc)
    finally:
        stop(p)
        log.close()
        n.close()


def test_watchdog_other_pid():
    """WATCHDOG_PID naming another process: the watchdog is not ours, no WATCHDOG=1."""
    d = os.path.join(tmp, "wdpid")
    os.makedirs(d)
    conf = os.path.join(d, "profiler_config.json")
    shm = "npftest-n-%d-2" % os.getpid()
    shm_names.append(shm)
    write_config(conf, 10, 2)
    n = Notify(os.path.join(d, "notify.sock"))
    logpath = os.path.join(d, "daemon.log")
    log = open(logpath, "w")
    p = start_daemon(["--config", conf, "--shm-name", shm, "--socket", os.path.join(d, "sock"), "--log", "stderr"],
                     {"NOTIFY_SOCKET": n.path, "WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1"}, log,
                     watchdog_pid_self=False)
    try:
        ready = n.wait("READY", "1")
        check("notify: READY=1 with another process's watchdog", ready is not None, log_tail(logpath))
        time.sleep(0.5)
        check("notify: no WATCHDOG=1 when WATCHDOG_PID is another process", n.find("WATCHDOG") is None,
              [m[1] for m in n.snapshot()])
    finally:
        stop(p)
        log.close()
        n.close()


# --- socket activation --------------------------------------------------------------------

def activated_world(name):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    conf = os.path.join(d, "profiler_config.json")
    write_config(conf, 10, 2)
    return d, conf


def test_socket_activate_tool():
    """systemd-socket-activate listens, and execs the daemon on the first connection."""
    tool = shutil.which("systemd-socket-activate")
    if not tool:
        print("skip socket activation by systemd-socket-activate: not installed", flush=True)
        return
    d, conf = activated_world("activate")
    act = os.path.join(d, "activated.sock")
    own = os.path.join(d, "own.sock")
    first_ok = 0
    trials = 8
    for i in range(trials):
        shm = "npftest-n-%d-a%d" % (os.getpid(), i)
        shm_names.append(shm)
        logpath = os.path.join(d, "daemon-%d.log" % i)
        log = open(logpath, "w")
        p = subprocess.Popen([tool, "-l", act, NPUPROFD, "--config", conf, "--shm-name", shm, "--socket", own,
                              "--log", "stderr"], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             env={k: v for k, v in os.environ.items() if not k.startswith(("LISTEN_", "NOTIFY_"))})
        procs.append(p)
        try:
            if not wait_for(lambda: os.path.exists(act)):
                fail("activation: systemd-socket-activate made its socket", log_tail(logpath))
                return
            # The first npuprofctl status starts the daemon and is answered by it.
            o = status_json(act, shm)
            if o and o["config"]["generation"] == 1 and o["config"]["state"] == "valid":
                first_ok += 1
            if i > 0:
                continue
            if not check("activation: the first status starts the daemon and is answered", o is not None,
                         log_tail(logpath)):
                return
            check("activation: daemon.socket_activated is true", o["daemon"]["socket_activated"] is True, o["daemon"])
            check("activation: the daemon is the process systemd-socket-activate exec'd", o["daemon"]["pid"] == p.pid,
                  "%r != %r" % (o["daemon"]["pid"], p.pid))
            check("activation: the daemon did not bind its own --socket", not os.path.exists(own))
            o = wait_for(lambda: (lambda s: s if s and s["config"]["generation"] == 1 else None)(status_json(act, shm)))
            check("activation: the configuration is published", o is not None and o["config"]["valid"] is True, o)
            rc, out, err = ctl(act, shm, "reload")
            check("activation: reload works over the passed socket", rc == 0 and out.startswith("reloaded:"), out + err)
            p.send_signal(signal.SIGTERM)
            try:
                rc = p.wait(WAIT)
            except subprocess.TimeoutExpired:
                rc = None
            check("activation: the daemon exits 0 on SIGTERM", rc == 0, "exit %r" % rc)
            check("activation: the socket the daemon was given is left in place", os.path.exists(act))
        finally:
            stop(p)
            log.close()
            if os.path.exists(act):
                os.unlink(act)
    # The activating request is the first one the daemon ever sees: it must already be
    # answered with the configuration, not with "not read yet" (generation 0).
    check("activation: the activating status already shows the configuration (%d trials)" % trials,
          first_ok == trials, "%d of %d first replies had generation 1, valid" % (first_ok, trials))


def test_listen_fds():
    """LISTEN_FDS/LISTEN_PID by hand: a listening socket at fd 3, as systemd passes it."""
    d, conf = activated_world("listenfds")
    path = os.path.join(d, "passed.sock")
    own = os.path.join(d, "own.sock")
    shm = "npftest-n-%d-l" % os.getpid()
    shm_names.append(shm)
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind(path)
    lsock.listen(16)
    logpath = os.path.join(d, "daemon.log")
    log = open(logpath, "w")
    p = start_daemon(["--config", conf, "--shm-name", shm, "--socket", own, "--log", "stderr"], {}, log,
                     watchdog_pid_self=False, listen_fd=lsock.fileno())
    lsock.close()       # the daemon holds it now
    try:
        o = wait_for(lambda: (lambda s: s if s and s["config"]["generation"] == 1 else None)(status_json(path, shm)))
        if not check("listen-fds: the daemon answers on the passed socket", o is not None, log_tail(logpath)):
            return
        check("listen-fds: daemon.socket_activated is true", o["daemon"]["socket_activated"] is True, o["daemon"])
        check("listen-fds: the daemon did not bind its own --socket", not os.path.exists(own))
    finally:
        stop(p)
        log.close()

    # LISTEN_PID of another process: the fds are not for us; the daemon binds its own socket.
    shm = "npftest-n-%d-m" % os.getpid()
    shm_names.append(shm)
    os.unlink(path)
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind(path)
    lsock.listen(16)
    logpath = os.path.join(d, "daemon-other.log")
    log = open(logpath, "w")
    p = start_daemon(["--config", conf, "--shm-name", shm, "--socket", own, "--log", "stderr"], {}, log,
                     watchdog_pid_self=False, listen_fd=lsock.fileno(), listen_pid_self=False)
    lsock.close()
    try:
        o = wait_for(lambda: status_json(own, shm))
        check("listen-fds: with LISTEN_PID of another process the daemon binds --socket",
              o is not None and o["daemon"]["socket_activated"] is False, log_tail(logpath))
    finally:
        stop(p)
        log.close()


def main():
    # A test stopped from outside still cleans up (the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    signal.signal(signal.SIGHUP, lambda *_: sys.exit(130))
    for b in (NPUPROFD, NPUPROFCTL):
        if not os.access(b, os.X_OK):
            print("test-notify: %s is not built" % b, file=sys.stderr)
            return 2
    try:
        npftest.run_tests((test_notify, test_watchdog_other_pid, test_socket_activate_tool, test_listen_fds))
    finally:
        for p in procs:
            stop(p)
        npftest.unlink_segments(shm_names)
        shutil.rmtree(tmp, ignore_errors=True)
    return npftest.summary("notify")


if __name__ == "__main__":
    sys.exit(main())
