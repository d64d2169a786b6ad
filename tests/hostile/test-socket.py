#!/usr/bin/env python3
"""The control socket under abuse, against the real npuprofd on a private socket.

    tests/hostile/test-socket.py BUILD_DIR

A well-behaved client asks `status` in a loop (a new connection each time, as npuprofctl
does) through every phase while abusers send garbage bytes, invalid UTF-8, lines that are
not JSON or not objects, unknown commands, a 1 MiB line, hundreds of requests in one write,
half-open and slow-loris connections, a client that never reads its replies, 1,000 idle
clients, and then more idle clients than the daemon admits at once. The daemon is started
with a soft open-file limit of 256 (it must raise it) and a short --idle-timeout.

Asserted: every well-behaved request got a correct answer; every abusive one got a clear
error or was closed; the daemon is alive; its descriptor count returns to the baseline once
the abusers leave. The status latency of each phase is measured and printed, never asserted.
"""
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import npftest  # noqa: E402 - tests/, found once the path is set
from npftest import check, fail, wait_for  # noqa: E402

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
NPUPROFD = os.path.join(BUILD, "npuprofd")
NPUPROFCTL = os.path.join(BUILD, "npuprofctl")
IDLE_MS = 3000          # the daemon's --idle-timeout here
IDLE_CLIENTS = 1000
WAIT = npftest.WAIT = 10.0      # the longest any condition is waited for, in seconds

tmp = tempfile.mkdtemp(prefix="npftest-socket.")
SHM = "npftest-socket-%d" % os.getpid()
SOCK = os.path.join(tmp, "npuprofd.sock")
STATUS = b'{"version": 2, "command": "status"}\n'


def connect(timeout=WAIT):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    s.connect(SOCK)     # blocking: a full backlog is waited out, as npuprofctl does
    s.settimeout(timeout)
    return s


def read_lines(s, want=None):
    """Read reply lines until @want of them came or the daemon closed. Return: (lines, closed)."""
    buf, lines = b"", []
    while want is None or len(lines) < want:
        try:
            chunk = s.recv(1 << 16)
        except (ConnectionResetError, BrokenPipeError):
            return lines, True
        except socket.timeout:
            return lines, False
        if not chunk:
            return lines + ([buf] if buf else []), True
        buf += chunk
        *done, buf = buf.split(b"\n")
        lines += done
    return lines, False


def reply_error(line):
    """The error text of an error reply line, or None when it is not one."""
    try:
        o = json.loads(line)
    except ValueError:
        return None
    if isinstance(o, dict) and o.get("version") == 2 and o.get("ok") is False and o.get("error"):
        return o["error"]
    return None


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


class StatusLoop(threading.Thread):
    """The well-behaved client: status after status, each answer checked, timed by phase."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid = pid
        self.phase = "baseline"
        self.lat = {}           # phase: [seconds]
        self.bad = []           # (phase, what went wrong)
        self.stop = threading.Event()

    def one(self):
        t0 = time.monotonic()
        o = status_reply()
        dt = time.monotonic() - t0
        if not (o and o.get("ok") is True and o["result"]["daemon"]["pid"] == self.pid):
            raise RuntimeError("wrong answer: %r" % (o,))
        return dt

    def run(self):
        while not self.stop.is_set():
            phase = self.phase
            try:
                self.lat.setdefault(phase, []).append(self.one())
            except Exception as e:  # noqa: BLE001 - every failure is counted and shown
                self.bad.append((phase, repr(e)))
            time.sleep(0.002)


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))] * 1000.0


def start_daemon():
    conf = os.path.join(tmp, "profiler_config.json")
    with open(conf, "w") as f:
        f.write('{"start_step": 100000, "steps": 2}\n')
    log = open(os.path.join(tmp, "npuprofd.log"), "w")

    def low_limit():
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    p = subprocess.Popen([NPUPROFD, "--config", conf, "--shm-name", SHM, "--socket", SOCK, "--output-root", tmp,
                          "--idle-timeout", str(IDLE_MS), "--log", "stderr"], stdout=log, stderr=log,
                         preexec_fn=low_limit)
    return p


def status_reply():
    """One `status` on a new connection: the reply, or None if none came."""
    s = connect()
    try:
        s.sendall(STATUS)
        lines, _ = read_lines(s, 1)
    finally:
        s.close()
    return json.loads(lines[0]) if lines else None


def status():
    return status_reply()["result"]


def open_clients(n):
    out = []
    for _ in range(n):
        out.append(connect())
    return out


def abuse_one(name, payload, closes, expect=None):
    """Send @payload on its own connection: a clear error must come back, then EOF if @closes."""
    s = connect()
    try:
        try:
            s.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass
        lines, closed = read_lines(s, None if closes else 1)
        err = reply_error(lines[0]) if lines else None
        good = err is not None and (expect is None or expect in err) and (closed if closes else True)
        if good and not closes:
            # The connection stays open and still answers.
            s.sendall(STATUS)
            more, _ = read_lines(s, 1)
            good = bool(more) and json.loads(more[0]).get("ok") is True
        check("%s: a clear error%s" % (name, ", then closed" if closes else ", the connection still answers"),
              good, "lines %r closed %r" % (lines[:2], closed))
    finally:
        s.close()


def test_garbage():
    abuse_one("garbage bytes", bytes(range(256)) * 4 + b"\n", True, "not a JSON object")
    abuse_one("invalid UTF-8", b'{"version": 2, "command": "\xff\xfe\xc3("}\n', True, "not a JSON object")
    abuse_one("invalid UTF-8 outside a string", b"\xc3\x28\xa0\xa1 nope\n", True, "not a JSON object")
    # jansson quotes the bytes near a bad escape, here half of a two-byte character: the error
    # must still be sent (as valid UTF-8), not swallowed with the connection (found by fuzz-proto).
    abuse_one("a bad escape before a multibyte character", b'{"version": 2, "command": "\\\xde\x8a"}\n', True,
              "not a JSON object")
    abuse_one("a line that is not JSON", b"status please\n", True, "not a JSON object")
    for text in (b"[1, 2]", b'"status"', b"42", b"null"):
        abuse_one("JSON that is not an object (%s)" % text.decode(), text + b"\n", True, "not a JSON object")
    abuse_one("no protocol version", b'{"command": "status"}\n', True, "no protocol version")
    abuse_one("another protocol version", b'{"version": 1, "command": "status"}\n', True, "version 1")
    abuse_one("an unknown command", b'{"version": 2, "command": "rm -rf"}\n', False, "unknown command 'rm -rf'")
    abuse_one("an unknown command in invalid-looking UTF-8 escapes", b'{"version": 2, "command": "\\u00e9\\u00e9"}\n',
              False, "unknown command")


def garbage_until(enough):
    """More garbage, its answers unchecked, until enough() holds: so that the well-behaved
    client is timed while garbage comes, however quickly the checked batch above went by."""
    deadline = time.monotonic() + 10    # a status loop that gets no answer is judged later
    while not enough() and time.monotonic() < deadline:
        s = connect()
        try:
            s.sendall(bytes(range(256)) * 4 + b"\n")
            read_lines(s, 1)
        finally:
            s.close()


def test_oversized():
    abuse_one("a 1 MiB line", b"{" + b" " * (1 << 20) + b"}\n", True, "at most 65536 bytes")


def test_pipelined():
    n = 500
    s = connect()
    try:
        s.sendall(STATUS * n)
        lines, _ = read_lines(s, n)
        good = [ln for ln in lines if json.loads(ln).get("ok") is True]
        check("%d status requests in one write: %d answers, all ok, in one connection" % (n, n),
              len(lines) == n and len(good) == n, "got %d answers, %d ok" % (len(lines), len(good)))
    finally:
        s.close()


def test_half_open():
    # Shut down for writing in the middle of a line.
    s = connect()
    s.sendall(b'{"version": 2, "comm')
    s.shutdown(socket.SHUT_WR)
    lines, closed = read_lines(s)
    check("half-open mid-line: an error naming the missing newline, then closed",
          closed and lines and "middle of a request line" in (reply_error(lines[0]) or ""), lines)
    s.close()
    # Shut down for writing after a whole request: still answered, then closed.
    s = connect()
    s.sendall(STATUS)
    s.shutdown(socket.SHUT_WR)
    lines, closed = read_lines(s)
    check("half-open after a whole request: answered, then closed",
          closed and len(lines) == 1 and json.loads(lines[0]).get("ok") is True, lines)
    s.close()


def test_never_finishes():
    """A line that never ends, and a slow loris that trickles one: both timed out."""
    quiet = connect(timeout=IDLE_MS / 1000.0 * 3)
    quiet.sendall(b'{"version": 2, "command": "sta')
    loris = connect(timeout=0.2)
    t0 = time.monotonic()
    sent, closed, lines = 0, False, []
    while time.monotonic() - t0 < IDLE_MS / 1000.0 * 3:
        try:
            loris.sendall(b" ")
            sent += 1
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
        got, closed = read_lines(loris)
        lines += got
        if closed:
            break
    check("slow loris (a byte every 200 ms, no newline): closed by the idle timeout, after %d bytes" % sent,
          closed and lines and "not finished within %d ms" % IDLE_MS in (reply_error(lines[0]) or ""), lines)
    loris.close()
    lines, closed = read_lines(quiet)
    check("a line that never ends: closed with an error after the idle timeout",
          closed and lines and "not finished" in (reply_error(lines[0]) or ""), lines)
    quiet.close()


def test_never_reads():
    """A client that sends thousands of requests and never reads a reply."""
    s = connect(timeout=WAIT * 2)
    result = {}

    def send():
        try:
            s.sendall(STATUS * 20000)
            result["sent"] = "all"
        except (BrokenPipeError, ConnectionResetError) as e:
            result["sent"] = repr(e)
        except socket.timeout:
            result["sent"] = "timeout"

    t = threading.Thread(target=send, daemon=True)
    t.start()
    t.join(WAIT * 2)
    # It stops sending when the daemon stops reading; reading only now, to the end, shows
    # whether the daemon closed it.
    s.settimeout(1.0)
    lines, closed = read_lines(s)
    check("a client that never reads its replies is closed by the daemon (%d replies were queued for it; sender: %s)"
          % (len(lines), result.get("sent")), closed and len(lines) < 20000, result)
    s.close()


def main():
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    p = start_daemon()
    loop = None
    try:
        if not check("the daemon starts and answers", wait_for(lambda: os.path.exists(SOCK) and status())):
            return
        limits = open("/proc/%d/limits" % p.pid).read()
        nofile = next(ln for ln in limits.splitlines() if ln.startswith("Max open files")).split()[3:5]
        check("the daemon raised its soft open-file limit from 256 to the hard one (%s)" % nofile[1],
              nofile[0] == nofile[1] and nofile[0] != "256", nofile)
        clients_max = status()["daemon"]["clients"]["max"]
        # The status connections just used are closed by the daemon once it reads their end.
        wait_for(lambda: status()["daemon"]["clients"]["open"] == 1)
        time.sleep(0.3)
        baseline = fd_count(p.pid)
        print("#   daemon descriptors at rest: %d; clients at once: %d" % (baseline, clients_max))

        loop = StatusLoop(p.pid)
        loop.start()
        time.sleep(1.0)

        for phase, fn in (("garbage", test_garbage), ("oversized", test_oversized), ("pipelined", test_pipelined),
                          ("half-open", test_half_open), ("slow-loris", test_never_finishes),
                          ("never-reads", test_never_reads)):
            loop.phase = phase
            fn()
            if phase == "garbage":
                garbage_until(lambda: len(loop.lat.get("garbage", [])) >= 20)

        loop.phase = "1000 idle"
        idle = open_clients(IDLE_CLIENTS)
        time.sleep(IDLE_MS / 1000.0 / 2)
        st = status()
        print("#   daemon descriptors with %d idle clients: %d" % (IDLE_CLIENTS, fd_count(p.pid)))
        check("%d idle clients held open at once, none refused (%d open)" % (IDLE_CLIENTS, st["daemon"]["clients"]["open"]),
              st["daemon"]["clients"]["open"] >= IDLE_CLIENTS and st["daemon"]["clients"]["evicted"] == 0,
              st["daemon"]["clients"])
        for s in idle:
            s.close()

        loop.phase = "table full"
        extra = 100
        full = open_clients(clients_max + extra)
        time.sleep(0.5)
        st = status()
        print("#   daemon descriptors with %d clients trying: %d" % (clients_max + extra, fd_count(p.pid)))
        oldest, _ = read_lines(full[0])
        check("%d + %d idle clients: the longest idle are closed to admit new ones (%d evicted)"
              % (clients_max, extra, st["daemon"]["clients"]["evicted"]),
              st["daemon"]["clients"]["evicted"] >= extra and st["daemon"]["clients"]["open"] <= clients_max, st["daemon"]["clients"])
        check("the evicted client was told why", oldest and "to admit a new connection" in (reply_error(oldest[0]) or ""),
              oldest)
        for s in full:
            s.close()

        loop.phase = "after"
        time.sleep(1.0)
        loop.stop.set()
        loop.join(WAIT)

        total = sum(len(v) for v in loop.lat.values())
        check("every well-behaved status was answered correctly (%d requests, %d failed)" % (total + len(loop.bad),
                                                                                            len(loop.bad)),
              not loop.bad and all(loop.lat.get(ph) for ph in ("baseline", "garbage", "1000 idle", "table full")),
              loop.bad[:5])
        print("#   status latency by phase (ms), a new connection each:")
        for ph, v in loop.lat.items():
            print("#     %-12s n %5d  p50 %7.2f  p99 %7.2f  max %7.2f" % (ph, len(v), pct(v, 0.5), pct(v, 0.99),
                                                                        max(v) * 1000))
        fds = wait_for(lambda: fd_count(p.pid) == baseline and fd_count(p.pid))
        check("the daemon's descriptors return to the baseline (%d) once the abusers left (now %d)"
              % (baseline, fd_count(p.pid)), fds == baseline)
        out = subprocess.run([NPUPROFCTL, "--socket", SOCK, "--shm-name", SHM, "status", "--json"],
                             capture_output=True, text=True, timeout=WAIT)
        check("the daemon is alive and npuprofctl status answers", p.poll() is None and out.returncode == 0 and
              json.loads(out.stdout)["daemon"]["pid"] == p.pid, out.stderr)
    finally:
        if loop:
            loop.stop.set()
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(WAIT)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        try:
            os.unlink("/dev/shm/" + SHM)
        except OSError:
            pass
        if npftest.failed:
            print(open(os.path.join(tmp, "npuprofd.log")).read()[-2000:])
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - a crash of the test is one failure, shown
        import traceback
        traceback.print_exc()
        fail("the suite ran to its end", repr(e))
    sys.exit(npftest.summary("socket"))
