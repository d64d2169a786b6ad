# SPDX-License-Identifier: MIT
"""What the Python binding suites (test_torch_window.py, test_torch_npu_window.py) share
beyond tests/npftest.py: how a suite starts, a private npuprofd, and how a suite ends.

    import sys
    sys.dont_write_bytecode = True              # before this import: no __pycache__ here
    import bindingtest                          # puts python/ and tests/ on sys.path
    BUILD = bindingtest.setup("npftest-py")     # exits 77 where the binding cannot be tested
    d = bindingtest.Daemon("window", {})        # npuprofd on its own files, generation 1
    d.publish({"start_step": 10, "steps": 3})   # save the file, wait for generation 2
    ...
    bindingtest.main("python", ("npuprofd", "libnpuprof.so"), banner, [t_one, t_two])

Each Daemon has its own configuration file, shm name, socket and output root, all under the
suite's temporary folder bindingtest.TMP, its segments named from bindingtest.SHM_PREFIX.
It reads the published generation through npuprof._lib, which is why it is not in npftest:
the suites under tests/ that import npftest run without the binding.
"""

import importlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "tests")]  # this tree's npuprof

import npftest  # noqa: E402 - tests/, found once the path is set
from npuprof import _lib  # noqa: E402 - loads no library until it is used

BUILD = None        # the build folder, as setup() found it
TMP = None          # the suite's temporary folder, removed by cleanup()
SHM_PREFIX = None   # every segment of the suite is named from it, removed by cleanup()
daemons = []


def _on_signal(sig, _frame):
    raise SystemExit(128 + sig)


def sanitizer_runtime(path):
    """The sanitizer runtime a shared object needs (it cannot be loaded into Python), or None."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    for rt in (b"libasan.so", b"libtsan.so", b"libubsan.so", b"libhwasan.so"):
        if rt in data:
            return rt.decode()
    return None


def setup(name):
    """Start a suite: the build folder is argv[1] (ROOT/build without one), the binding loads
    its libnpuprof.so, and no NPUPROF_SHM or RANK_ID of the caller's reaches it. Exit 77 (a
    skip) when that library needs a sanitizer runtime or torch cannot be imported. Make the
    suite's temporary folder (@name.XXXX) and its segment prefix (@name-PID), and turn SIGTERM
    and SIGHUP into SystemExit, so that cleanup() runs. Return: the build folder."""
    global BUILD, TMP, SHM_PREFIX
    BUILD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    os.environ.setdefault("NPUPROF_LIB", os.path.join(BUILD, "libnpuprof.so"))
    os.environ.pop("NPUPROF_SHM", None)
    os.environ.pop("RANK_ID", None)
    rt = sanitizer_runtime(os.environ["NPUPROF_LIB"])
    if rt:
        print("skip: %s needs %s, which cannot be loaded into a Python that was not started with it; "
              "the Python binding is tested on the plain build" % (os.environ["NPUPROF_LIB"], rt))
        sys.exit(77)
    try:
        importlib.import_module("torch")
    except Exception as e:  # noqa: BLE001 - any reason torch is unusable is a skip
        print("skip: torch cannot be imported by %s: %s: %s" % (sys.executable, type(e).__name__, e))
        print("      (Debian: apt-get install python3-torch; run with /usr/bin/python3)")
        sys.exit(77)
    TMP = tempfile.mkdtemp(prefix=name + ".")
    SHM_PREFIX = "%s-%d" % (name, os.getpid())
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGHUP, _on_signal)
    return BUILD


class Daemon:
    """npuprofd on a private configuration (@config, as the first file), shm name, socket and
    output root, all named from @tag; with @analyzer, finished windows are analysed by the
    real npuprof-replay."""

    def __init__(self, tag, config, analyzer=False):
        self.dir = os.path.join(TMP, tag)
        os.makedirs(self.dir)
        self.conf = os.path.join(self.dir, "profiler_config.json")
        self.shm = "%s-%s" % (SHM_PREFIX, tag)
        self.sock = os.path.join(self.dir, "npuprofd.sock")
        self.log = os.path.join(self.dir, "daemon.log")
        npftest.save_config(self.conf, config)
        args = [os.path.join(BUILD, "npuprofd"), "--config", self.conf, "--shm-name", self.shm,
                "--socket", self.sock, "--output-root", self.dir, "--poll-interval", "50", "--log", "stderr"]
        if analyzer:
            args += ["--analyzer", os.path.join(BUILD, "npuprof-replay")]
        self.logf = open(self.log, "w")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.logf, stderr=self.logf)
        daemons.append(self)

    def generation(self):
        """The generation the segment holds now; 0 while there is none."""
        return _lib.config_generation(self.shm) or 0

    def wait_generation(self, at_least, timeout=5.0):
        """Return: the generation once it is @at_least or more; 0 if it is not by @timeout."""
        def reached():
            g = self.generation()
            return g if g >= at_least else 0
        return npftest.wait_for(reached, timeout)

    def publish(self, config, mtime=None):
        """Save @config and wait for npuprofd to publish it. Return: its generation, or 0."""
        g = self.generation()
        npftest.save_config(self.conf, config, mtime)
        return self.wait_generation(g + 1)

    def tail(self):
        """The last lines of the daemon's log, for a failure's detail."""
        try:
            with open(self.log) as f:
                return "daemon log:\n" + "".join(f.readlines()[-12:])
        except OSError as e:
            return str(e)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()
        npftest.unlink_segments([self.shm])


def cleanup():
    """Stop every daemon still running, remove every segment named from SHM_PREFIX (a daemon's
    or one a test made with no daemon) and the temporary folder."""
    for d in daemons:
        if d.proc.poll() is None:
            d.stop()
    if SHM_PREFIX:
        for f in os.listdir("/dev/shm"):
            if f.startswith(SHM_PREFIX + "-") or f.startswith(SHM_PREFIX + "."):
                try:
                    os.unlink(os.path.join("/dev/shm", f))
                except OSError:
                    pass
    if TMP:
        shutil.rmtree(TMP, ignore_errors=True)


def main(prefix, needs, banner, tests):
    """End a suite: once every file of @needs is in BUILD, print @banner, run @tests
    (npftest.run_tests) and the "@prefix: N passed, N failed" line; then cleanup(), whatever
    happened, and exit: 2 when something is not built, 1 on a failure, else 0."""
    try:
        rc = _run(prefix, needs, banner, tests)
    finally:
        cleanup()
    sys.exit(rc)


def _run(prefix, needs, banner, tests):
    for exe in needs:
        if not os.path.exists(os.path.join(BUILD, exe)):
            print("%s: %s/%s is not built" % (prefix, BUILD, exe))
            return 2
    print(banner, flush=True)
    npftest.run_tests(tests)
    return npftest.summary(prefix)
