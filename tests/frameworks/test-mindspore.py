#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""npuprofd --legacy mindspore-packed against MindSpore's own DynamicProfilerMonitor.

    tests/frameworks/test-mindspore.py BUILD_DIR

Every job is tests/frameworks/mindspore_job.py: MindSpore's dynamic_profiler.py from
../shared/testdata/frameworks/ imported unchanged, its Profiler and logger recording stand-ins.
The daemon and the jobs share a private /dev/shm (a mount namespace of this test's own; root).
What each test shows is the framework's own behaviour against the daemon:
  - a calm edit never reads "not valid" to MindSpore, and every window opens and closes at its
    steps, also when the edit lands just before a window's start or inside a window;
  - a broken file after a good one changes nothing the job reads;
  - a job started before npuprofd (its 28-byte object) is driven;
  - a job of another user ends with exit 0 (MindSpore unlinks its object at the end and
    catches only FileNotFoundError), and a job started after it is driven;
  - no job's constructor refuses an object because of npuprofd, whenever it builds its
    monitor (MindSpore refuses an object whose change time is over 30 s from its start);
  - a daemon of its own user, as the packaged unit runs it, drives a root job's object (0600)
    through npuprof-shmopen, started by systemd's own socket activation tool; without the
    opener, status and the metrics name the object, its owner, why, and what to change.
"""
import json
import os
import pwd
import signal
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
NPUPROFD = os.path.join(BUILD, "npuprofd")
NPUPROFCTL = os.path.join(BUILD, "npuprofctl")
SHMOPEN = os.path.join(BUILD, "npuprof-shmopen")
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "..", "..", "shared", "testdata", "frameworks", "mindspore")
JOB = os.path.join(HERE, "mindspore_job.py")
PYTHON = "/usr/bin/python3"     # Debian's, which every user may run
sys.path.insert(0, os.path.join(HERE, ".."))
import npftest  # noqa: E402
from npftest import as_user, check, wait_for  # noqa: E402

procs = []
daemons = []


class Daemon:
    def __init__(self, tag, user=None):
        self.tag = tag
        self.user = user
        self.dir = tempfile.mkdtemp(prefix="npftest-ms.%s." % tag)
        os.chmod(self.dir, 0o755)
        self.config = os.path.join(self.dir, "profiler_config.json")
        self.socket = os.path.join(self.dir, "npuprofd.sock")
        self.env = dict(os.environ, NPUPROF_SOCKET=self.socket)
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.write({"start_step": -1, "stop_step": -1})
        self.proc = None
        if user:
            pw = pwd.getpwnam(user)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        daemons.append(self)

    def start(self, *extra):
        self.proc = subprocess.Popen(
            [NPUPROFD, "--config", self.config, "--shm-name", "npftest-ms-%s" % self.tag, "--socket",
             self.socket, "--output-root", os.path.join(self.dir, "out"), "--log", "stderr", "--analyze-jobs",
             "0", "--legacy", "mindspore-packed"] + list(extra), stderr=self.log, env=self.env,
            preexec_fn=as_user(self.user))
        procs.append(self.proc)
        return wait_for(lambda: subprocess.run([NPUPROFCTL, "status"], env=self.env,
                                               capture_output=True).returncode == 0, 8)

    def write(self, obj):
        tmp = self.config + ".tmp"
        with open(tmp, "w") as f:
            f.write(obj if isinstance(obj, str) else json.dumps(obj))
        os.rename(tmp, self.config)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(10)
        if not self.log.closed:
            self.log.close()

    def logged(self):
        with open(os.path.join(self.dir, "log")) as f:
            return f.read()


class Job:
    """One MindSpore job: its own configuration directory (no file in it, as on every rank but
    rank 0: its own monitor process then writes nothing), stepping every @step_ms."""
    def __init__(self, d, tag, steps=100000, step_ms=10, late=0, user=None):
        self.cfg = tempfile.mkdtemp(prefix="cfg.", dir=d.dir)
        os.chmod(self.cfg, 0o777)
        self.out = os.path.join(d.dir, "job-%s.log" % tag)
        args = [PYTHON, JOB, self.cfg, self.out, str(steps), str(step_ms)]
        if late:
            args += ["--late", str(late)]
        env = dict(os.environ, RANK_ID="1")
        if user:
            pw = pwd.getpwnam(user)
            os.chmod(d.dir, 0o777)
            open(self.out, "w").close()
            os.chown(self.out, pw.pw_uid, pw.pw_gid)
        self.proc = subprocess.Popen(args, env=env, preexec_fn=as_user(user), stdout=subprocess.DEVNULL,
                                     stderr=open(self.out + ".err", "w"))
        procs.append(self.proc)

    def lines(self):
        try:
            with open(self.out) as f:
                return [json.loads(x) for x in f if x.endswith("\n")]
        except FileNotFoundError:
            return []

    def step(self):
        """The step the job is at (its monitor process, a fork, logs at step 0)."""
        return max([x["step"] for x in self.lines()] or [0])

    def constructed(self):
        return any(x.get("event") == "constructed" for x in self.lines())

    def windows(self):
        """(start, stop) steps of each profiler start and stop, in order."""
        out, start = [], None
        for x in self.lines():
            if x.get("profiler") == "start":
                start = x["step"]
            elif x.get("profiler") == "stop":
                out.append((start, x["step"]))
                start = None
        return out

    def not_valid(self, after=0):
        return [x for x in self.lines() if x.get("log") == "error" and "not valid" in x.get("msg", "")
                and x["step"] > after]

    def end(self, timeout=15):
        open(self.out + ".stop", "w").close()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None

    def stderr(self):
        with open(self.out + ".err") as f:
            err = f.read()[-400:]
        return "%s\n%s" % (err, "\n".join(json.dumps(x) for x in self.lines()[-6:]))


def objects():
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith("DynamicProfileShm"))


def test_calm_edits():
    """Edits land far ahead of a window, just before its start and inside it: MindSpore never
    reads "not valid", and every window opens and closes at the steps the file names."""
    d = Daemon("calm")
    if not check("calm: npuprofd starts", d.start(), d.logged()):
        return
    job = Job(d, "calm", step_ms=10)
    if not check("calm: the job builds its monitor", wait_for(lambda: job.constructed() and job.step() > 5, 10),
                 job.stderr()):
        return d.stop()
    settled = job.step()
    want = []
    for i in range(6):
        s = job.step() + 40
        want.append((s, s + 3))
        d.write({"start_step": s, "stop_step": s + 3})
        # An edit just before the start (the window stays) and one inside it (another window later).
        wait_for(lambda: job.step() >= s - 2, 10)
        d.write({"start_step": s, "stop_step": s + 3, "with_stack": i % 2 == 0})
        wait_for(lambda: job.step() >= s + 1, 10)
        d.write({"start_step": s + 60, "stop_step": s + 63})
        wait_for(lambda: job.step() >= s + 6, 10)
    rc = job.end()
    check("calm: every window opened and closed at its steps", job.windows() == want, (job.windows(), want))
    bad = job.not_valid(after=settled)
    check("calm: MindSpore never read 'not valid' (%d edits)" % 18, not bad, bad[:3])
    check("calm: the job ends with exit 0", rc == 0, job.stderr())
    d.stop()


def test_broken_after_good():
    d = Daemon("broken")
    if not check("broken: npuprofd starts", d.start(), d.logged()):
        return
    job = Job(d, "broken", step_ms=10)
    if not wait_for(lambda: job.constructed() and job.step() > 5, 10):
        check("broken: the job builds its monitor", False, job.stderr())
        return d.stop()
    settled = job.step()
    s = job.step() + 80
    d.write({"start_step": s, "stop_step": s + 2})
    time.sleep(0.3)
    d.write('{"start_step": %d, "stop_step": ' % (s + 10))
    wait_for(lambda: job.step() >= s + 10, 15)
    rc = job.end()
    check("broken: the good window still opens and closes at %d..%d" % (s, s + 2), job.windows() == [(s, s + 2)],
          job.windows())
    check("broken: MindSpore never read 'not valid'", not job.not_valid(after=settled), job.not_valid()[:3])
    check("broken: the job ends with exit 0", rc == 0, job.stderr())
    d.stop()


def test_job_before_daemon():
    d = Daemon("before")
    job = Job(d, "before", step_ms=10)
    if not check("before: the job made its own 28-byte object", wait_for(
            lambda: job.constructed() and any(x.get("creator") for x in job.lines()), 10), job.stderr()):
        return
    name = [x["object"] for x in job.lines() if x.get("event") == "constructed"][0]
    check("before: it is 28 bytes", os.stat("/dev/shm/" + name).st_size == 28)
    if not check("before: npuprofd starts", d.start(), d.logged()):
        return
    s = job.step() + 60
    d.write({"start_step": s, "stop_step": s + 1})
    wait_for(lambda: job.step() >= s + 5, 15)
    rc = job.end()
    check("before: npuprofd adopted it and the job collects %d..%d" % (s, s + 1), job.windows() == [(s, s + 1)],
          (job.windows(), d.logged()[-300:]))
    check("before: the job ends with exit 0", rc == 0, job.stderr())
    d.stop()


def test_other_user_and_next_job():
    d = Daemon("user")
    if not check("user: npuprofd starts", d.start(), d.logged()):
        return
    job = Job(d, "nobody", step_ms=10, user="nobody")
    if not wait_for(lambda: job.constructed() and job.step() > 5, 10):
        check("user: a job of nobody builds its monitor", False, job.stderr())
        return d.stop()
    s = job.step() + 50
    d.write({"start_step": s, "stop_step": s + 1})
    wait_for(lambda: job.step() >= s + 3, 15)
    rc = job.end()
    check("user: nobody's job is driven (%d..%d)" % (s, s + 1), job.windows() == [(s, s + 1)], job.windows())
    check("user: nobody's job unlinks its object and ends with exit 0", rc == 0, job.stderr())
    check("user: no object is left behind", wait_for(lambda: not objects(), 5), objects())
    nxt = Job(d, "next", step_ms=10)
    if wait_for(lambda: nxt.constructed() and nxt.step() > 5, 10):
        s = nxt.step() + 50
        d.write({"start_step": s, "stop_step": s + 2})
        wait_for(lambda: nxt.step() >= s + 4, 15)
    rc = nxt.end()
    check("user: a job started after it is driven too", nxt.windows() == [(s, s + 2)], nxt.windows())
    check("user: and ends with exit 0", rc == 0, nxt.stderr())
    d.stop()


def test_constructors_never_refuse():
    """MindSpore refuses an object whose change time is over 30 s from its process's start; a
    job that starts 31 s after npuprofd, and one that builds its monitor 31 s after starting,
    both find none of npuprofd's."""
    d = Daemon("ctime")
    # Whatever --legacy-refresh allows: a change time kept within 2 s of now is what a job
    # that builds its monitor late refuses.
    if not check("ctime: npuprofd starts", d.start("--legacy-refresh", "2"), d.logged()):
        return
    d.write({"start_step": 1000000, "stop_step": 1000001})
    check("ctime: npuprofd made no MindSpore object", not objects(), objects())
    # One at a time: two MindSpore jobs refuse each other's object the same way.
    for tag, late, what in (("late-build", 31, "a job that builds its monitor 31 s after it started"),
                            ("late-start", 0, "a job started over 31 s after npuprofd")):
        job = Job(d, tag, step_ms=10, late=late)
        ok = wait_for(lambda: job.constructed() or job.proc.poll() is not None, late + 15)
        check("ctime: %s builds it" % what, ok and job.constructed(), job.stderr())
        check("ctime: %s ends with exit 0" % what, job.end() == 0, job.stderr())
    d.stop()


def test_unprivileged_daemon():
    """The daemon as the packaged unit runs it, as a user of its own (nobody here), and a job
    of root: MindSpore makes its object 0600, root's."""
    d = Daemon("unpriv", user="nobody")
    sock = os.path.join(d.dir, "shmopen.sock")
    if not check("unprivileged: npuprofd as nobody starts, with no opener at its socket",
                 d.start("--shm-opener", sock), d.logged()):
        return
    job = Job(d, "root", step_ms=10)
    if not wait_for(lambda: job.constructed() and job.step() > 5, 10):
        check("unprivileged: a root job builds its monitor", False, job.stderr())
        return
    name = [x["object"] for x in job.lines() if x.get("event") == "constructed"][0]

    def status():
        r = subprocess.run([NPUPROFCTL, "status", "--json"], env=d.env, capture_output=True, text=True)
        objs = json.loads(r.stdout)["legacy"]["publishers"][0]["objects"] if r.returncode == 0 else []
        return ([o for o in objs if o["name"] == name] or [None])[0]
    wait_for(lambda: status() and "why" in status(), 5)
    o = status() or {}
    check("unprivileged: without the opener, status says the root job's %s is not driven, whose, and why" % name,
          o.get("error") == "Permission denied" and o.get("uid") == 0 and o.get("mode") == 0o600 and
          "cannot be reached" in o.get("why", "") and "npuprof-shmopen.socket" in o.get("why", ""), o)
    text = subprocess.run([NPUPROFCTL, "status"], env=d.env, capture_output=True, text=True).stdout
    check("unprivileged: npuprofctl status prints it", "%s" % name in text and "NOT DRIVEN" in text, text)
    metrics = subprocess.run([NPUPROFCTL, "metrics"], env=d.env, capture_output=True, text=True).stdout
    want = 'npuprof_legacy_undriven{publisher="mindspore-packed",object="%s",uid="0",reason="Permission denied"} 1' \
        % name
    check("unprivileged: the metrics name it", want in metrics and
          'npuprof_legacy_objects{publisher="mindspore-packed",state="undriven"} 1' in metrics,
          [x for x in metrics.splitlines() if "legacy" in x])
    # The opener, as npuprof-shmopen.socket starts it (Accept=yes): systemd's own tool.
    log = open(os.path.join(d.dir, "shmopen.log"), "w")
    procs.append(subprocess.Popen(["systemd-socket-activate", "--seqpacket", "--accept", "--listen", sock, SHMOPEN,
                                   "--user", "nobody"], stderr=log))
    if not check("unprivileged: npuprof-shmopen listens", wait_for(lambda: os.path.exists(sock), 5)):
        return
    os.chmod(sock, 0o666)
    check("unprivileged: the daemon takes the object from the opener (status)",
          wait_for(lambda: (status() or {}).get("via_opener") is True, 10), status())
    s = job.step() + 60
    d.write({"start_step": s, "stop_step": s + 1})
    wait_for(lambda: job.step() >= s + 5, 20)
    o = status() or {}
    rc = job.end()
    check("unprivileged: with the opener, the root job is driven (%d..%d)" % (s, s + 1),
          job.windows() == [(s, s + 1)], (job.windows(), o, d.logged()[-400:]))
    check("unprivileged: status says the object came from npuprof-shmopen", o.get("via_opener") is True and
          "error" not in o, o)
    with open(os.path.join(d.dir, "shmopen.log")) as f:
        given = f.read()
    check("unprivileged: the opener logs what it gave, to whom",
          "gave pid %d %s (uid 0, mode 0600, 28 bytes)" % (d.proc.pid, name) in given, given)
    check("unprivileged: the job unlinks its object and ends with exit 0", rc == 0 and not objects(),
          (rc, objects(), job.stderr()))


def isolated(test):
    """@test, then what it left running stopped: each test has the node's /dev/shm alone."""
    def run():
        try:
            test()
        finally:
            for d in daemons:
                d.stop()
            del daemons[:]
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            for name in objects():
                os.unlink("/dev/shm/" + name)
    run.__name__ = test.__name__
    return run


def main():
    if not os.path.isdir(SRC):
        print("test-mindspore: skipped: %s is absent" % SRC)
        sys.exit(77)
    if os.environ.get("NPF_MS_NS") != "1":
        if os.geteuid() != 0:
            print("test-mindspore: skipped: needs root for a private /dev/shm")
            sys.exit(77)
        env = dict(os.environ, NPF_MS_NS="1")
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable,
                            os.path.abspath(__file__), BUILD], env=env)
        sys.exit(r.returncode)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/dev/shm"]).returncode != 0:
        print("test-mindspore: cannot mount a private /dev/shm")
        sys.exit(77)
    try:
        npftest.run_tests([isolated(t) for t in (test_calm_edits, test_broken_after_good, test_job_before_daemon,
                                                 test_other_user_and_next_job, test_unprivileged_daemon,
                                                 test_constructors_never_refuse)])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    npftest.summary("mindspore")


if __name__ == "__main__":
    main()
