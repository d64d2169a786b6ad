#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""libkineto's endpoint: from an edit of profiler_config.json to the jobs' configuration.

    /usr/bin/python3 bench/bench-kineto.py [BUILD_DIR]

Three real npuprofd run side by side, each in a temporary directory of its own (control
socket, segment name, output root, --kineto-socket-dir, --analyze-jobs 0), each with one
group of clients polling its libkineto endpoint at libkineto's default interval, 5 s
(ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS; no KINETO_CONFIG is given), each client at a random
phase:
  - 4 real libkineto processes: build/kineto/fake-torch (tests/kineto/fake-torch.cpp, built
    against the real libkineto by `make kineto-test-prog` or tests/kineto/build.sh), started
    at random moments of the first 5 s with KINETO_USE_DAEMON=1 and KINETO_IPC_SOCKET_DIR.
    libkineto logs "Received config from dyno:" and the text on stderr the moment a poll
    brings one: the time the line is read here is the time the process got it. Where
    fake-torch is not built, this is said and 4 stand-in pollers take their place.
  - 64 and 256 stand-in pollers: one forked process each (the daemon tells clients apart by
    their socket and names their window directories by their pid), each doing what
    libkineto's IpcFabricConfigClient does: bind DIR/dynoconfigclient<uuid4> (mode 0666),
    send every 5 s one datagram of the 40-byte header {u64 size, char type[32] = "req"} and
    the request {int32 type = 2, int32 n, int64 jobid, int32 pids[n]} (its own pid, then its
    ancestors'), retrying a refused send as sync_send does, and take the first datagram that
    arrives within 80 ms as the answer (libkineto tries 9 times, 10 ms apart). A late answer
    stays queued and is taken by the next poll, as libkineto takes it. A stand-in times each
    poll's answer from its send: the daemon's latency, seen from the client.

Each daemon gets 10 edits, 5.6 to 6.6 s apart (longer than a poll interval, so that every
client polls between two edits and sees each), each written whole (a temporary file renamed
over profiler_config.json): {"output_dir": OUT/editK, "start_step": "next", "steps": 2},
a new window, and so a new generation, each time. Why this window and not a far start step:
a client that holds a window is given no other until that window ends (daemon/kineto.c,
window_give), and a window ends when its trace lands. So each client traces its window, as
a job does: fake-torch's libkineto traces its next 2 steps (well within a poll interval at
50 ms a step), and a stand-in writes its trace file (kineto_<pid>.pt.trace.json, where the
text's ACTIVITIES_LOG_FILE names it) the moment it gets the text, as a libkineto whose trace
ends before its next poll. The daemon finds the trace at the client's next poll, ends the
window (its manifest written, the window recorded) and, the file edited since, gives the
next one in the same answer: that work is timed in "poll -> answer carrying a
configuration". The other designs were set aside: restarting the stand-ins with a new
socket name per edit would make 2,560 clients in 60 s for 256 pollers, beyond the 1,024 the
daemon keeps (daemon/kineto.h) before one expires, and a busy-then-ready dance adds polls
out of libkineto's cadence; a far start step would keep fake-torch's window open forever.

Figures, for each group: edit -> the first client's configuration and -> the last's (all
N), min / median / max over the edits; edit -> each client's (p50 / p99 / mean), with how
many came at the first poll after the edit; poll -> answer (p50 / p99 / max), empty and
carrying a configuration; answers missed or later than libkineto's wait; the daemon's own
counts (npuprofctl status) and its CPU time. Baseline: libkineto's poll interval, 5 s, and
what it alone makes of the wait for N clients at uniform random phases: expected first
5/(N+1) s, last 5N/(N+1) s, each 2.5 s on average. Runs about 70 s; needs no root and no
network; cleans up its processes and its temporary directories.
"""

import sys
sys.dont_write_bytecode = True  # noqa: E402

import json
import math
import os
import random
import re
import select
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "build")
FAKE = os.path.join(ROOT, "build", "kineto", "fake-torch")
POLL_S = 5.0                    # libkineto's default ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS
EDITS = 10
SPACING = (5.6, 6.6)            # seconds between edits: more than one poll interval
WAIT_S = 0.080                  # libkineto's poll_recv: 9 tries 10 ms apart, the last at 80 ms
STEP_MS = 50                    # fake-torch's iteration
HDR = struct.Struct("<Q32s")    # libkineto's Metadata: size_t size; char type[32]
EDIT_RE = re.compile(r"/edit(\d+)/")


def ancestors(pid):
    """libkineto's pids: its own, then its parent's and so on, stopping before pid 1, 11 at most."""
    out = [pid]
    while len(out) < 11:
        try:
            with open("/proc/%d/stat" % out[-1]) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if ppid <= 1:
            break
        out.append(ppid)
    return out


def trace_name(log_file, pid):
    """Where libkineto writes a trace: _<pid> before the first .pt.trace.json, else .json."""
    at = log_file.find(".pt.trace.json")
    if at < 0:
        at = log_file.find(".json")
    return log_file if at < 0 else "%s_%d%s" % (log_file[:at], pid, log_file[at:])


def edit_of(text):
    """The edit a configuration text is for, from its ACTIVITIES_LOG_FILE's editK directory."""
    for line in text.splitlines():
        if line.startswith("ACTIVITIES_LOG_FILE="):
            m = EDIT_RE.search(line)
            return (int(m.group(1)) if m else -1), line.split("=", 1)[1]
    return -1, None


# --- a stand-in poller, in a forked process -------------------------------------------------

def standin(sockdir, phase, stop_fd, result_path, t0):
    pid = os.getpid()
    polls, configs, errors = [], [], []
    send_failed = late = 0
    path = os.path.join(sockdir, "dynoconfigclient" + str(uuid.uuid4()))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    s.bind(path)
    os.chmod(path, 0o666)
    s.setblocking(False)
    pids = ancestors(pid)
    jobid = int(os.environ["SLURM_JOB_ID"]) if os.environ.get("SLURM_JOB_ID", "").isdigit() else 0
    payload = struct.pack("<iiq%di" % len(pids), 2, len(pids), jobid, *pids)
    header = HDR.pack(len(payload), b"req")
    daemon = os.path.join(sockdir, "dynolog")
    next_t = t0 + phase
    while True:
        if select.select([stop_fd], [], [], max(0.0, next_t - time.monotonic()))[0]:
            break
        start = time.monotonic()
        next_t = start + POLL_S          # libkineto: the next poll an interval after this one began
        stale = bool(select.select([s], [], [], 0)[0])
        late += stale
        # sync_send: 10 tries, 10 ms doubling, on EAGAIN and ECONNREFUSED; anything else fails the poll.
        sent, delay = False, 0.010
        for _ in range(10):
            try:
                s.sendmsg([header, payload], [], 0, daemon)
                sent = True
                break
            except (BlockingIOError, ConnectionRefusedError):
                time.sleep(delay)
                delay *= 2
            except OSError as e:
                errors.append("send: %s" % e)
                break
        if not sent:
            send_failed += 1
            continue
        data, t_ans, deadline = None, None, start + WAIT_S
        while True:
            try:
                data = s.recv(65536)
                t_ans = time.monotonic()
                break
            except BlockingIOError:
                pass
            left = deadline - time.monotonic()
            if left <= 0:
                break
            select.select([s], [], [], left)
        if data is None:
            # Not taken: libkineto's next poll takes it. When it comes is only watched (up to 1 s).
            came = select.select([s], [], [], 1.0)[0] and not stale
            polls.append((start, None, 0, stale, time.monotonic() if came else None))
            continue
        size = HDR.unpack_from(data)[0] if len(data) >= HDR.size else 0
        polls.append((start, t_ans, size, stale, None))
        if size:
            text = data[HDR.size:HDR.size + size].decode("utf-8", "replace")
            k, log_file = edit_of(text)
            configs.append((k, start, t_ans))
            if log_file:
                # Its trace, as libkineto writes one: a temporary file renamed into place.
                name = trace_name(log_file, pid)
                try:
                    with open(name + ".tmp", "w") as f:
                        f.write('{"traceEvents": [], "displayTimeUnit": "ms"}\n')
                    os.rename(name + ".tmp", name)
                except OSError as e:
                    errors.append("trace: %s" % e)
    s.close()
    with open(result_path, "w") as f:
        json.dump({"polls": polls, "configs": configs, "send_failed": send_failed, "late": late,
                   "errors": errors[:5]}, f)


def fork_standin(sockdir, phase, stop_r, stop_w, result_path, t0):
    pid = os.fork()
    if pid:
        return pid
    code = 0
    try:
        os.close(stop_w)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        standin(sockdir, phase, stop_r, result_path, t0)
    except BaseException as e:  # noqa: B036 - a child must never return into the parent's code
        try:
            with open(result_path, "w") as f:
                json.dump({"crashed": repr(e)}, f)
        except OSError:
            pass
        code = 1
    os._exit(code)


# --- a real libkineto process ------------------------------------------------------------------

class Fake:
    """fake-torch polling one daemon; the times its stderr says a configuration arrived."""

    def __init__(self, sockdir, outroot, rank):
        env = dict(os.environ, KINETO_USE_DAEMON="1", KINETO_IPC_SOCKET_DIR=sockdir,
                   KINETO_ONDEMAND_TRACE_DIR=outroot, RANK=str(rank))
        env.pop("KINETO_CONFIG", None)   # libkineto's defaults: a poll every 5 s
        env.pop("LD_PRELOAD", None)
        # Bounded, should this script die: 150 s of steps.
        self.p = subprocess.Popen([FAKE, "--steps", str(150000 // STEP_MS), "--step-ms", str(STEP_MS)],
                                  env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE)
        self.configs, self.tail = [], []
        self.t = threading.Thread(target=self.read, daemon=True)
        self.t.start()

    def read(self):
        pending = None
        for raw in self.p.stderr:
            now = time.monotonic()
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.tail = (self.tail + [line])[-20:]
            if "Received config from dyno" in line:
                pending = now
            elif pending is not None and line.startswith("ACTIVITIES_LOG_FILE="):
                m = EDIT_RE.search(line)
                self.configs.append((int(m.group(1)) if m else -1, None, pending))
                pending = None

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
        try:
            self.p.wait(5)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.t.join(2)


# --- a daemon and its clients --------------------------------------------------------------------

class Group:
    def __init__(self, tmp, name, n, real):
        self.name, self.n, self.real = name, n, real
        self.dir = os.path.join(tmp, name)
        self.sock = os.path.join(self.dir, "sock")
        self.out = os.path.join(self.dir, "out")
        # The file alone in its directory, which the daemon watches: its own log is not there.
        self.conf = os.path.join(self.dir, "conf", "profiler_config.json")
        self.ctl_sock = os.path.join(self.dir, "npuprofd.sock")
        self.shm = "npfbench-kineto-%d-%s" % (os.getpid(), name)
        self.log = os.path.join(self.dir, "npuprofd.log")
        self.results = os.path.join(self.dir, "results")
        for d in (self.sock, self.out, self.results, os.path.dirname(self.conf)):
            os.makedirs(d)
        self.write({"output_dir": self.out})
        self.edits = []                # monotonic time of each edit, after its rename
        self.children, self.fakes = [], []
        with open(self.log, "w") as log:
            self.d = subprocess.Popen([os.path.join(BUILD, "npuprofd"), "--config", self.conf, "--shm-name", self.shm,
                                       "--socket", self.ctl_sock, "--output-root", self.out,
                                       "--kineto-socket-dir", self.sock, "--analyze-jobs", "0", "--log", "stderr"],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)

    def write(self, obj):
        tmp = os.path.join(os.path.dirname(self.conf), ".profiler_config.json.tmp")
        with open(tmp, "w") as f:
            f.write(json.dumps(obj) + "\n")
        os.rename(tmp, self.conf)

    def edit(self, k):
        self.write({"output_dir": os.path.join(self.out, "edit%d" % k), "start_step": "next", "steps": 2})
        self.edits.append(time.monotonic())

    def ctl(self, *args):
        return subprocess.run([os.path.join(BUILD, "npuprofctl"), "--socket", self.ctl_sock, "--shm-name", self.shm]
                              + list(args), capture_output=True, text=True, timeout=10)

    def ready(self):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.d.poll() is None:
            try:
                if os.path.exists(os.path.join(self.sock, "dynolog")) and self.ctl("status").returncode == 0:
                    return True
            except subprocess.TimeoutExpired:
                pass
            time.sleep(0.01)
        return False

    def cpu_s(self):
        try:
            with open("/proc/%d/stat" % self.d.pid) as f:
                v = f.read().rsplit(")", 1)[1].split()
            return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return float("nan")

    def stop(self):
        for f in self.fakes:
            f.stop()
        if self.d.poll() is None:
            self.d.send_signal(signal.SIGTERM)
            try:
                self.d.wait(10)
            except subprocess.TimeoutExpired:
                self.d.kill()
                self.d.wait()


def pct(v, q):
    v = sorted(v)
    return v[max(0, min(len(v) - 1, math.ceil(q * len(v)) - 1))] if v else float("nan")


def analyse(g, clients):
    """clients: a list of {"configs": [(edit, poll start or None, time got)], "polls": [...] for a stand-in}."""
    first, last, each = [], [], []
    delivered = at_first = behind = early = undelivered_behind = 0
    early_gaps = []
    for k, te in enumerate(g.edits):
        times = []
        tn = g.edits[k + 1] if k + 1 < len(g.edits) else float("inf")
        for c in clients:
            got = [(p, t) for (e, p, t) in c["configs"] if e == k]
            if not got:
                # Skipped: a client a poll behind still held the last window when this one was replaced.
                undelivered_behind += any(p[3] or p[1] is None for p in c.get("polls", []) if te - POLL_S < p[0] < tn)
                continue
            times.append(got[0][1] - te)
            delivered += 1
            polls = c.get("polls")
            if polls is None:
                continue
            # The polls after the edit before the one that brought it.
            before = [p for p in polls if te < p[0] < got[0][0]]
            if not before:
                at_first += 1
            elif any(p[3] or p[1] is None for p in before) or [p for p in polls if p[0] == got[0][0]][0][3]:
                behind += 1             # an answer after libkineto's wait: this one came a poll late
            else:
                early += 1              # answered nothing, the daemon not yet having the edit
                early_gaps.append((before[0][0] - te) * 1000)
        each += times
        if times:
            first.append(min(times))
        if len(times) == len(clients):
            last.append(max(times))
    P = [p for c in clients for p in c.get("polls", [])]
    return dict(first=first, last=last, each=each, delivered=delivered, at_first=at_first, behind=behind,
                early=early, early_gaps=early_gaps, polls=len(P), undelivered_behind=undelivered_behind,
                empty=[(p[1] - p[0]) * 1000 for p in P if p[1] is not None and not p[2] and not p[3]],
                full=[(p[1] - p[0]) * 1000 for p in P if p[1] is not None and p[2] and not p[3]],
                missed=sum(1 for p in P if p[1] is None and not p[3]),
                missed_came=[(p[4] - p[0]) * 1000 for p in P if p[1] is None and p[4] is not None],
                stale=sum(1 for p in P if p[3]),
                still_behind=sum(1 for c in clients if c.get("polls") and c["polls"][-1][3]),
                send_failed=sum(c.get("send_failed", 0) for c in clients))


def mmm(v):
    return "min %6.3f  median %6.3f  max %6.3f s" % (min(v), statistics.median(v), max(v)) if v else "none"


def report(g, a, status, cpu, wall, label):
    n, k = g.n, len(g.edits)
    print("  %s, %d edits:" % (label, k))
    print("    edit -> first client's configuration   %s   (the poll phase alone: %.3f s expected)"
          % (mmm(a["first"]), POLL_S / (n + 1)))
    print("    edit -> last client's configuration    %s   (%.3f s expected)%s" % (
        mmm(a["last"]), POLL_S * n / (n + 1), "" if len(a["last"]) == k else
        "; %d of the %d edits reached every client before the end" % (len(a["last"]), k)))
    if a["each"]:
        print("    edit -> each client's configuration    p50 %6.3f  p99 %6.3f  mean %6.3f s   (2.5 s expected)"
              % (pct(a["each"], .5), pct(a["each"], .99), statistics.mean(a["each"])))
    line = "    delivered %d of %d" % (a["delivered"], n * k)
    if g.real:
        slow = sum(1 for t in a["each"] if t > POLL_S + 0.25)
        line += "; later than one poll interval after the edit (a poll missed): %d" % slow
    else:
        line += ": at the first poll after the edit %d; a poll or more later, behind a late answer %d" % (
            a["at_first"], a["behind"])
        if a["delivered"] < n * k:
            line += "; not received %d (%d by a client a poll behind then, still holding its last window when " \
                "the file was edited again, or its answer queued at the end)" % (
                    n * k - a["delivered"], a["undelivered_behind"])
        if a["early"]:
            line += "; a poll later, the first having come before the daemon had the edit %d (%.1f to %.1f ms " \
                "after it)" % (a["early"], min(a["early_gaps"]), max(a["early_gaps"]))
    print(line)
    if not g.real:
        for what, v in (("no configuration", a["empty"]), ("carrying a configuration", a["full"])):
            if v:
                print("    poll -> answer, %-25s p50 %6.2f  p99 %6.2f  max %6.2f ms   (%d polls)"
                      % (what, pct(v, .5), pct(v, .99), max(v), len(v)))
        line = "    answers after libkineto's 80 ms wait: %d of %d polls" % (a["missed"], a["polls"])
        if a["missed_came"]:
            line += " (they came %.0f to %.0f ms after the poll)" % (min(a["missed_came"]), max(a["missed_came"]))
        if a["missed"] - len(a["missed_came"]):
            line += ", %d not within 1 s" % (a["missed"] - len(a["missed_came"]))
        if a["missed"]:
            line += "; libkineto takes each at its next poll, and every answer after it one poll late: %d polls so " \
                "answered, %d clients still a poll behind at the end" % (a["stale"], a["still_behind"])
        print(line + "; sends failed: %d" % a["send_failed"])
    K = (status or {}).get("kineto") or {}
    c = K.get("counts") or {}
    if c:
        print("    daemon: %d requests, %d replies (%d empty), %d send failures, %d clients refused, %d malformed; "
              "%d windows given, %d traced, %d lost; CPU %.2f s in %.0f s (%.2f%% of a core)"
              % (c.get("requests", 0), c.get("replies", 0), c.get("empty", 0), c.get("send_failed", 0),
                 c.get("clients_refused", 0), c.get("malformed", 0), c.get("given", 0), c.get("traces", 0),
                 c.get("lost", 0), cpu, wall, 100 * cpu / wall if wall else 0))
    else:
        print("    daemon: no status (%s)" % ("exited %s" % g.d.returncode if g.d.poll() is not None else "no answer"))


def main():
    for b in ("npuprofd", "npuprofctl"):
        if not os.access(os.path.join(BUILD, b), os.X_OK):
            sys.exit("bench-kineto: %s/%s is not built" % (BUILD, b))
    real = os.access(FAKE, os.X_OK)
    rng = random.Random()
    tmp = tempfile.mkdtemp(prefix="npfbench-kineto.")
    groups, pids = [], []
    stop_r, stop_w = os.pipe()
    try:
        groups = [Group(tmp, "g4", 4, real), Group(tmp, "g64", 64, False), Group(tmp, "g256", 256, False)]
        for g in groups:
            if not g.ready():
                sys.exit("bench-kineto: npuprofd did not start: %s" % open(g.log).read()[-1500:])
        t0 = time.monotonic() + 0.2
        # The stand-ins first, before any thread: each a process, at a random phase of its 5 s.
        for g in groups:
            if g.real:
                continue
            for i in range(g.n):
                pids.append(fork_standin(g.sock, rng.uniform(0, POLL_S), stop_r, stop_w,
                                         os.path.join(g.results, "%d.json" % i), t0))
        # Then the events: fake-torch's starts, and each daemon's edits on its own schedule.
        events = []
        if real:
            for i in range(groups[0].n):
                events.append((t0 + rng.uniform(0, POLL_S), "start", groups[0], i))
        for g in groups:
            t = t0 + POLL_S + 0.5 + rng.uniform(0, 0.5)   # every client has polled once
            for k in range(EDITS):
                events.append((t, "edit", g, k))
                t += rng.uniform(*SPACING)
        end = max(t for t, *_ in events) + POLL_S + 0.6
        events.sort(key=lambda e: e[0])
        for t, what, g, k in events:
            time.sleep(max(0.0, t - time.monotonic()))
            if what == "start":
                g.fakes.append(Fake(g.sock, g.out, k))
            else:
                g.edit(k)
        time.sleep(max(0.0, end - time.monotonic()))
        wall = time.monotonic() - t0
        os.close(stop_w)                # the stand-ins end, each after its poll in progress
        stop_w = -1
        for p in pids:
            os.waitpid(p, 0)
        pids = []
        status, cpu = {}, {}
        for g in groups:
            r = g.ctl("status", "--json")
            try:
                status[g.name] = json.loads(r.stdout)
            except ValueError:
                status[g.name] = None
            cpu[g.name] = g.cpu_s()

        print("libkineto's endpoint (npuprofd --kineto-socket-dir): from an edit of profiler_config.json "
              "(a new window, temporary file renamed) to the clients' configuration")
        print("  baseline: libkineto's poll interval: %g s (ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS); "
              "expected wait for the next poll: up to %g s, %g s on average" % (POLL_S, POLL_S, POLL_S / 2))
        for g in groups:
            if g.real:
                clients = [{"configs": f.configs} for f in g.fakes]
                label = "%d real libkineto processes (fake-torch, %d ms steps, default 5 s poll)" % (g.n, STEP_MS)
            else:
                clients = []
                for i in range(g.n):
                    try:
                        with open(os.path.join(g.results, "%d.json" % i)) as f:
                            clients.append(json.load(f))
                    except (OSError, ValueError):
                        clients.append({"configs": [], "polls": [], "crashed": "no result"})
                crashed = [c["crashed"] for c in clients if "crashed" in c]
                if crashed:
                    print("  %s: %d stand-ins failed: %s" % (g.name, len(crashed), crashed[0]))
                for c in clients:
                    c.setdefault("configs", [])
                errs = [e for c in clients for e in c.get("errors", [])]
                if errs:
                    print("  %s: stand-in errors, e.g. %s" % (g.name, errs[0]))
                label = "%d stand-in pollers (the same protocol, a process each, 5 s poll, random phases)" % g.n
                if g.n == 4:
                    label = ("4 stand-in pollers in place of real libkineto processes (%s not built: "
                             "make kineto-test-prog)" % os.path.relpath(FAKE, ROOT))
            report(g, analyse(g, clients), status.get(g.name), cpu.get(g.name, float("nan")), wall, label)
            if g.real and any(len(f.configs) < len(g.edits) for f in g.fakes):
                for f in g.fakes:
                    print("    fake-torch %d: %d configurations; stderr: %s" % (f.p.pid, len(f.configs),
                                                                                " | ".join(f.tail[-3:])))
        print("  (the groups run at once, a daemon each; the edit -> configuration figures hold the wait for each "
              "client's poll, the poll -> answer figures only the daemon)")
    finally:
        if stop_w >= 0:
            os.close(stop_w)
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
                os.waitpid(p, 0)
            except OSError:
                pass
        for g in groups:
            g.stop()
        os.close(stop_r)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
