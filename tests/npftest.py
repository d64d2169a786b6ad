# SPDX-License-Identifier: MIT
"""What the Python suites share, as tests/lib.sh is for the shell ones.

    import npftest
    from npftest import ok, fail, check, figure, wait_for

A suite counts its checks with ok(), fail() and check(), prints its timings with figure()
(never asserts them), waits with wait_for() (bounded by npftest.WAIT unless told), and ends
with `sys.exit(npftest.summary("PREFIX"))`, which prints the one "PREFIX: N passed, N failed"
line tests/run-tests reads. Notify is a NOTIFY_SOCKET owned by the test, as systemd owns one.
save_config() writes a configuration file the way an editor does.

Nothing here imports npuprof: the suites under tests/ run without the Python binding.
"""

import json
import os
import socket
import threading
import time
import traceback

WAIT = 5.0      # the longest wait_for() waits unless told, in seconds; a suite may change it
passed = failed = 0


def ok(name):
    global passed
    passed += 1
    print("ok   " + name, flush=True)


def fail(name, detail=""):
    global failed
    failed += 1
    print("FAIL " + name, flush=True)
    for line in str(detail).splitlines()[:25]:
        print("     | " + line, flush=True)


def check(name, cond, detail=""):
    """ok() or fail() as @cond says; returns @cond, so that a suite can stop on a failure."""
    if cond:
        ok(name)
    else:
        fail(name, detail)
    return cond


def as_user(user):
    """A preexec_fn that makes the child @user (its own group, no other), or None for no user."""
    if not user:
        return None
    import pwd
    pw = pwd.getpwnam(user)

    def become():
        os.setgroups([])
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)
    return become


def run_tests(tests):
    """Each of @tests in turn: one that raises is a failure with its traceback, and the
    others still run."""
    for t in tests:
        try:
            t()
        except Exception as e:
            traceback.print_exc()
            fail("%s: %s: %s" % (t.__name__, type(e).__name__, e))


def figure(text):
    print("figure: " + text, flush=True)


def wait_for(pred, timeout=None, every=0.02):
    """@pred() until it is true or the time is up; its last value."""
    deadline = time.monotonic() + (WAIT if timeout is None else timeout)
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(every)


def save_config(path, obj, mtime=None):
    """Write @obj to @path as an editor or npuprofctl saves it: a temporary file, fsync,
    rename over; with @mtime, the file's modification time is set before the rename."""
    tmp = path + ".tmp~"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    if mtime is not None:
        os.utime(tmp, (mtime, mtime))
    os.rename(tmp, path)


def unlink_segments(names):
    """Remove the shared-memory segments (NAME.ctl, NAME.ranks) a suite's daemons made."""
    for name in names:
        for suffix in (".ctl", ".ranks"):
            try:
                os.unlink("/dev/shm/" + name + suffix)
            except FileNotFoundError:
                pass


def summary(prefix):
    """Print the suite's last line; the exit status it calls for."""
    print("%s: %d passed, %d failed" % (prefix, passed, failed), flush=True)
    return 1 if failed else 0


class Notify:
    """A NOTIFY_SOCKET: every datagram received, with its arrival time (CLOCK_MONOTONIC)."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self.sock.bind(path)
        self.sock.settimeout(0.05)
        self.msgs = []  # (time, text, {field: value})
        self.lock = threading.Lock()
        self.hooks = []  # functions called with each message on arrival, in the reader thread
        self.done = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while not self.done:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            text = data.decode("utf-8", "replace")
            fields = {}
            for line in text.split("\n"):
                if "=" in line:
                    k, v = line.split("=", 1)
                    fields[k] = v
            msg = (time.monotonic(), text, fields)
            for hook in self.hooks:
                hook(msg)
            with self.lock:
                self.msgs.append(msg)

    def snapshot(self):
        with self.lock:
            return list(self.msgs)

    def mark(self):
        return len(self.snapshot())

    def find(self, key, value=None, since=0):
        """The first message from index @since with field @key (equal to @value if given)."""
        for m in self.snapshot()[since:]:
            if key in m[2] and (value is None or m[2][key] == value):
                return m
        return None

    def wait(self, key, value=None, since=0, timeout=None):
        return wait_for(lambda: self.find(key, value, since), timeout)

    def index_of(self, msg):
        return self.snapshot().index(msg)

    def statuses(self, since=0):
        return [m[2]["STATUS"] for m in self.snapshot()[since:] if "STATUS" in m[2]]

    def watchdogs(self, t0=0.0, t1=float("inf")):
        """The arrival times of WATCHDOG=1 in [@t0, @t1)."""
        return [m[0] for m in self.snapshot() if m[2].get("WATCHDOG") == "1" and t0 <= m[0] < t1]

    def close(self):
        self.done = True
        self.thread.join(1)
        self.sock.close()
