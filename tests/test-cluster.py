#!/usr/bin/env python3
"""`npuprof-replay cluster DIR`, through the real program.

    tests/test-cluster.py BUILD_DIR

Trees of window directories are written here into a temporary directory and the program is
run on them. What it must say is worked out here from what was written and from the rules of
replay/cluster.h and the manual page, never taken from an earlier run of it:

- the walk: every rank<R>_start<S>_stop<E> directory (or its ".N" sibling) in DIR or in the
  directories up to six levels below it is a window, none deeper, no directory of another
  name; DIR with no window is an error (exit 1, "DIR: no rank*_start*_stop* window directory
  below it") and writes nothing;
- each window's row: its rank and steps, the median (the mean of the two middle ones for an
  even count) and the nearest-rank 90th percentile of its ProfilerStep#N durations (the trace
  is written as the host backend writes trace.json), and its peak allocated and reserved
  bytes, worked out by a forward replay of the memory snapshot written here (JSON, and one
  pickle);
- the stragglers: the windows whose median step time exceeds the median of all windows'
  medians by more than 10% (exactly +10% is not one, +10.5% is), in report.json, marked in
  report.txt, and as straggler bars in ranks.svg (well-formed XML, a bar per rank);
- a window whose trace or snapshot cannot be read is a row with an "error" and no figures,
  and the others are still reported;
- --json prints report.json; -o puts the report elsewhere.

Ends with "cluster: N passed, N failed"; exits 1 when a check failed.
"""
import errno
import json
import math
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npftest  # noqa: E402
from npftest import check  # noqa: E402

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
REPLAY = os.path.join(BUILD, "npuprof-replay")
# The documented rules (cluster.h, npuprof-replay(1)), written here on purpose rather than read
# from the header: a change of either must be seen by this test.
DEPTH_MAX = 6                   # directory levels below DIR searched for windows
STRAGGLER = Fraction(11, 10)    # a median step above 110% of the median of medians
NO_WINDOW = "no rank*_start*_stop* window directory and no framework's profiler output below it"
# A sanitizer's report must not look like the program's own exit status 1.
ENV = dict(os.environ,
           ASAN_OPTIONS="exitcode=86:" + os.environ.get("ASAN_OPTIONS", ""),
           UBSAN_OPTIONS="halt_on_error=1:exitcode=87:" + os.environ.get("UBSAN_OPTIONS", ""))

tmp = tempfile.mkdtemp(prefix="test-cluster.")


def eq(what, got, want):
    return check(what, got == want, "got %r, want %r" % (got, want))


# --- running the program ------------------------------------------------------------------

class Run:
    """One run of `npuprof-replay cluster ARGS`, and what it left in @outdir."""

    def __init__(self, args, outdir):
        p = subprocess.run([REPLAY, "cluster"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV,
                           timeout=120)
        self.rc, self.stdout, self.stderr = p.returncode, p.stdout.decode(errors="replace"), \
            p.stderr.decode(errors="replace")
        lines = self.stderr.strip().splitlines()
        self.last = lines[-1] if lines else ""
        self.outdir = outdir
        self.report = self.txt = self.svg = None
        self.json_error = None
        path = os.path.join(outdir, "report.json")
        if os.path.exists(path):
            try:
                with open(path) as f:
                    self.report = json.load(f)
            except ValueError as e:
                self.json_error = str(e)
        if os.path.exists(os.path.join(outdir, "report.txt")):
            with open(os.path.join(outdir, "report.txt")) as f:
                self.txt = f.read()
        if os.path.exists(os.path.join(outdir, "ranks.svg")):
            with open(os.path.join(outdir, "ranks.svg"), "rb") as f:
                self.svg = f.read()

    def sanitizer_clean(self):
        return "Sanitizer" not in self.stderr and "runtime error:" not in self.stderr

    def why(self):
        return "exit %d, %s" % (self.rc, self.stderr.strip()[-400:])

    def rows(self):
        return {r["dir"]: r for r in (self.report or {}).get("windows", [])}


# --- what a window holds --------------------------------------------------------------------

def window(root, rel):
    path = os.path.join(root, rel)
    os.makedirs(path)
    return path


def write_trace(win, durations, pid=4242, name="trace.json"):
    """A Chrome trace as the host backend writes it: one ProfilerStep#N "X" span per step,
    steps back to back, an operator inside each, counter tracks beside them. The steps are
    written out of step order, as a merged trace can hold them."""
    events = [{"name": "process_name", "ph": "M", "pid": pid, "tid": pid, "args": {"name": "train.py"}}]
    ts = 1.7e15
    spans = []
    for i, d in enumerate(durations):
        spans.append((i, ts, d))
        ts += d + 10
    for i, start, d in spans[1::2] + spans[0::2]:
        events.append({"name": "ProfilerStep#%d" % (100 + i), "ph": "X", "cat": "step", "ts": start, "dur": d,
                       "pid": pid, "tid": pid, "args": {"step": 100 + i, "cpu_ms": d / 2000}})
        events.append({"name": "aten::mm", "ph": "X", "ts": start + 1, "dur": d / 4, "pid": pid, "tid": pid})
        events.append({"name": "memory", "ph": "C", "ts": start, "pid": pid, "args": {"rss_kib": 1000 + i}})
    with open(os.path.join(win, name), "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)


def write_file(win, name, data):
    with open(os.path.join(win, name), "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def write_manifest(win, rank, start, stop):
    with open(os.path.join(win, "manifest.json"), "w") as f:
        json.dump({"rank": rank, "start_step": start, "stop_step": stop, "outcome": "done"}, f)


def median(durations):
    """The median as documented: the middle one, the mean of the two middle ones for an even count."""
    return statistics.median(durations)


def p90(durations):
    """The nearest-rank 90th percentile: the smallest duration that at least 90% of them do not
    exceed, the ceil(0.9 n)-th smallest (in integers, so that no rounding enters)."""
    d = sorted(durations)
    return d[(9 * len(d) + 9) // 10 - 1]


class Device:
    """One device of a memory snapshot, replayed forwards as it is written: the blocks and
    segments there before the first event, then each event; the peaks are the most bytes
    allocated and reserved at any point (before the first event included)."""

    def __init__(self, device):
        self.device = device
        self.segs = {}          # address: size
        self.blocks = {}        # address: size, all allocated (requested = size)
        self.events = []
        self.allocated = self.reserved = 0
        self.peak_allocated = self.peak_reserved = 0

    def _peaks(self):
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    def _ev(self, action, addr, size):
        self.events.append({"action": action, "addr": addr, "size": size, "stream": 0, "frames": []})

    def there_before(self, seg_addr, seg_size, blocks=()):
        self.segs[seg_addr] = seg_size
        self.reserved += seg_size
        for addr, size in blocks:
            self.blocks[addr] = size
            self.allocated += size
        self._peaks()
        return self

    def segment_alloc(self, addr, size):
        self._ev("segment_alloc", addr, size)
        self.segs[addr] = size
        self.reserved += size
        self._peaks()
        return self

    def segment_free(self, addr):
        size = self.segs.pop(addr)
        self._ev("segment_free", addr, size)
        self.reserved -= size
        self._peaks()
        return self

    def alloc(self, addr, size):
        self._ev("alloc", addr, size)
        self.blocks[addr] = size
        self.allocated += size
        self._peaks()
        return self

    def free(self, addr):
        size = self.blocks.pop(addr)
        self._ev("free_requested", addr, size)
        self.allocated -= size
        self._ev("free_completed", addr, size)
        self._peaks()
        return self

    def segments(self):
        """The state at dump time, as torch's _snapshot() lists it: each segment tiled by its blocks."""
        out = []
        for addr in sorted(self.segs):
            size, at, blocks = self.segs[addr], addr, []
            for b in sorted(a for a in self.blocks if addr <= a < addr + size):
                if b > at:
                    blocks.append({"address": at, "size": b - at, "requested_size": b - at, "state": "inactive",
                                   "frames": []})
                blocks.append({"address": b, "size": self.blocks[b], "requested_size": self.blocks[b],
                               "state": "active_allocated", "frames": []})
                at = b + self.blocks[b]
            if at < addr + size:
                blocks.append({"address": at, "size": addr + size - at, "requested_size": addr + size - at,
                               "state": "inactive", "frames": []})
            alloc = sum(b["size"] for b in blocks if b["state"] != "inactive")
            out.append({"device": self.device, "address": addr, "total_size": size, "stream": 0,
                        "segment_type": "large", "segment_pool_id": [0, 0], "is_expandable": False, "frames": [],
                        "allocated_size": alloc, "active_size": alloc, "requested_size": alloc, "blocks": blocks})
        return out


def snapshot(*devices):
    traces = [[] for _ in range(max(d.device for d in devices) + 1)]
    for d in devices:
        traces[d.device] = d.events
    return {"segments": [s for d in devices for s in d.segments()], "device_traces": traces}


def peaks(*devices):
    """A snapshot's peaks: the most of any one of its devices."""
    return max(d.peak_allocated for d in devices), max(d.peak_reserved for d in devices)


MIB, GIB = 1 << 20, 1 << 30


# --- the walk -----------------------------------------------------------------------------

def test_walk():
    root = os.path.join(tmp, "walk")
    os.mkdir(root)
    # DIR and the directories up to DEPTH_MAX levels below it are searched: a window in d6 is
    # found, one in e7 is not.
    deep_ok = "/".join("d%d" % i for i in range(1, DEPTH_MAX + 1))
    deep_no = "/".join("e%d" % i for i in range(1, DEPTH_MAX + 2))
    found = {                           # path below DIR: (rank, start, stop, step durations)
        "rank0_start1_stop5": (0, 1, 5, [500, 510, 490]),
        "job/rank1_start1_stop5": (1, 1, 5, [700, 600, 650, 640]),
        "job/node3/pp/rank2_start7_stop9": (2, 7, 9, [800]),
        deep_ok + "/rank3_start1_stop5": (3, 1, 5, [300, 310]),
        "job/node4/rank4_start5_stop9.2": (4, 5, 9, [1000, 900, 1100, 1000, 2000]),
    }
    for rel, (rank, start, stop, durs) in found.items():
        win = window(root, rel)
        write_manifest(win, rank, start, stop)
        write_trace(win, durs)
    ignored = [deep_no + "/rank5_start1_stop5", "rank6_start1_for500ms", "rank7_start1_stop5x",
               "xrank8_start1_stop5", "rank9_start1", "rank10-start1-stop5", "job/node3/ranks",
               "job/RANK11_start1_stop5"]
    for rel in ignored:
        write_trace(window(root, rel), [50, 50, 50])
    write_file(os.path.join(root, "job"), "rank12_start1_stop5", "a file, not a directory\n")

    r = Run([root, "-q"], os.path.join(root, "cluster"))
    if not check("walk: exit 0 with report.json in DIR/cluster", r.rc == 0 and r.report is not None and
                 r.sanitizer_clean(), r.why()):
        return
    want = {os.path.join(root, rel): v for rel, v in found.items()}
    rows = r.rows()
    eq("walk: the windows in DIR and in directories up to %d levels below it, no deeper, no other name"
       % DEPTH_MAX,
       sorted(rows), sorted(want))
    check("walk: a window in a directory %d levels below DIR is found" % DEPTH_MAX,
          os.path.join(root, deep_ok, "rank3_start1_stop5") in rows, sorted(rows))
    check("walk: a window in a directory %d levels below DIR is not" % (DEPTH_MAX + 1),
          os.path.join(root, deep_no, "rank5_start1_stop5") not in rows, sorted(rows))
    eq("walk: windows_found", r.report.get("windows_found"), len(want))
    eq("walk: rank, start and stop of each row from its name",
       {d: (x.get("rank"), x.get("start_step"), x.get("stop_step")) for d, x in rows.items()},
       {d: v[:3] for d, v in want.items()})
    eq("walk: rows in rank order", [x["rank"] for x in r.report["windows"]], sorted(v[0] for v in want.values()))
    # Five windows: the median of an odd count of medians is the middle one.
    medians = sorted(median(v[3]) for v in want.values())
    eq("walk: the median of the windows' medians (odd count)", r.report.get("median_step_us"), medians[2])

    # Window directories named one by one, as npuprofd names a generation's: the report is the
    # directory that holds them all's, not the first window's.
    out = os.path.join(tmp, "walk-named")
    named = [os.path.join(root, "job", "rank1_start1_stop5"), os.path.join(root, "job", "node3", "pp", "rank2_start7_stop9"),
             os.path.join(root, "job", "node4", "rank4_start5_stop9.2")]
    r = Run(named + ["-q", "-o", out], out)
    eq("walk: windows named one by one: the report's directory is the one that holds them",
       (r.rc, (r.report or {}).get("dir"), (r.txt or "").split(":")[0]),
       (0, os.path.join(root, "job"), "Cluster " + os.path.join(root, "job")))

    # Without a window: nothing below DIR but what the walk must pass over.
    for rel in found:
        shutil.rmtree(os.path.join(root, rel))
    shutil.rmtree(os.path.join(root, "cluster"))
    r = Run([root, "-q"], os.path.join(root, "cluster"))
    eq("walk: a tree of only non-windows and a window too deep: exit status", r.rc, 1)
    eq("walk: ... the last line on stderr", r.last, "npuprof-replay: %s: %s" % (root, NO_WINDOW))
    check("walk: ... nothing written", not os.path.exists(os.path.join(root, "cluster")),
          "%s exists" % os.path.join(root, "cluster"))

    empty = os.path.join(tmp, "empty")
    os.mkdir(empty)
    r = Run([empty, "--json"], os.path.join(empty, "cluster"))
    eq("empty DIR: exit status", r.rc, 1)
    eq("empty DIR: the last line on stderr says there is no window below DIR", r.last,
       "npuprof-replay: %s: %s" % (empty, NO_WINDOW))
    check("empty DIR: nothing on stdout, nothing written", r.stdout == "" and os.listdir(empty) == [],
          "stdout %r, DIR holds %r" % (r.stdout[:200], os.listdir(empty)))

    missing = os.path.join(tmp, "no-such-dir")
    r = Run([missing, "-q"], os.path.join(missing, "cluster"))
    eq("missing DIR: exit status", r.rc, 1)
    eq("missing DIR: the last line on stderr names DIR, the error and what to give", r.last,
       "npuprof-replay: %s: %s: give the directory the windows are in (the output root, or a job's directory "
       "below it)" % (missing, os.strerror(errno.ENOENT)))
    check("missing DIR: nothing created", not os.path.exists(missing))


def test_no_steps():
    """Windows without any ProfilerStep span: rows without figures, no median, no straggler."""
    root = os.path.join(tmp, "no-steps")
    write_manifest(window(root, "rank0_start1_stop2"), 0, 1, 2)
    write_trace(window(root, "rank1_start1_stop2"), [])
    r = Run([root, "-q"], os.path.join(root, "cluster"))
    if not check("no steps: exit 0 with a report", r.rc == 0 and r.report is not None, r.why()):
        return
    eq("no steps: median and threshold null, no straggler",
       (r.report.get("median_step_us", 0), r.report.get("threshold_us", 0), r.report.get("stragglers")),
       (None, None, []))
    # A window with a trace without steps is a row without figures; one with nothing to read
    # (a rank killed before it wrote any) says so.
    eq("no steps: rows without figures; the window with nothing to read says so",
       [(sorted(k for k in x if k in ("steps", "step_median_us")), x.get("error")) for x in r.report["windows"]],
       [([], "no readable trace or snapshot in the window"), ([], None)])
    check("no steps: report.txt gives the reason of the window with nothing to read",
          "error: no readable trace or snapshot in the window" in (r.txt or ""), r.txt)
    check("no steps: report.txt says there is no step", "no ProfilerStep spans in any trace" in (r.txt or ""),
          r.txt)


# --- the figures and the stragglers ---------------------------------------------------------

def mib_text(v):
    """Bytes as the report writes them: "1003.0 KiB", a tenth, the unit moving up at 1023.95."""
    units, i = ["B", "KiB", "MiB", "GiB", "TiB"], 0
    if v < 1024:
        return "%d B" % v
    while v / 1024 ** i >= 1023.95:
        i += 1
    return "%.1f %s" % (v / 1024 ** i, units[i])


def us_text(us):
    """A step time in report.txt: seconds, milliseconds or microseconds."""
    if us >= 1e6:
        return "%.2f s" % (us / 1e6)
    if us >= 1e3:
        return "%.2f ms" % (us / 1e3)
    return "%.1f us" % us


def txt_rows(txt, dirs):
    """{dir: (fields before it, what follows it)} from report.txt's table; a row ends with its
    window's directory, then "  STRAGGLER" and/or "  error: ..."."""
    out = {}
    for line in (txt or "").splitlines():
        for d in dirs:
            at = line.find("  " + d)
            rest = line[at + 2 + len(d):] if at >= 0 else None
            if rest is not None and (rest == "" or rest.startswith("  ")):
                out[d] = (line[:at], rest)
    return out


def test_figures():
    root = os.path.join(tmp, "fig")
    # Path below DIR: (rank, start, stop, step durations in trace order). Medians 990, 1010, 950,
    # 980, 1100, 1105, 995 and 1005: their median is 1000 (an even count), so the window at
    # 1100 is exactly at +10% and the one at 1105 is at +10.5%.
    traced = {
        "job/node0/rank0_start10_stop15": (0, 10, 15, [990, 1400, 985.5, 995, 970.25]),
        "job/node0/rank0_start10_stop15.1": (0, 10, 15, [995]),
        "job/node0/rank1_start10_stop15": (1, 10, 15, [1005, 1600, 900, 1013, 1250, 950, 1030, 1007, 1000, 1020]),
        "job/node1/rank2_start10_stop15": (2, 10, 15, [954.5, 2000, 940, 945.5]),
        "job/node1/rank3_start10_stop15": (3, 10, 15, [1300, 960, 970, 975, 980, 985, 990]),
        "job/node2/rank4_start10_stop15": (4, 10, 15, [1110, 1100, 1090]),
        "job/node2/rank5_start10_stop15": (5, 10, 15, [1300, 1000, 1106, 1104, 1200, 1100]),
        "job/node3/rank7_start10_stop15": (7, 10, 15, [1010, 1000]),
    }
    windows = {}        # dir: everything the row must say
    for rel, (rank, start, stop, durs) in traced.items():
        win = window(root, rel)
        write_manifest(win, rank, start, stop)
        write_trace(win, durs)
        # write_trace() samples the process's resident memory at each step: 1000 KiB, 1001 KiB...
        windows[win] = dict(rank=rank, start=start, stop=stop, steps=len(durs), median=median(durs),
                            p90=p90(durs), max=max(durs), peak=None, error=None, rss=(1000 + len(durs) - 1) * 1024)

    # Snapshots. rank 0: one device, a block there before the trace, the peak mid-trace.
    d = Device(0).there_before(0x10000000, 2 * GIB, [(0x10000000, 300 * MIB)])
    d.alloc(0x30000000, 700 * MIB).segment_alloc(0x200000000, GIB).alloc(0x200000000, 900 * MIB)
    d.free(0x30000000).free(0x200000000).segment_free(0x200000000).alloc(0x40000000, 100 * MIB)
    w = os.path.join(root, "job/node0/rank0_start10_stop15")
    write_file(w, "memory_snapshot.json", json.dumps(snapshot(d)))
    windows[w]["peak"] = peaks(d)
    # rank 1: two devices, the reserved peak on one and the allocated peak on the other.
    d0 = Device(0).segment_alloc(0x1000000, 8 * GIB).alloc(0x1000000, 3 * GIB).alloc(0xd1000000, GIB)
    d0.free(0x1000000)
    d1 = Device(1).segment_alloc(0x900000000, 6 * GIB).alloc(0x900000000, 5 * GIB + 12345)
    d1.segment_alloc(0xa00000000, 512 * MIB).segment_free(0xa00000000)
    w = os.path.join(root, "job/node0/rank1_start10_stop15")
    write_file(w, "memory_snapshot.json", json.dumps(snapshot(d0, d1)))
    windows[w]["peak"] = peaks(d0, d1)
    # rank 5: a pickle, as torch_npu's _dump_snapshot writes it; the peak before the first event.
    d = Device(0).there_before(0x5000000, 4 * GIB, [(0x5000000, GIB), (0x45000000, 2 * GIB)])
    d.free(0x45000000).free(0x5000000).segment_free(0x5000000).segment_alloc(0x7000000, 2 * GIB)
    d.alloc(0x7000000, 1536 * MIB)
    w = os.path.join(root, "job/node2/rank5_start10_stop15")
    write_file(w, "memory_snapshot.pkl", pickle.dumps(snapshot(d), protocol=4))
    windows[w]["peak"] = peaks(d)
    # rank 6: a snapshot and no trace.
    d = Device(0).segment_alloc(0x1000000, 64 * MIB).alloc(0x1000000, 40 * MIB).alloc(0x3800000, 8 * MIB)
    d.free(0x1000000).segment_alloc(0x8000000, 32 * MIB)
    w = window(root, "job/node3/rank6_start10_stop15")
    write_manifest(w, 6, 10, 15)
    write_file(w, "memory_snapshot.json", json.dumps(snapshot(d)))
    windows[w] = dict(rank=6, start=10, stop=15, steps=None, peak=peaks(d), error=None, rss=None)
    # rank 8: a trace.json broken in its middle; rank 9: a memory_snapshot.json broken in its middle.
    w = window(root, "job/node4/rank8_start10_stop15")
    write_manifest(w, 8, 10, 15)
    write_file(w, "trace.json", '{"traceEvents": [{"name": "ProfilerStep#1", "ph": "X", "ts": 0, "dur": 5000, '
                                '"pid": 1, "tid": 1}, {"name": "ProfilerStep#2", "ph": "X", "ts": 5000, "dur": }, '
                                '{"name": "ProfilerStep#3", "ph": "X", "ts": 10000, "dur": 5000, "pid": 1, "tid": 1}]}')
    windows[w] = dict(rank=8, start=10, stop=15, steps=None, peak=None, error="trace.json", rss=None)
    w = window(root, "job/node4/rank9_start10_stop15")
    write_manifest(w, 9, 10, 15)
    good = json.dumps(snapshot(Device(0).segment_alloc(0x1000, 4096).alloc(0x1000, 4096)))
    write_file(w, "memory_snapshot.json", good[:len(good) // 2] + "}}}" + good[len(good) // 2:])
    windows[w] = dict(rank=9, start=10, stop=15, steps=None, peak=None, error="memory_snapshot.json", rss=None)

    # What the report must say, from the rules.
    medians = sorted(Fraction(v["median"]) for v in windows.values() if v["steps"])
    n = len(medians)
    mom = medians[n // 2] if n % 2 else (medians[n // 2 - 1] + medians[n // 2]) / 2
    slow = {dr for dr, v in windows.items() if v["steps"] and Fraction(v["median"]) > mom * STRAGGLER}
    at_edge = {dr for dr, v in windows.items() if v["steps"] and Fraction(v["median"]) == mom * STRAGGLER}
    just_over = {dr for dr, v in windows.items() if v["steps"] and Fraction(v["median"]) == mom * Fraction(1105, 1000)}
    # The data must hold the cases it is meant to: an even count, a window at +10%, one at +10.5%.
    check("figures: the windows hold an even count of medians, one at exactly +10% and one at +10.5%",
          n % 2 == 0 and len(at_edge) == 1 and len(just_over) == 1 and just_over <= slow and not at_edge & slow,
          "n %d, at +10%% %r, at +10.5%% %r" % (n, at_edge, just_over))

    r = Run([root, "-q"], os.path.join(root, "cluster"))
    if not check("figures: exit 0 with report.json, report.txt and ranks.svg in DIR/cluster",
                 r.rc == 0 and r.report is not None and r.txt is not None and r.svg is not None and
                 r.sanitizer_clean(), r.why()):
        return
    rep, rows = r.report, r.rows()
    eq("figures: every window has a row", sorted(rows), sorted(windows))
    eq("figures: kind, windows_found", (rep.get("kind"), rep.get("windows_found")), ("cluster", len(windows)))
    eq("figures: rank, start and stop of each row",
       {dr: (x.get("rank"), x.get("start_step"), x.get("stop_step")) for dr, x in rows.items()},
       {dr: (v["rank"], v["start"], v["stop"]) for dr, v in windows.items()})
    eq("figures: rows in rank order, then start step, then directory",
       [x["dir"] for x in rep["windows"]],
       sorted(windows, key=lambda dr: (windows[dr]["rank"], windows[dr]["start"], dr)))
    eq("figures: steps of each row", {dr: x.get("steps") for dr, x in rows.items()},
       {dr: v["steps"] for dr, v in windows.items()})
    eq("figures: median step time of each row (the mean of the two middle ones for an even count)",
       {dr: x.get("step_median_us") for dr, x in rows.items()},
       {dr: v["median"] if v["steps"] else None for dr, v in windows.items()})
    eq("figures: p90 step time of each row (nearest rank)", {dr: x.get("step_p90_us") for dr, x in rows.items()},
       {dr: v["p90"] if v["steps"] else None for dr, v in windows.items()})
    eq("figures: longest step of each row", {dr: x.get("step_max_us") for dr, x in rows.items()},
       {dr: v["max"] if v["steps"] else None for dr, v in windows.items()})
    eq("figures: peak resident memory of each row whose trace sampled it",
       {dr: x.get("peak_rss") for dr, x in rows.items()}, {dr: v["rss"] for dr, v in windows.items()})
    eq("figures: peak allocated and reserved bytes of each row (the most of any device, before the first "
       "event included)", {dr: (x.get("peak_allocated"), x.get("peak_reserved")) for dr, x in rows.items()},
       {dr: v["peak"] or (None, None) for dr, v in windows.items()})
    eq("figures: median of the windows' medians (even count)", rep.get("median_step_us"), float(mom))
    check("figures: the threshold is 110% of it", rep.get("threshold_us") is not None and
          math.isclose(rep["threshold_us"], float(mom * STRAGGLER), rel_tol=1e-12), repr(rep.get("threshold_us")))
    eq("figures: straggler_factor", rep.get("straggler_factor"), float(STRAGGLER))

    # The stragglers.
    eq("stragglers: the rows marked straggler", sorted(dr for dr, x in rows.items() if x.get("straggler") is True),
       sorted(slow))
    eq("stragglers: every other row says straggler false",
       sorted(dr for dr, x in rows.items() if x.get("straggler") is False), sorted(set(windows) - slow))
    eq("stragglers: the list (rank, dir)", sorted((s.get("rank"), s.get("dir")) for s in rep.get("stragglers", [])),
       sorted((windows[dr]["rank"], dr) for dr in slow))
    check("stragglers: the window at exactly +10% is not one", not at_edge & set(
        s.get("dir") for s in rep.get("stragglers", [])), rep.get("stragglers"))
    check("stragglers: the window at +10.5% is one", just_over <= set(s.get("dir") for s in rep.get("stragglers", [])),
          rep.get("stragglers"))
    bad = [s for s in rep.get("stragglers", []) if not math.isclose(
        s.get("over_median", 0), float(Fraction(windows[s["dir"]]["median"]) / mom), rel_tol=1e-9)]
    check("stragglers: over_median is each one's median over the median of medians", not bad, repr(bad))

    # The rows that cannot be read.
    for dr, v in windows.items():
        if not v["error"]:
            continue
        x = rows.get(dr, {})
        what = "error: %s broken in its middle" % v["error"]
        check("%s: the row has an error naming the file" % what,
              isinstance(x.get("error"), str) and x["error"].startswith(v["error"] + ":"), repr(x.get("error")))
        eq("%s: and no figures" % what, sorted(k for k in x if k.startswith(("step", "peak"))), [])
    eq("error: no other row has one", sorted(dr for dr, x in rows.items() if "error" in x),
       sorted(dr for dr, v in windows.items() if v["error"]))

    # report.txt: a row per window, the stragglers and the errors marked.
    txt = txt_rows(r.txt, windows)
    eq("report.txt: a row per window", sorted(txt), sorted(windows))
    eq("report.txt: the rows marked STRAGGLER", sorted(dr for dr, (_, rest) in txt.items() if "  STRAGGLER" in rest),
       sorted(slow))
    eq("report.txt: the rows with an error", sorted(dr for dr, (_, rest) in txt.items() if "  error: " in rest),
       sorted(dr for dr, v in windows.items() if v["error"]))
    want = {dr: [str(v["rank"])] + ([str(v["steps"]), us_text(v["median"]), us_text(v["p90"])] if v["steps"] else
                                    ["-", "-"]) for dr, v in windows.items()}
    got = {}
    for dr, (cells, _) in txt.items():
        f = cells.split()
        # rank, steps, median "N unit", p90 "N unit" (or "-" each), then the two byte columns.
        got[dr] = [f[0], f[1], " ".join(f[2:4]), " ".join(f[4:6])] if windows[dr]["steps"] else \
            [f[0]] + [c for c in f[2:4]]
    eq("report.txt: rank, steps, median and p90 of each row", got, want)
    eq("report.txt: peak columns are \"-\" exactly for the rows without a snapshot read or a resident memory",
       sorted(dr for dr, (cells, _) in txt.items() if cells.split()[-2:] == ["-", "-"]),
       sorted(dr for dr, v in windows.items() if not v["peak"] and not v["rss"]))
    eq("report.txt: a host window with no snapshot gives its process's peak resident memory",
       sorted(dr for dr, (cells, _) in txt.items()
              if windows[dr]["rss"] and cells.split()[-4:] == mib_text(windows[dr]["rss"]).split() + ["rss", "-"]),
       sorted(dr for dr, v in windows.items() if not v["peak"] and v["rss"]))
    head = (r.txt or "").splitlines()[0] if r.txt else ""
    check("report.txt: the first line counts the windows and the stragglers",
          head.startswith("Cluster %s: %d window(s); median step %s, stragglers above " % (root, len(windows), us_text(
              float(mom)))) and head.endswith("(+10%%): %d" % len(slow)), head)

    # ranks.svg: well-formed, a step bar per window with steps, a peak bar per window with a
    # snapshot, titled with its rank; the stragglers' step bars marked.
    try:
        svg = ET.fromstring(r.svg)
    except ET.ParseError as e:
        check("ranks.svg: well-formed XML", False, str(e))
        return
    check("ranks.svg: well-formed XML, an <svg> document", svg.tag.rsplit("}", 1)[-1] == "svg", svg.tag)
    rects = {e.get("id"): e for e in svg.iter() if e.tag.rsplit("}", 1)[-1] == "rect" and e.get("id")}
    titles = {k: "".join(t.text or "" for t in e if t.tag.rsplit("}", 1)[-1] == "title") for k, e in rects.items()}
    order = [x["dir"] for x in rep["windows"]]
    eq("ranks.svg: a step-time bar for each window with steps, titled with its rank",
       sorted((k, titles[k].split(":")[0]) for k in rects if k.startswith("step-")),
       sorted(("step-%d" % i, "rank %d" % windows[dr]["rank"]) for i, dr in enumerate(order) if windows[dr]["steps"]))
    eq("ranks.svg: a peak-memory bar for each window with a snapshot or a resident memory, titled with its rank",
       sorted((k, titles[k].split(":")[0]) for k in rects if k.startswith("peak-")),
       sorted(("peak-%d" % i, "rank %d" % windows[dr]["rank"]) for i, dr in enumerate(order)
              if windows[dr]["peak"] or windows[dr]["rss"]))
    eq("ranks.svg: the stragglers' bars are marked",
       sorted(k for k, e in rects.items() if k.startswith("step-") and "straggler" in (e.get("class") or "").split()),
       sorted("step-%d" % i for i, dr in enumerate(order) if dr in slow))
    labels = {"".join(e.itertext()) for e in svg.iter() if e.tag.rsplit("}", 1)[-1] == "text"}
    missing = sorted(v["rank"] for v in windows.values() if str(v["rank"]) not in labels)
    check("ranks.svg: names each rank, those without a bar included", not missing,
          "ranks %r are not the text of any <text>" % missing)

    # Each straggler's bar says how far above the median it is, to a tenth rounded up below
    # +20%: +10.5% or +10.04% must not read as +10%, the threshold it exceeds.
    def over(dr):
        x = (windows[dr]["median"] / float(mom) - 1) * 100
        x = math.ceil(x * 10 - 1e-9) / 10 if x < 20 else x
        t = "%.*f" % (1 if x < 20 else 0, x)
        return "+" + (t.rstrip("0").rstrip(".") if "." in t else t) + "%"
    eq("ranks.svg: each straggler's label, how far above the median",
       sorted(lab.split()[-1] for lab in labels if lab.endswith("%") and lab.split()[-1].startswith("+")),
       sorted(over(dr) for dr in slow))

    # --json and -o: the same report, printed and written elsewhere.
    out = os.path.join(tmp, "fig-out")
    j = Run([root, "--json", "-q", "-o", out], out)
    if check("--json -o OUTDIR: exit 0 with report.json in OUTDIR", j.rc == 0 and j.report is not None, j.why()):
        try:
            printed = json.loads(j.stdout)
        except ValueError as e:
            printed = "not JSON: %s" % e
        eq("--json: stdout is report.json", printed, j.report)
        eq("--json: the same report as without it", j.report, rep)
        check("-o: report.txt and ranks.svg in OUTDIR too", j.txt is not None and j.svg is not None)
    check("report.json is valid JSON", r.json_error is None and j.json_error is None, r.json_error or j.json_error)


def main():
    if not os.access(REPLAY, os.X_OK):
        print("test-cluster: %s is not built" % REPLAY, file=sys.stderr)
        print("cluster: 0 passed, 1 failed")
        return 1
    try:
        npftest.run_tests((test_walk, test_no_steps, test_figures))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return npftest.summary("cluster")


if __name__ == "__main__":
    sys.exit(main())
