#!/usr/bin/env python3
"""npuprof under faults: the real npuprofd, npuprofctl and train-loop ranks, broken on purpose.

    tests/faults/test-faults.py BUILD_DIR [CASE...]

Cases (each a function, each on its own config directory, shm name and socket):
  daemon_kill     npuprofd SIGKILLed during a window: the ranks' windows open and close at
                  their steps; the restarted daemon adopts the segment and records them.
  daemon_stop     npuprofd SIGSTOPped past its watchdog: the ranks keep stepping (step time
                  before and during the stop printed); no WATCHDOG=1 while stopped.
  rank_kill       a rank SIGKILLed in its window: its slot reclaimed within two sweeps, the
                  window `lost`, its output kept, an `incomplete` manifest written by npuprofd.
  rank_kill_opening  a rank SIGKILLed while its backend opens the window (the ACL stand-in
                  holding aclprofInit): the window `lost`, its directory given the manifest.
  log_stuck       the daemon's stderr a pipe nobody reads: every request still answered, the
                  lines that did not fit counted and reported once the log is read again.
  enospc          the output file system full (a 256 KiB tmpfs in a private mount namespace):
                  the window `failed` naming ENOSPC, the loop runs to its end, nothing else lost.
  config_churn    the configuration directory and file broken in every way: the last good
                  configuration stays, the error is reported, no CPU spin, nothing of a
                  private file (/etc/shadow) shown; a good file is taken again after each.
  clock_jump      libfaketime moves the clock back and forward under the daemon and the ranks:
                  windows still at their steps, no live rank called stalled or lost.

Timings are printed ("figure: ..."), never asserted against a stopwatch; what is asserted are
states and counts, with bounded waits. Ends with "faults: N passed, N failed".
"""
import fcntl
import glob
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import npftest  # noqa: E402 - tests/, found once the path is set
from npftest import Notify, check, fail, figure, wait_for  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
NPUPROFD = os.path.join(BUILD, "npuprofd")
NPUPROFCTL = os.path.join(BUILD, "npuprofctl")
TRAIN = os.path.join(BUILD, "train-loop")
ACL_STUB = os.path.join(BUILD, "tests", "stub-acl", "libascendcl.so")
FAKETIME_LIBS = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                 "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
                 "/usr/lib/faketime/libfaketime.so.1")
WAIT = npftest.WAIT = 8.0      # the longest any state is waited for, in seconds

procs = []      # every process started, killed at the end
shm_names = []  # every segment used, unlinked at the end
tmp = tempfile.mkdtemp(prefix="npftest-faults.")


def cpu_seconds(pid):
    """utime + stime of @pid from /proc/PID/stat, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def inotify_inodes(pid):
    """The inodes that the inotify instances of @pid watch (from /proc/PID/fdinfo)."""
    found = set()
    for path in glob.glob("/proc/%d/fdinfo/*" % pid):
        try:
            with open(path) as f:
                found.update(int(m, 16) for m in re.findall(r"^inotify wd:\d+ ino:([0-9a-f]+)", f.read(), re.M))
        except OSError:
            pass
    return found


def alive(p):
    return p.poll() is None


class World:
    """One case's private daemon: config dir, output root, shm name, socket, log."""

    def __init__(self, name, config, poll_ms=100, extra=()):
        self.name = name
        self.dir = os.path.join(tmp, name)
        self.confdir = os.path.join(self.dir, "conf")
        self.conf = os.path.join(self.confdir, "profiler_config.json")
        self.root = os.path.join(self.dir, "out")
        self.shm = "npftest-faults-%d-%s" % (os.getpid(), name.replace("_", "-"))
        self.sock = os.path.join(self.dir, "npuprofd.sock")
        self.logpath = os.path.join(self.dir, "daemon.log")
        self.poll_ms = poll_ms
        self.extra = list(extra)
        self.daemon = None
        os.makedirs(self.confdir)
        os.makedirs(self.root)
        shm_names.append(self.shm)
        self.write(config)

    def write(self, obj):
        """Save the file the way editors do: a temporary renamed over it."""
        text = obj if isinstance(obj, str) else json.dumps(obj, indent=2) + "\n"
        with open(self.conf + ".tmp~", "w") as f:
            f.write(text)
        os.rename(self.conf + ".tmp~", self.conf)

    def start(self, env=None, prefix=(), stderr=None):
        """npuprofd on this world; returns once it answers with the file read once. Its log
        goes to self.logpath, or to the descriptor @stderr."""
        e = dict(os.environ)
        for k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "NPUPROF_SHM",
                  "NPUPROF_SOCKET"):
            e.pop(k, None)
        e.update(env or {})
        log = open(self.logpath, "a") if stderr is None else os.fdopen(os.dup(stderr), "w")
        self.daemon = subprocess.Popen(list(prefix) + [NPUPROFD, "--config", self.conf, "--shm-name", self.shm,
                                                       "--socket", self.sock, "--log", "stderr", "--output-root",
                                                       self.root, "--poll-interval", str(self.poll_ms),
                                                       "--analyze-jobs", "0"] + self.extra,
                                       env=e, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()
        procs.append(self.daemon)
        return wait_for(lambda: (self.status() or {}).get("config", {}).get("state") not in (None, "unknown"))

    def ctl(self, *args, timeout=15):
        r = subprocess.run([NPUPROFCTL, "--socket", self.sock, "--shm-name", self.shm] + list(args),
                           capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr

    def ctl_json(self, *args, timeout=15):
        rc, out, _ = self.ctl(*(list(args) + ["--json"]), timeout=timeout)
        if rc != 0:
            return None
        try:
            return json.loads(out)
        except ValueError:
            return None

    def status(self):
        return self.ctl_json("status")

    def segment_ranks(self):
        """The rank table read straight from the segment (`status` when no daemon answers)."""
        r = subprocess.run([NPUPROFCTL, "--socket", self.dir + "/nobody.sock", "--shm-name", self.shm, "status",
                            "--json"], capture_output=True, text=True, timeout=15)
        try:
            return json.loads(r.stdout).get("ranks") or []
        except ValueError:
            return []

    def generation(self):
        return ((self.status() or {}).get("config") or {}).get("generation")

    def windows(self):
        return (self.ctl_json("windows") or {}).get("windows") or []

    def log(self):
        try:
            with open(self.logpath) as f:
                return f.read()
        except OSError:
            return ""

    def tail(self, n=10):
        return "".join(self.log().splitlines(True)[-n:])

    def rank(self, r, steps, step_ms, prefix=(), env=None, backend="host"):
        p = subprocess.Popen(list(prefix) + [TRAIN, "--rank", str(r), "--steps", str(steps), "--step-ms",
                                             str(step_ms), "--shm-name", self.shm, "--backend", backend],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=env)
        procs.append(p)
        return p

    def rank_states(self, ranks=None):
        """{rank: state} of the attached ranks, through the daemon."""
        return {x["rank"]: x["state"] for x in (ranks if ranks is not None else
                                                (self.ctl_json("ranks") or {}).get("ranks") or [])}

    def close(self):
        if self.daemon and alive(self.daemon):
            self.daemon.send_signal(signal.SIGCONT)
            self.daemon.kill()
        if self.daemon:
            self.daemon.wait(10)


def finish(p, timeout=30):
    """Wait for a rank; its exit status and output."""
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        return None, out
    return p.returncode, out


def trace_steps(dirpath):
    """The ProfilerStep numbers in a window's trace.json, in order (the host backend's spans)."""
    try:
        with open(os.path.join(dirpath, "trace.json")) as f:
            text = f.read()
    except OSError:
        return None
    return [int(n) for n in re.findall(r'"name":"ProfilerStep#(-?\d+)"', text)]


def trace_spans(dirpath):
    """(step, ts_us, dur_us) of each step span of a window's trace."""
    with open(os.path.join(dirpath, "trace.json")) as f:
        text = f.read()
    return [(int(a), float(b), float(c)) for a, b, c in
            re.findall(r'"name":"ProfilerStep#(-?\d+)","ph":"X","cat":"step","ts":([0-9.]+),"dur":([0-9.]+)', text)]


def manifest(dirpath):
    try:
        with open(os.path.join(dirpath, "manifest.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def window_dir(w, sub, r, start, stop):
    return os.path.join(w.root, sub, "rank%d_start%d_stop%d" % (r, start, stop))


def outcomes_of(w, rank):
    return [x for x in w.windows() if x["rank"] == rank]


# --- 1. the daemon killed, the daemon stopped ------------------------------------------------

def test_daemon_kill():
    """SIGKILL during the window, restart while it is still open."""
    w = World("daemon_kill", {"start_step": 30, "steps": 40, "output_dir": "job"})
    ranks = []
    try:
        if not check("daemon kill: npuprofd starts", w.start(), w.tail()):
            return
        g0 = w.generation()
        ranks = [w.rank(r, 100, 25) for r in (0, 1)]
        both = wait_for(lambda: w.rank_states() == {0: "collecting", 1: "collecting"})
        if not check("daemon kill: both ranks collecting", both, w.rank_states()):
            return
        w.daemon.kill()
        w.daemon.wait(5)
        killed = time.monotonic()
        # No daemon: the ranks go on stepping in their windows, read from the segment alone.
        seg0 = {x["rank"]: x for x in w.segment_ranks()}
        time.sleep(0.25)
        seg1 = {x["rank"]: x for x in w.segment_ranks()}
        check("daemon kill: with no daemon, both ranks still collecting and stepping",
              all(r in seg0 and r in seg1 and seg1[r]["state"] == "collecting" and seg1[r]["step"] > seg0[r]["step"]
                  for r in (0, 1)), json.dumps([seg0, seg1])[:1500])
        pubs_before = w.log().count("published generation")
        check("daemon kill: the restarted npuprofd answers", w.start(), w.tail())
        wait_for(lambda: "adopted segment" in w.log())  # the log is written by a thread of the daemon's own
        figure("daemon kill: restarted %.2f s after the SIGKILL" % (time.monotonic() - killed))
        st = w.status() or {}
        check("daemon kill: the restarted daemon adopted the segment at the same generation, no republish",
              (st.get("shm") or {}).get("adopted") is True and w.generation() == g0 and
              w.log().count("published generation") == pubs_before and "adopted segment" in w.log(),
              "generation %s (was %s)\n%s" % (w.generation(), g0, w.tail()))
        results = [finish(p) for p in ranks]
        check("daemon kill: both ranks ran to their end (exit 0, 100 steps)",
              all(rc == 0 and "100 steps done" in out for rc, out in results), results)
        for r in (0, 1):
            d = window_dir(w, "job", r, 30, 69)
            m = manifest(d)
            check("daemon kill: rank %d's trace holds exactly steps 30..69, manifest complete" % r,
                  trace_steps(d) == list(range(30, 70)) and m and m["status"] == "complete",
                  "steps %s, manifest %s" % (trace_steps(d), m))
        done = wait_for(lambda: sorted((x["rank"], x["outcome"], x["start_step"], x["stop_step"])
                                       for x in w.windows()) == [(0, "done", 30, 69), (1, "done", 30, 69)])
        check("daemon kill: `npuprofctl windows` of the restarted daemon shows both windows done", done,
              json.dumps(w.windows())[:1500])
    finally:
        for p in ranks:
            p.kill()
        w.close()


def test_daemon_stop():
    """SIGSTOP for longer than the watchdog: ranks unaffected, the watchdog silent."""
    w = World("daemon_stop", {"start_step": 10, "steps": 140, "output_dir": "job"})
    n = Notify(os.path.join(w.dir, "notify.sock"))
    ranks = []
    watchdog_usec = 300000
    stop_s = 1.2
    try:
        if not check("daemon stop: npuprofd starts with a watchdog",
                     w.start({"NOTIFY_SOCKET": n.path, "WATCHDOG_USEC": str(watchdog_usec)}), w.tail()):
            return
        ranks = [w.rank(r, 170, 20) for r in (0, 1)]
        if not check("daemon stop: both ranks collecting",
                     wait_for(lambda: w.rank_states() == {0: "collecting", 1: "collecting"}), w.rank_states()):
            return
        time.sleep(0.5)
        w.daemon.send_signal(signal.SIGSTOP)
        t_stop = time.monotonic()
        # Every ping since the start counts: on a loaded machine half a second may pass without one.
        before = len(n.watchdogs(0, t_stop))
        time.sleep(stop_s)
        seg = w.segment_ranks()
        t_cont = time.monotonic()
        w.daemon.send_signal(signal.SIGCONT)
        # A datagram sent just before the stop may arrive a moment after it.
        during = n.watchdogs(t_stop + 0.05, t_cont)
        resumed = wait_for(lambda: n.watchdogs(t_cont))
        figure("daemon stop: WATCHDOG_USEC=%d; WATCHDOG=1 from the start to the stop: %d, during the %.1f s "
               "stop: %d, first after SIGCONT: %s" % (watchdog_usec, before, stop_s, len(during),
                                                      "%.0f ms" % ((resumed[0] - t_cont) * 1000) if resumed else "none"))
        check("daemon stop: WATCHDOG=1 came before the stop", before >= 1, before)
        check("daemon stop: no WATCHDOG=1 while stopped (%.1f s, watchdog %.1f s)" % (stop_s, watchdog_usec / 1e6),
              not during, during)
        check("daemon stop: WATCHDOG=1 again after SIGCONT", resumed, n.msgs[-5:])
        check("daemon stop: while stopped, both ranks were collecting in the segment",
              sorted((x["rank"], x["state"]) for x in seg) == [(0, "collecting"), (1, "collecting")], seg)
        results = [finish(p) for p in ranks]
        check("daemon stop: both ranks ran to their end (exit 0, 170 steps)",
              all(rc == 0 and "170 steps done" in out for rc, out in results), results)
        for r in (0, 1):
            d = window_dir(w, "job", r, 10, 149)
            spans = trace_spans(d) if os.path.exists(os.path.join(d, "trace.json")) else []
            # The host backend's ts is CLOCK_MONOTONIC in µs, as Python's time.monotonic().
            pre = [dur for _, ts, dur in spans if ts / 1e6 + dur / 1e6 < t_stop]
            mid = [dur for _, ts, dur in spans if t_stop <= ts / 1e6 and ts / 1e6 + dur / 1e6 <= t_cont]
            figure("daemon stop: rank %d step time before the stop %.2f ms (%d steps), during it %.2f ms (%d steps)"
                   % (r, sum(pre) / len(pre) / 1000 if pre else -1, len(pre),
                      sum(mid) / len(mid) / 1000 if mid else -1, len(mid)))
            # Not slowed: the stop holds at least half the steps the rank's own pace before it
            # predicts (a rank that waited on the daemon would make none).
            pace = sorted(pre)[len(pre) // 2] / 1e6 if pre else 0
            expect = (t_cont - t_stop) / pace if pace else 0
            check("daemon stop: rank %d kept its pace while the daemon was stopped (%d steps, %.0f expected) and "
                  "its window holds steps 10..149" % (r, len(mid), expect),
                  pre and len(mid) >= expect / 2 and [s for s, _, _ in spans] == list(range(10, 150)),
                  "%d steps during the stop; steps %s" % (len(mid), [s for s, _, _ in spans][:5]))
        check("daemon stop: both windows recorded done",
              wait_for(lambda: sorted((x["rank"], x["outcome"]) for x in w.windows()) == [(0, "done"), (1, "done")]),
              w.windows())
    finally:
        for p in ranks:
            p.kill()
        w.close()
        n.close()


# --- 2. a rank killed ----------------------------------------------------------------------

def sweep_interval_ms(w):
    """The sweep interval while ranks are attached: --poll-interval, as npuprofd(8) says."""
    return w.poll_ms


def test_rank_kill():
    w = World("rank_kill", {"start_step": 10, "steps": 200, "output_dir": "job"}, poll_ms=200)
    ranks = []
    try:
        if not check("rank kill: npuprofd starts", w.start(), w.tail()):
            return
        ranks = [w.rank(r, 240, 20) for r in (0, 1)]
        if not check("rank kill: both ranks collecting",
                     wait_for(lambda: w.rank_states() == {0: "collecting", 1: "collecting"}), w.rank_states()):
            return
        time.sleep(0.3)
        victim = ranks[1]
        pid = victim.pid
        lost_line = "rank 1 (pid %d): window 10..209 lost" % pid
        interval = sweep_interval_ms(w)
        bound = 2 * interval / 1000 + 1.0       # two sweeps, and a generous second for a loaded machine
        victim.kill()
        killed = time.monotonic()
        victim.wait(5)
        # No request here: a request sweeps too. Only the daemon's own sweeps may find the death.
        seen = wait_for(lambda: lost_line in w.log(), timeout=bound, every=0.005)
        delay = time.monotonic() - killed
        figure("rank kill: sweep interval %d ms; the lost window was logged %.0f ms after the SIGKILL%s"
               % (interval, delay * 1000, "" if seen else " (not within %.1f s)" % bound))
        check("rank kill: slot reclaimed and the window recorded lost within two sweep intervals (+1 s)", seen,
              w.tail())
        ranks_now = (w.ctl_json("ranks") or {}).get("ranks") or []
        check("rank kill: the dead rank's slot is free, the live rank still collecting",
              w.rank_states(ranks_now) == {0: "collecting"} and all(x.get("pid") != pid for x in ranks_now),
              ranks_now)
        lost = [x for x in outcomes_of(w, 1)]
        check("rank kill: `npuprofctl windows` has rank 1's window lost, once",
              [(x["outcome"], x["start_step"], x["stop_step"], x["pid"]) for x in lost] == [("lost", 10, 209, pid)],
              lost)
        d = window_dir(w, "job", 1, 10, 209)
        size = os.path.getsize(os.path.join(d, "trace.json")) if os.path.exists(os.path.join(d, "trace.json")) else 0
        check("rank kill: the partial output stays on disk", size > 0 and trace_steps(d), "trace.json %d bytes" % size)
        m = manifest(d)
        check("rank kill: npuprofd wrote an incomplete manifest into the window directory",
              m is not None and m.get("status") == "incomplete" and m.get("written_by") == "npuprofd" and
              m.get("rank") == 1 and m.get("pid") == pid and m["window"]["start_step"] == 10 and
              m["window"]["stop_step"] == 209 and "died" in (m.get("message") or "") and
              any(f["name"] == "trace.json" for f in m.get("files", [])), json.dumps(m))
        check("rank kill: the manifest is the only file added, no temporary left",
              sorted(os.listdir(d)) == ["manifest.json", "trace.json"], os.listdir(d))
        rc, out = finish(ranks[0])
        check("rank kill: the other rank ran to its end with its window done",
              rc == 0 and manifest(window_dir(w, "job", 0, 10, 209))["status"] == "complete", out)

        # A manifest already there (the rank's own, or a link planted in its place) is never replaced.
        victim = w.rank(2, 240, 20)
        ranks.append(victim)
        if wait_for(lambda: w.rank_states().get(2) == "collecting"):
            d2 = [x for x in glob.glob(os.path.join(w.root, "job", "rank2_start*"))]
            target = os.path.join(w.dir, "not-a-manifest")
            with open(target, "w") as f:
                f.write("untouched\n")
            if d2:
                os.symlink(target, os.path.join(d2[0], "manifest.json"))
            victim.kill()
            victim.wait(5)
            wait_for(lambda: "rank 2 (pid %d)" % victim.pid in w.log(), timeout=bound)
            with open(target) as f:
                kept = f.read()
            check("rank kill: a manifest.json already there (a symlink) is left alone",
                  d2 and kept == "untouched\n" and os.path.islink(os.path.join(d2[0], "manifest.json")) and
                  not os.path.exists(os.path.join(d2[0], ".manifest.json.npuprofd.tmp")), (d2, kept))
        else:
            fail("rank kill: rank 2 collecting", w.rank_states())
    finally:
        for p in ranks:
            p.kill()
        w.close()


def test_rank_kill_opening():
    """A rank killed while its backend opens the window (a runtime can take long to start):
    the window is open from the moment its directory exists, so it is recorded lost and the
    directory gets its manifest, not left behind with neither."""
    if not os.access(ACL_STUB, os.R_OK):
        print("rank kill opening: skipped: no CANN stand-in (%s), which needs shared/testdata/cann" % ACL_STUB)
        return
    w = World("rank_kill_opening", {"start_step": 10, "steps": 20, "output_dir": "job"}, poll_ms=200)
    stub_log = os.path.join(w.dir, "acl.log")
    env = dict(os.environ, NPUPROF_ACL_LIB=ACL_STUB, NPF_ACL_STUB_LOG=stub_log, NPF_ACL_STUB_HOLD="aclprofInit:60000")
    victim = None
    try:
        if not check("rank kill opening: npuprofd starts", w.start(), w.tail()):
            return
        victim = w.rank(3, 100, 10, env=env, backend="acl")
        held = wait_for(lambda: os.path.exists(stub_log) and "aclprofInit held for" in open(stub_log).read())
        states = w.rank_states()
        check("rank kill opening: while aclprofInit runs, the slot already says collecting",
              held and states.get(3) == "collecting", (held, states))
        pid = victim.pid
        victim.kill()
        victim.wait(5)
        bound = 2 * sweep_interval_ms(w) / 1000 + 1.0
        seen = wait_for(lambda: "rank 3 (pid %d): window 10..29 lost" % pid in w.log(), timeout=bound, every=0.005)
        check("rank kill opening: the window is recorded lost", seen and
              [(x["outcome"], x["pid"]) for x in outcomes_of(w, 3)] == [("lost", pid)], (w.windows(), w.tail()))
        d = window_dir(w, "job", 3, 10, 29)
        m = manifest(d)
        check("rank kill opening: its directory holds npuprofd's incomplete manifest and nothing else",
              m is not None and m.get("status") == "incomplete" and m.get("written_by") == "npuprofd" and
              m.get("pid") == pid and os.listdir(d) == ["manifest.json"],
              (os.listdir(d) if os.path.isdir(d) else "no directory %s" % d, m))
    finally:
        if victim:
            victim.kill()
        w.close()


def test_log_stuck():
    """The daemon's log takes nothing (its stderr a pipe nobody reads, as a journal that has
    stopped reading): the daemon still answers every request; the lines it could not queue
    are dropped and counted, and the log says how many once it is read again."""
    w = World("log_stuck", {"start_step": 100000, "steps": 2})
    rfd, wfd = os.pipe()
    fcntl.fcntl(wfd, fcntl.F_SETPIPE_SZ, 4096)      # full after a few dozen lines
    n = 3000                                # reloads, logged a line each but those that share one
    try:
        started = w.start(stderr=wfd)
        os.close(wfd)
        wfd = -1
        if not check("log stuck: npuprofd starts, its stderr a 4 KiB pipe nobody reads", started):
            return
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(WAIT)
        s.connect(w.sock)
        s.sendall(b'{"version": 2, "command": "reload"}\n' * n)      # each reload logs a line
        buf, answered, wrong = b"", 0, []
        try:
            while answered < n:
                d = s.recv(65536)
                if not d:
                    break
                buf += d
                lines = buf.split(b"\n")
                buf = lines.pop()
                for x in lines:
                    r = json.loads(x)
                    answered += 1
                    # More than the daemon keeps waiting at once are told to try again: an answer too.
                    if r.get("ok") is not True and r.get("error") != "too many reloads waiting; try again":
                        wrong.append(r)
        except socket.timeout:
            pass
        s.close()
        check("log stuck: %d reloads asked at once, all answered while the log takes nothing" % n,
              answered == n and not wrong, "%d answered; %r" % (answered, wrong[:3]))
        st = w.status() or {}
        check("log stuck: status answers", (st.get("daemon") or {}).get("pid") == w.daemon.pid, st)
        text = ""
        os.set_blocking(rfd, False)
        deadline = time.monotonic() + WAIT
        while "log lines were dropped" not in text and time.monotonic() < deadline:
            try:
                text += os.read(rfd, 65536).decode(errors="replace")
            except BlockingIOError:
                time.sleep(0.01)
        m = re.search(r"warning: (\d+) log lines were dropped", text)
        figure("log stuck: %s log lines dropped of %d reloads" % (m.group(1) if m else "no", n))
        check("log stuck: read again, the log says how many lines it dropped, after those it kept",
              m is not None and 0 < int(m.group(1)) < n and text.count("reloading") >= 512, text[-500:])
    finally:
        if wfd >= 0:
            os.close(wfd)
        os.close(rfd)
        w.close()


# --- 3. the output file system full --------------------------------------------------------

def test_enospc():
    if not shutil.which("unshare"):
        fail("enospc: unshare(1) is missing (util-linux)")
        return
    w = World("enospc", {"start_step": 10, "steps": 100, "output_dir": "job"})
    ranks = []
    try:
        if not check("enospc: npuprofd starts", w.start(), w.tail()):
            return
        g0 = w.generation()
        cfg0 = w.ctl_json("config")
        # Rank 0 sees a 256 KiB tmpfs over the output root, all but two pages filled; rank 1,
        # outside the namespace, the real directory.
        script = ('set -e; mount -t tmpfs -o size=256k npftest "$1"; mkdir -p "$1/job"; '
                  'dd if=/dev/zero of="$1/filler" bs=4096 count=62 status=none; shift; "$@"; rc=$?; '
                  'echo "--- left in the tmpfs:"; ls -l "$root_dir"/job/rank0_* 2>&1; exit $rc')
        env = dict(os.environ, root_dir=w.root)
        r0 = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", w.root,
                               TRAIN, "--rank", "0", "--steps", "150", "--step-ms", "10", "--shm-name", w.shm,
                               "--backend", "host"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=env)
        procs.append(r0)
        r1 = w.rank(1, 150, 10)
        ranks = [r0, r1]
        rc0, out0 = finish(r0)
        rc1, out1 = finish(r1)
        print("     | rank 0 in its namespace:\n" + "\n".join("     |   " + l for l in out0.splitlines()), flush=True)
        check("enospc: rank 0 kept stepping to its end (exit 0, 150 steps) with its window failed",
              rc0 == 0 and "150 steps done" in out0 and "window failed" in out0, out0)
        mine = wait_for(lambda: outcomes_of(w, 0))
        check("enospc: rank 0's window recorded failed once, the reason naming ENOSPC",
              mine and len(mine) == 1 and mine[0]["outcome"] == "failed" and
              "No space left on device" in (mine[0]["message"] or ""), mine)
        rc, text, _ = w.ctl("windows")
        check("enospc: `npuprofctl windows` shows the failure and its reason",
              re.search(r"^\s+0\s+1\s+10\.\.109\s+failed.*No space left on device", text, re.M), text)
        d1 = window_dir(w, "job", 1, 10, 109)
        check("enospc: rank 1 (outside the namespace) ran to its end, its window done and complete",
              rc1 == 0 and trace_steps(d1) == list(range(10, 110)) and (manifest(d1) or {}).get("status") == "complete"
              and [x["outcome"] for x in outcomes_of(w, 1)] == ["done"], (out1, outcomes_of(w, 1)))
        check("enospc: the configuration stays (same generation, same `npuprofctl config`, valid)",
              w.generation() == g0 and w.ctl_json("config") == cfg0 and
              (w.status() or {}).get("config", {}).get("state") == "valid", w.status())
        check("enospc: the daemon is running", alive(w.daemon), w.tail())
    finally:
        for p in ranks:
            p.kill()
        w.close()


# --- 4. the configuration broken in every way ----------------------------------------------

def test_config_churn():
    good = {"start_step": 1000, "steps": 5, "output_dir": "job"}
    w = World("config_churn", good)
    try:
        if not check("config: npuprofd starts", w.start(), w.tail()):
            return
        with open("/etc/shadow") as f:
            shadow = f.read()
        secrets = {t for t in re.split(r"[:\n]", shadow) if len(t) >= 4}
        serial = [1000]

        def shown():
            """What any local user may read of the daemon: `status` (JSON and text) and the segment."""
            with open("/dev/shm/%s.ctl" % w.shm, "rb") as f:
                seg = f.read().decode("latin-1")
            return json.dumps(w.status()) + w.ctl("status")[1] + seg

        def has_word(text, token):
            return re.search(r"(?<![\w$./*!-])" + re.escape(token) + r"(?![\w$./*!-])", text) is not None

        def good_again(case):
            """A good file is taken again: a new generation, and `config` says so."""
            g = w.generation()
            serial[0] += 1
            if os.path.isdir(w.conf) and not os.path.islink(w.conf):
                shutil.rmtree(w.conf)
            elif os.path.lexists(w.conf):
                os.unlink(w.conf)
            w.write(dict(good, start_step=serial[0]))
            took = wait_for(lambda: w.generation() == g + 1 and
                            ((w.ctl_json("config") or {}).get("config") or {}).get("window", {}).get("start_step")
                            == serial[0])
            check("config %s: then a good file is taken (generation %d -> %d)" % (case, g, g + 1), took,
                  "%s\n%s" % (w.generation(), w.tail()))

        def broken(case, apply, settle=0.6, expect=None, private=False):
            """Apply a fault; the last good configuration stays and the error is reported."""
            g = w.generation()
            cfg = w.ctl_json("config")
            before = shown()
            cpu0, t0 = cpu_seconds(w.daemon.pid), time.monotonic()
            apply()
            time.sleep(settle)
            st = wait_for(lambda: (lambda s: s if s and s["config"]["state"] != "valid" else None)(w.status()),
                          timeout=5)
            cpu, span = cpu_seconds(w.daemon.pid) - cpu0, time.monotonic() - t0
            figure("config %s: daemon CPU %.3f s over %.1f s (%.1f%% of a core)" % (case, cpu, span, 100 * cpu / span))
            err = ((st or {}).get("config") or {}).get("error") or {}
            print("     | status error: %s" % json.dumps(err), flush=True)
            check("config %s: npuprofd still runs and answers, the error in status" % case,
                  alive(w.daemon) and st is not None and err.get("message") and
                  (expect is None or re.search(expect, err["message"])), "%s\n%s" % (json.dumps(st)[:800], w.tail()))
            check("config %s: the last good configuration stays (generation %s, `config` unchanged)" % (case, g),
                  w.generation() == g and w.ctl_json("config") == cfg, w.ctl_json("config"))
            check("config %s: no spinning (under half a core)" % case, cpu < span / 2, "%.2f s of CPU" % cpu)
            if private:
                # Every field of the file as a whole word: in the error (the path taken out), and in
                # all of `status` and the segment where it was not there before the fault.
                now = shown()
                text = (err.get("message") or "").replace(w.conf, "") + " " + (err.get("key") or "")
                leaked = sorted(t for t in secrets if has_word(text, t) or
                                (has_word(now, t) and not has_word(before, t)))
                check("config %s: nothing of the file shows in status or the world-readable segment" % case,
                      not leaked, "leaked: %s\nerror: %s" % (leaked[:5], text))
            good_again(case)

        def watching_new_dir(case, old_ino):
            """inotify follows the directory now at the path (its inode may be the old one's, reused)."""
            ino = os.stat(w.confdir).st_ino
            figure("config %s: directory inode %x, was %x" % (case, ino, old_ino))
            check("config %s: inotify watches the new directory, only it" % case,
                  wait_for(lambda: inotify_inodes(w.daemon.pid) == {ino}), inotify_inodes(w.daemon.pid))

        def remove_dir():
            shutil.rmtree(w.confdir)
            time.sleep(0.3)
            os.makedirs(w.confdir)
        old_ino = os.stat(w.confdir).st_ino
        broken("dir removed and re-created", remove_dir, expect=r"No such file|missing|cannot open")
        watching_new_dir("dir removed and re-created", old_ino)

        def move_dir():
            os.rename(w.confdir, w.confdir + ".old")
            os.makedirs(w.confdir)
        old_ino = os.stat(w.confdir).st_ino
        broken("dir renamed away and re-created", move_dir, expect=r"No such file|missing|cannot open")
        watching_new_dir("dir renamed away and re-created", old_ino)

        def as_dir():
            os.unlink(w.conf)
            os.makedirs(w.conf)
        broken("replaced by a directory", as_dir, expect="directory")

        def as_fifo():
            os.unlink(w.conf)
            os.mkfifo(w.conf)
        broken("replaced by a FIFO", as_fifo, expect="FIFO")

        def as_shadow():
            os.unlink(w.conf)
            os.symlink("/etc/shadow", w.conf)
        broken("a symlink to /etc/shadow", as_shadow, private=True)

        def as_big():
            with open(w.conf + ".big~", "wb") as f:
                f.write(b"{" + b" " * (10 * 1024 * 1024 - 2) + b"}")
            os.rename(w.conf + ".big~", w.conf)
        broken("a 10 MiB file", as_big, expect="bytes")

        def as_garbage():
            with open(w.conf + ".bin~", "wb") as f:
                f.write(bytes(range(256)) * 16 + os.urandom(4096))
            os.rename(w.conf + ".bin~", w.conf)
        broken("binary garbage", as_garbage, expect="UTF-8|JSON")

        def churn():
            """Rewrite the file in place every millisecond for ten seconds, never valid."""
            end = time.monotonic() + 10
            i = 0
            while time.monotonic() < end:
                with open(w.conf, "w") as f:
                    f.write('{"start_step": %d, "steps": ' % i)
                i += 1
                time.sleep(0.001)
            figure("config churn: %d rewrites in 10 s" % i)
        broken("changing every ms for 10 s", churn, settle=0.3, expect="JSON")
    finally:
        w.close()


# --- 5. the clock jumps --------------------------------------------------------------------

def test_clock_jump():
    lib = next((p for p in FAKETIME_LIBS if os.path.exists(p)), None)
    if not lib:
        fail("clock: libfaketime is missing (scripts/install-deps installs faketime)")
        return
    # The wall clock back and forth, as an NTP step does; the monotonic clock only forward, as
    # in a guest whose VM was paused (it never goes back, and libuv's timers rely on that).
    # Not under TSan: the daemon's thread pool can hang for good in libfaketime's lock around
    # lstat() (a semaphore TSan intercepts; seen with gdb, with the monotonic clock faked
    # always and with the wall clock alone in 2 of 5 runs), and libfaketime reads its own
    # configuration from every thread without a lock, which TSan reports as a race in it.
    with open(NPUPROFD, "rb") as f:
        if b"__tsan_init" in f.read():
            print("clock: not run on a TSan build (libfaketime hangs and races under TSan); the plain, "
                  "ASan and UBSan builds run it")
            return
    for phase, dont_fake_mono, offsets in (
            ("wall clock", "1", ["%+d" % (3600 * k * (-1) ** k) for k in range(1, 15)]),
            ("wall and monotonic clocks", "0", ["+%d" % (3600 * k) for k in range(1, 15)])):
        clock_phase(lib, phase, dont_fake_mono, offsets)


def faketime_unlink(procs_faked):
    """Remove what libfaketime made for each of @procs_faked, which have all been waited for.

    libfaketime up to 0.9.10 (Debian 12's; FAKETIME_DISABLE_SHM came in 0.9.11) makes, in each
    process it is preloaded into, /dev/shm/sem.faketime_sem_PID and faketime_shm_PID, and unlinks
    them only in its destructor: a process that is killed leaves them, as the daemon does here.
    Only our own processes' pids are named, never another user of libfaketime's objects."""
    for p in procs_faked:
        for f in ("sem.faketime_sem_%d" % p.pid, "faketime_shm_%d" % p.pid):
            try:
                os.unlink("/dev/shm/" + f)
            except FileNotFoundError:
                pass


def clock_phase(lib, phase, dont_fake_mono, offsets):
    name = "clock_mono" if dont_fake_mono == "0" else "clock_wall"
    w = World(name, {"start_step": 20, "steps": 30, "output_dir": "job"}, extra=["--stall-timeout", "2000"])
    stamp = os.path.join(w.dir, "faketime")
    with open(stamp, "w") as f:
        f.write("+0\n")
    # A binary built with AddressSanitizer wants its runtime first; libfaketime goes first here.
    asan = ":".join(x for x in (os.environ.get("ASAN_OPTIONS"), "verify_asan_link_order=0") if x)
    # The clock comes from the stamp file alone, so libfaketime's shared memory (a clock shared
    # by a process tree: ticks, a start time, saved timestamps) is not wanted; 0.9.11 and later
    # make none with FAKETIME_DISABLE_SHM, and faketime_unlink() removes what older ones make.
    env = dict(os.environ, LD_PRELOAD=lib, FAKETIME_TIMESTAMP_FILE=stamp, FAKETIME_NO_CACHE="1",
               FAKETIME_DISABLE_SHM="1", DONT_FAKE_MONOTONIC=dont_fake_mono, ASAN_OPTIONS=asan)
    ranks = []
    samples = stalled = jumped = 0
    try:
        if not check("clock (%s): npuprofd starts under libfaketime" % phase, w.start(env=env), w.tail()):
            return
        ranks = [w.rank(r, 60, 80, env=env) for r in (0, 1)]
        wait_for(lambda: len(w.rank_states()) == 2)
        jumps = iter(offsets)
        next_jump = time.monotonic() + 0.5
        t_end = time.monotonic() + 60
        while any(alive(p) for p in ranks) and time.monotonic() < t_end:
            now = time.monotonic()
            if now >= next_jump:
                off = next(jumps, None)
                if off is not None:
                    jumped += 1
                    with open(stamp + ".tmp", "w") as f:
                        f.write(off + "\n")
                    os.rename(stamp + ".tmp", stamp)
                next_jump = now + 0.3
            st = w.rank_states()
            samples += 1
            stalled += sum(1 for s in st.values() if s in ("stalled", "lost"))
            time.sleep(0.03)
        with open(w.logpath) as f:
            log = f.read()
        results = [finish(p) for p in ranks]
        figure("clock (%s): %d jumps, offsets %s; %d samples of `ranks`, %d said stalled or lost"
               % (phase, jumped, " ".join(offsets[:jumped]), samples, stalled))
        check("clock (%s): the faked clock is in effect (the daemon's log time jumped)" % phase,
              len({l[:13] for l in log.splitlines() if re.match(r"\d{4}-", l)}) >= 2, w.tail(20))
        check("clock (%s): both ranks ran to their end" % phase,
              all(rc == 0 and "60 steps done" in out for rc, out in results), results)
        for r in (0, 1):
            d = window_dir(w, "job", r, 20, 49)
            check("clock (%s): rank %d's trace holds exactly steps 20..49" % (phase, r),
                  trace_steps(d) == list(range(20, 50)), trace_steps(d))
        check("clock (%s): no live rank was ever said stalled or lost" % phase, stalled == 0,
              "%d of %d samples" % (stalled, samples))
        wins = wait_for(lambda: sorted((x["rank"], x["outcome"]) for x in w.windows()) == [(0, "done"), (1, "done")])
        check("clock (%s): both windows recorded done, none lost" % phase, wins, w.windows())
        check("clock (%s): npuprofd still runs" % phase, alive(w.daemon), w.tail())
    finally:
        for p in ranks:
            p.kill()
            p.wait(10)
        w.close()
        faketime_unlink(ranks + [w.daemon] if w.daemon else ranks)


CASES = {
    "daemon_kill": test_daemon_kill,
    "daemon_stop": test_daemon_stop,
    "rank_kill": test_rank_kill,
    "rank_kill_opening": test_rank_kill_opening,
    "log_stuck": test_log_stuck,
    "enospc": test_enospc,
    "config_churn": test_config_churn,
    "clock_jump": test_clock_jump,
}


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    for b in (NPUPROFD, NPUPROFCTL, TRAIN):
        if not os.access(b, os.X_OK):
            print("test-faults: %s is not built" % b, file=sys.stderr)
            return 2
    if os.geteuid() != 0:
        print("test-faults: needs root (mount namespaces, /etc/shadow)")
        return 77
    started = time.monotonic()
    try:
        for name in sys.argv[2:] or CASES:
            t0 = time.monotonic()
            try:
                CASES[name]()
            except Exception as e:      # a case that breaks is a failure, the others still run
                import traceback
                fail("%s: raised %r" % (name, e), traceback.format_exc())
            figure("%s took %.1f s" % (name, time.monotonic() - t0))
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGCONT)
                    p.kill()
                except OSError:
                    pass
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
        npftest.unlink_segments(shm_names)
        shutil.rmtree(tmp, ignore_errors=True)
    figure("the suite took %.1f s" % (time.monotonic() - started))
    return npftest.summary("faults")


if __name__ == "__main__":
    sys.exit(main())
