#!/usr/bin/env python3
"""npuprof-replay's snapshot replay, through the real program.

    tests/test-replay.py BUILD_DIR

The five real torch_npu snapshots in ../shared/testdata/torch_npu_snapshots/ are replayed by
the program and by a reference replay written here from the rules in replay/replay.h (the
state at dump time, each action undone from the newest event to the oldest); the event
counts, peaks, start and dump states and every row of timeline.csv must agree. Synthetic
snapshots, written here as pickles of protocols 2 to 5 and as JSON, pin each action's undo,
expandable-segment splitting and merging, torch_npu's workspace triples, inconsistencies,
ghost blocks, leaks, the legacy list of segments, times, free delays, the static plan, the
per-stream totals, the top call sites, the free space and the live blocks at the allocated peak
to numbers worked out by hand; the reference replay checks the last three on the real
snapshots too. Progress lines are forced with NPF_REPLAY_PROGRESS_AFTER_MS=0. Hostile and broken inputs must fail
with exit status 1 and a clear last line on stderr.

Ends with "replay: N passed, N failed"; exits 1 when a check failed.
"""
import csv
import datetime
import glob
import io
import json
import os
import pickle
import pickletools
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import traceback

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
REPLAY = os.path.join(BUILD, "npuprof-replay")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.environ.get("NPF_TESTDATA",
                          os.path.join(ROOT, "..", "shared", "testdata", "torch_npu_snapshots"))
REAL = [
    ("one device", "snapshot_1768383987920985470.pkl"),
    ("expandable segments", "snapshot_expandable.pkl"),
    ("empty_cache", "snapshot_with_empty_cache.pkl"),
    ("expandable segments and empty_cache", "snapshot_with_empty_cache_expandable.pkl"),
    ("two devices", "snapshot_with_multi_devices.pkl"),
]
ACTIONS = {"alloc", "free_requested", "free_completed", "free", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "snapshot", "workspace_snapshot"}
MASK = (1 << 64) - 1
# A sanitizer's report must not look like the program's own exit status 1.
ENV = dict(os.environ,
           ASAN_OPTIONS="exitcode=86:" + os.environ.get("ASAN_OPTIONS", ""),
           UBSAN_OPTIONS="halt_on_error=1:exitcode=87:" + os.environ.get("UBSAN_OPTIONS", ""))

passed = failed = skipped = 0
tmp = tempfile.mkdtemp(prefix="test-replay.")


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL: %s%s" % (what, ": " + detail if detail else ""), flush=True)
    return ok


def eq(what, got, want):
    return check(got == want, what, "got %r, want %r" % (got, want))


# --- the reference replay -------------------------------------------------------------------

BEFORE, AFTER = -1, float("inf")     # a life that began before the first event, or had not ended at dump


def stack_key(frames):
    """A call stack as a hashable key: () when none was recorded."""
    return tuple((f.get("name", ""), f["filename"], f["line"]) for f in frames or ())


def is_frame(x):
    return isinstance(x, dict) and "filename" in x and "line" in x and not isinstance(x.get("action"), str)


def stack_ids(snap):
    """Each distinct stack's rank of first appearance in the document, read in order (a
    snapshot's keys in their order, segments before device_traces in torch's): the order in
    which a reader meets them, which breaks ties between equally ranked sites. () is 0."""
    ids = {(): 0}

    def walk(x):
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            if x and all(is_frame(f) for f in x):
                ids.setdefault(stack_key(x), len(ids))
            else:
                for v in x:
                    walk(v)
    walk(snap)
    return ids


class Block:
    """A block's life. pending once its free was requested; leak while it is the block that
    was allocated at dump time; freed_at, the event that freed it (None: live at dump);
    alloc, the event that allocated it (BEFORE: a ghost); req, the event that requested its
    free (AFTER: still allocated at dump; BEFORE: pending before the first event); foot, the
    bytes it takes in its segment (the allocator's rounding included, where known); stack,
    where it was allocated: the alloc event's frames, else the block's at dump time; a
    block known only from its free event has no known allocation site (()), since that
    event's frames say where it was freed."""
    __slots__ = ("addr", "size", "pending", "leak", "freed_at", "alloc", "req", "foot", "stack", "stream")

    def __init__(self, addr, size, pending, leak, freed_at=None, foot=None, stack=(), stream=0):
        self.addr, self.size, self.pending, self.leak, self.freed_at = addr, size, pending, leak, freed_at
        self.alloc = BEFORE
        self.req = BEFORE if pending else (AFTER if freed_at is None else freed_at)
        self.foot = size if foot is None else foot
        self.stack, self.stream = stack, stream


def round_npu(size):
    return (size + 32 + 511) // 512 * 512


def round_pt(size):
    return 512 if size < 512 else (size + 511) // 512 * 512


def rounding(snap):
    """(rule, live blocks, obeying): the rule most of the snapshot's live blocks obey,
    torch_npu's where as many obey both, None where none obeys either."""
    segments = snap if isinstance(snap, list) else snap.get("segments", [])
    blocks = [b for seg in segments for b in seg.get("blocks", []) if b["state"] != "inactive"]
    npu = sum(1 for b in blocks if b["size"] == round_npu(b.get("requested_size", b["size"])))
    pt = sum(1 for b in blocks if b["size"] == round_pt(b.get("requested_size", b["size"])))
    rule = None if npu == pt == 0 else "torch_npu" if npu >= pt else "pytorch"
    return rule, len(blocks), max(npu, pt)


class Ref:
    """One device's allocator state, from dump time back to before the first event.

    allocated and active count blocks by their size (the footprint: read at dump time, or
    by the snapshot's rounding rule for a block re-created by undoing its free); requested
    counts the requested sizes of the allocated ones. Segments are {address: [size, stream]}.
    An undone event that does not fit the state is an issue (event index, action, address).
    """

    def __init__(self, snap, device, capture=None):
        """@capture: an event index whose state (after it; -1: before the first event) is
        kept in self.captured as (segments, [(addr, footprint)] of the live blocks)."""
        legacy = isinstance(snap, list)
        traces = [] if legacy else snap.get("device_traces", [])
        self.snap, self.device = snap, device
        self.events = traces[device] if 0 <= device < len(traces) else []
        self.segs, self.blocks = {}, {}
        self.lives = []                 # every Block, in the order they were met
        self.stack_ids = stack_ids(snap)
        self.captured = None
        self.rule = rounding(snap)[0]
        self.inferred = self.unsized = 0
        self.allocated = self.requested = self.active = self.active_requested = self.reserved = self.live = 0
        self.issues, self.delays = [], []
        self.leaks = [0, 0]
        self.workspace = [0, 0]
        self.pending_at_dump = 0
        for seg in snap if legacy else snap.get("segments", []):
            if seg.get("device", 0) != device:
                continue
            if not self.add_segment(seg["address"], seg["total_size"], seg.get("stream", 0), False):
                self.issues.append((None, "snapshot", seg["address"]))
            at = seg["address"]
            for b in seg.get("blocks", []):
                addr = b.get("address", at)     # an address, or the end of the block before
                at = addr + b["size"]
                frames = b.get("frames") or (b["history"][-1].get("frames") if b.get("history") else None)
                if b["state"] != "inactive":
                    self.add_block(addr, b.get("requested_size", b["size"]),
                                   b["state"] == "active_pending_free", b["state"] == "active_allocated",
                                   foot=b["size"], stack=stack_key(frames), stream=seg.get("stream", 0))
        self.add_workspace()
        self.dump = dict(allocated=self.allocated, requested=self.requested, active=self.active,
                         active_requested=self.active_requested, reserved=self.reserved, segments=len(self.segs))
        n = len(self.events)
        self.after = [None] * n         # (allocated, requested, active, reserved) after each event
        self.n_segs = [0] * n           # segments after each event
        self.n_live = [0] * n           # allocated blocks after each event
        for i in range(n - 1, -1, -1):
            self.after[i] = (self.allocated, self.requested, self.active, self.reserved)
            self.n_segs[i], self.n_live[i] = len(self.segs), self.live
            if i == capture:
                self.capture()
            self.undo(i, self.events[i])
        if capture == -1:
            self.capture()
        self.start = dict(allocated=self.allocated, requested=self.requested, active=self.active,
                          active_requested=self.active_requested, reserved=self.reserved)
        self.start_segs, self.start_live = len(self.segs), self.live
        self.ghosts = (len(self.blocks), sum(b.size for b in self.blocks.values()))

    def capture(self):
        self.captured = ({a: s for a, (s, _) in self.segs.items()},
                         [(a, b.foot) for a, b in self.blocks.items()])

    def add_block(self, addr, size, pending, leak, freed_at=None, **life):
        if addr in self.blocks:
            return False
        self.blocks[addr] = b = Block(addr, size, pending, leak, freed_at, **life)
        self.lives.append(b)
        self.active += b.foot
        self.active_requested += size
        if not pending:
            self.allocated += b.foot
            self.requested += size
            self.live += 1
        return True

    def add_segment(self, addr, size, stream, merge):
        if any(a < addr + size and addr < a + s for a, (s, _) in self.segs.items()):
            return False
        self.reserved += size
        if merge:
            right = self.segs.get(addr + size)
            if right and right[1] == stream:
                del self.segs[addr + size]
                size += right[0]
            left = next((a for a, (s, st) in self.segs.items() if a + s == addr and st == stream), None)
            if left is not None:
                self.segs[left][0] += size
                return True
        self.segs[addr] = [size, stream]
        return True

    def add_workspace(self):
        ev, i = self.events, 0
        while i + 3 <= len(ev) and [e["action"] for e in ev[i:i + 3]] == \
                ["workspace_snapshot", "segment_alloc", "alloc"]:
            sa, a = ev[i + 1], ev[i + 2]
            if sa["addr"] not in self.segs and self.add_segment(sa["addr"], sa["size"], sa.get("stream", 0), False):
                self.workspace[0] += 1
                self.workspace[1] += sa["size"]
            self.add_block(a["addr"], sa["size"], False, True, stack=stack_key(a.get("frames")),
                           stream=sa.get("stream", 0))
            i += 3

    def undo(self, i, e):
        act, addr, size = e["action"], e.get("addr", 0), e.get("size", 0)
        b = self.blocks.get(addr)
        if act == "alloc":
            if b is None or b.pending:
                return self.issues.append((i, act, addr))
            del self.blocks[addr]
            b.alloc = i
            if e.get("frames"):
                b.stack = stack_key(e["frames"])
            self.allocated -= b.foot
            self.requested -= b.size
            self.active -= b.foot
            self.active_requested -= b.size
            self.live -= 1
            if b.leak:
                self.leaks[0] += 1
                self.leaks[1] += b.foot
            if size != b.size:
                self.issues.append((i, act, addr))
        elif act == "free_requested":
            if b is None or not b.pending:
                return self.issues.append((i, act, addr))
            b.pending = False
            b.req = i
            self.allocated += b.foot
            self.requested += b.size
            self.live += 1
            if b.freed_at is None:
                self.pending_at_dump += 1
            elif self.events[b.freed_at]["action"] == "free_completed":
                self.delays.append(b.freed_at - i)
        elif act in ("free_completed", "free"):
            foot = round_npu(size) if self.rule == "torch_npu" else round_pt(size) if self.rule == "pytorch" else size
            if not self.add_block(addr, size, act == "free_completed", False, i, foot=foot, stream=e.get("stream", 0)):
                self.issues.append((i, act, addr))
            elif self.rule is None:
                self.unsized += 1
            else:
                self.inferred += 1
        elif act in ("segment_free", "segment_unmap"):
            if not self.add_segment(addr, size, e.get("stream", 0), act == "segment_unmap"):
                self.issues.append((i, act, addr))
        elif act == "segment_alloc":
            if addr not in self.segs:
                return self.issues.append((i, act, addr))
            self.reserved -= self.segs.pop(addr)[0]
        elif act == "segment_map":
            for a, (s, st) in self.segs.items():
                if a <= addr and addr + size <= a + s:
                    break
            else:
                return self.issues.append((i, act, addr))
            del self.segs[a]
            if addr > a:
                self.segs[a] = [addr - a, st]
            if addr + size < a + s:
                self.segs[addr + size] = [a + s - addr - size, st]
            self.reserved -= size

    def lifetime(self, b):
        """The events after which @b was allocated: from its alloc (the first event, for a ghost)
        up to, not including, the event that requested its free (the dump, if none did)."""
        end = len(self.events) if b.req == AFTER else b.req
        return max(0, end - max(b.alloc, 0))

    def top_sites(self, top=20):
        """[(count, bytes, byte_events, stack)]: every life grouped by where it was allocated,
        the most bytes x events alive first, ties in the order the stacks first appear."""
        sites = {}
        for b in self.lives:
            x = sites.setdefault(b.stack, [0, 0, 0])
            x[0] += 1
            x[1] += b.size
            x[2] += b.size * self.lifetime(b)
        order = sorted(sites, key=lambda k: (-sites[k][2], self.stack_ids[k]))
        return [tuple(sites[k]) + (k,) for k in order[:top]]

    def live_at(self, at, top=20):
        """(count, bytes, [(addr, size, allocated_at, free_requested_at, stack)]): the blocks
        allocated just after event @at (None: before the first), largest first, then by address."""
        at = -1 if at is None else at
        live = [b for b in self.lives if b.alloc <= at < b.req]
        live.sort(key=lambda b: (-b.size, b.addr))
        return (len(live), sum(b.foot for b in live),
                [(b.addr, b.size, None if b.alloc == BEFORE else b.alloc,
                  None if b.req in (BEFORE, AFTER) else b.req, b.stack) for b in live[:top]])

    def fragmentation(self):
        """(free_bytes, largest_free) of the captured state: each segment less the footprints of
        the live (allocated or pending-free) blocks in it."""
        segs, blocks = self.captured
        free, largest = 0, 0
        for start, size in segs.items():
            end = start + size
            taken = sorted((max(a, start), min(a + f, end)) for a, f in blocks if a < end and a + f > start)
            holes, at = [], start
            for lo, hi in taken:
                if lo > at:
                    holes.append(lo - at)
                at = max(at, hi)
            if end > at:
                holes.append(end - at)
            free += sum(holes)
            largest = max([largest] + holes)
        return free, largest

    def at_peak(self):
        """This device replayed again, keeping the state at the allocated peak."""
        at = self.peak("allocated")[1]
        return Ref(self.snap, self.device, capture=-1 if at is None else at)

    def series(self, k):
        return [self.start[k]] + [v[("allocated", "requested", "active", "reserved").index(k)] for v in self.after]

    def peak(self, k):
        """(bytes, index): the first event reaching the maximum, None before the first event."""
        s = self.series(k)
        m = max(s)
        at = s.index(m)
        return m, (None if at == 0 else at - 1)

    def rows(self):
        out = []
        for i, e in enumerate(self.events):
            act = e["action"] if e["action"] in ACTIONS else "unknown"
            addr = e.get("device_free", e.get("addr", 0)) if act == "oom" else e.get("addr", 0)
            t = e.get("time_us")
            out.append([str(self.device), str(i), act, "0x%x" % (addr & MASK), str(e.get("size", 0)),
                        "0x%x" % (e.get("stream", 0) & MASK)] + [str(v) for v in self.after[i]] +
                       ["" if t is None else str(int(t))])
        return out


def devices_of(snap):
    if isinstance(snap, list):
        return sorted({s.get("device", 0) for s in snap})
    traces = snap.get("device_traces", [])
    return sorted({d for d, t in enumerate(traces) if t} | {s.get("device", 0) for s in snap.get("segments", [])})


# --- running the program ------------------------------------------------------------------

class Run:
    def __init__(self, args, outdir, env=None):
        p = subprocess.run([REPLAY] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env or ENV, timeout=120)
        self.rc, self.stdout, self.stderr = p.returncode, p.stdout.decode(errors="replace"), \
            p.stderr.decode(errors="replace")
        self.outdir = outdir
        lines = self.stderr.strip().splitlines()
        self.last = lines[-1] if lines else ""
        # The message without the paths it names, which could hold any word.
        self.said = self.last
        for a in args:
            if "/" in a:
                self.said = self.said.replace(a, "PATH")
        self.report = self.txt = None
        self.rows = []
        self.json_error = None
        if outdir and os.path.exists(os.path.join(outdir, "report.json")):
            try:
                with open(os.path.join(outdir, "report.json")) as f:
                    self.report = json.load(f)
            except ValueError as e:
                self.json_error = str(e)
            with open(os.path.join(outdir, "report.txt")) as f:
                self.txt = f.read()
        if outdir and os.path.exists(os.path.join(outdir, "timeline.csv")):
            with open(os.path.join(outdir, "timeline.csv"), newline="") as f:
                self.rows = list(csv.reader(f))

    def devices(self, snapshot=0):
        return self.report["snapshots"][snapshot]["devices"]

    def timeline(self, device):
        return [r for r in self.rows[1:] if r[0] == str(device)]

    def sanitizer_clean(self):
        return "Sanitizer" not in self.stderr and "runtime error:" not in self.stderr


counter = [0]


def run(path, *args, outdir=None):
    if outdir is None:
        counter[0] += 1
        outdir = os.path.join(tmp, "out-%d" % counter[0])
    return Run([path, "-q", "-o", outdir] + list(args), outdir)


def write(name, data):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def analyse(name, snap, proto, *args):
    """Run the program on @snap as a pickle of @proto and as JSON; the two must agree."""
    r = run(write(name + ".pkl", pickle.dumps(snap, protocol=proto)), *args)
    j = run(write(name + ".json", json.dumps(snap).encode()), *args)
    ok = r.rc == 0 and r.report is not None and r.sanitizer_clean()
    check(ok, "%s (pickle protocol %d): exit 0 with a report" % (name, proto),
          "exit %d, %s" % (r.rc, r.stderr.strip()[-400:]))
    if not ok:
        return None
    if check(j.rc == 0 and j.report is not None and j.sanitizer_clean(), "%s (JSON): exit 0 with a report" % name,
             "exit %d, %s" % (j.rc, j.stderr.strip()[-400:])):
        eq("%s: the JSON form gives the same report as the pickle" % name, j.devices(), r.devices())
        eq("%s: the JSON form gives the same timeline as the pickle" % name, j.rows, r.rows)
        eq("%s: the JSON form is said to be JSON" % name, j.report["snapshots"][0]["format"], "json")
    eq("%s: the pickle is said to be a pickle" % name, r.report["snapshots"][0]["format"], "pickle")
    return r


def timeline_vals(run_, device=0):
    """[(action, allocated, active, reserved)] of timeline.csv: the allocator's bytes."""
    return [(row[2], int(row[6]), int(row[8]), int(row[9])) for row in run_.timeline(device)]


def requested_vals(run_, device=0):
    """The requested column of timeline.csv: what the program asked of the allocated blocks."""
    return [int(row[7]) for row in run_.timeline(device)]


def ref_vals(ref):
    """The reference replay's rows as timeline_vals() gives them."""
    return [(e["action"] if e["action"] in ACTIONS else "unknown", a[0], a[2], a[3]) for e, a in zip(ref.events, ref.after)]


def first_diff(got, want):
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return "row %d: got %r, want %r" % (i, g, w)
    return "%d rows, want %d" % (len(got), len(want))


def eq_rows(what, got, want):
    return check(got == want, what, "" if got == want else first_diff(got, want))


def g15(v):
    """@v as report.json gives a real: 15 significant digits."""
    return float("%.15g" % v)


def sites_of(d):
    """top_sites as [(count, bytes, byte_events, stack)]."""
    return [(x["count"], x["bytes"], x["byte_events"], stack_key(x["frames"])) for x in d["top_sites"]]


def ref_sites(ref, top=20):
    return [(c, b, g15(w), k[:32]) for c, b, w, k in ref.top_sites(top)]


def blocks_of(section):
    """A ranked list of blocks as [(addr, size, allocated_at, free_requested_at, stack)]."""
    return [(int(b["addr"], 16), b["size"], b["allocated_at"], b["free_requested_at"], stack_key(b["frames"]))
            for b in section["blocks"]]


def ref_live(ref, top=20):
    count, size, blocks = ref.live_at(ref.peak("allocated")[1], top)
    return count, size, [b[:4] + (b[4][:32],) for b in blocks]


def ref_frag(ref):
    """(free_bytes, largest_free, largest_free_ratio) at the allocated peak."""
    free, largest = ref.at_peak().fragmentation()
    return free, largest, g15(largest / free) if free else 1.0


def pbi(d, k):
    p = d["peak"][k]
    return p["bytes"], p["index"]


def compare_with_ref(name, d, ref, rows):
    """Everything the report says that the reference replay also knows."""
    eq("%s: events" % name, d["events"], len(ref.events))
    eq("%s: no inconsistency in the reference replay" % name, ref.issues, [])
    eq("%s: no inconsistency reported" % name, d["inconsistencies"]["count"], 0)
    for k in ("allocated", "requested", "active", "reserved"):
        eq("%s: peak %s (bytes, index)" % (name, k), pbi(d, k), ref.peak(k))
    rule, live_blocks, obeying = rounding(ref.snap)
    at = ref.peak("allocated")[1]
    pa, pr = ref.peak("allocated")[0], ref.start["requested"] if at is None else ref.after[at][1]
    eq("%s: the rounding rule, its live blocks, the sizes inferred, the waste at the peak and at dump" % name,
       d["rounding"], {"rule": rule, "live_blocks": live_blocks, "obeying": obeying, "inferred": ref.inferred,
                       "unsized": ref.unsized, "at_peak": {"allocated": pa, "requested": pr, "waste": pa - pr},
                       "at_dump": {"allocated": ref.dump["allocated"], "requested": ref.dump["requested"],
                                   "waste": ref.dump["allocated"] - ref.dump["requested"]}})
    eq("%s: the state before the first event" % name, d["start"], ref.start)
    eq("%s: the state at dump time" % name, d["dump"], ref.dump)
    eq_rows("%s: every timeline.csv row" % name, rows, ref.rows())
    at = ref.peak("allocated")[1]
    eq("%s: blocks live at the allocated peak (count, bytes)" % name,
       (d["live_at_peak"]["count"], d["live_at_peak"]["bytes"]),
       (ref.start_live if at is None else ref.n_live[at], ref.peak("allocated")[0]))
    fr = d["fragmentation"]
    eq("%s: fragmentation at the allocated peak (index, segments, reserved, allocated, unallocated)" % name,
       (fr["index"], fr["segments"], fr["reserved"], fr["allocated"], fr["unallocated"]),
       (at, ref.start_segs if at is None else ref.n_segs[at],
        ref.start["reserved"] if at is None else ref.after[at][3], ref.peak("allocated")[0],
        (ref.start["reserved"] if at is None else ref.after[at][3]) - ref.peak("allocated")[0]))
    eq("%s: fragmentation at the allocated peak (free_bytes, largest_free, largest_free_ratio)" % name,
       (fr["free_bytes"], fr["largest_free"], fr["largest_free_ratio"]), ref_frag(ref))
    lp = d["live_at_peak"]
    eq("%s: live_at_peak as listed (largest first, then by address), with their lives and stacks" % name,
       (lp["count"], lp["bytes"], blocks_of(lp)), ref_live(ref))
    eq("%s: top_sites (count, bytes, byte_events, stack), by bytes x events alive" % name, sites_of(d),
       ref_sites(ref))
    eq("%s: ghosts (count, bytes)" % name, (d["ghosts"]["count"], d["ghosts"]["bytes"]), ref.ghosts)
    eq("%s: leaks (count, bytes)" % name, (d["leaks"]["count"], d["leaks"]["bytes"]), tuple(ref.leaks))
    eq("%s: workspace (count, bytes)" % name, (d["workspace"]["count"], d["workspace"]["bytes"]),
       tuple(ref.workspace))
    eq("%s: the most bytes live at once in the plan is the requested peak" % name, d["plan"]["peak_live_bytes"],
       ref.peak("requested")[0])
    delays = sorted(ref.delays)
    fd = d["free_delay"]
    eq("%s: free_requested -> free_completed count, median, p99, max, pending at dump" % name,
       (fd["events"]["count"], fd["events"]["median"], fd["events"]["p99"], fd["events"]["max"],
        fd["pending_at_dump"]),
       (len(delays), delays[(len(delays) - 1) // 2] if delays else None,
        delays[int((len(delays) - 1) * 0.99 + 0.5)] if delays else None, delays[-1] if delays else None,
        ref.pending_at_dump))
    acts, churn, streams = {}, {}, {}
    for e in ref.events:
        a = e["action"] if e["action"] in ACTIONS else "unknown"
        acts[a] = acts.get(a, 0) + 1
        c = churn.setdefault(a, [0, 0])
        c[0], c[1] = c[0] + 1, c[1] + e.get("size", 0)
        if a in ("alloc", "segment_alloc", "segment_map"):
            s = streams.setdefault("0x%x" % (e.get("stream", 0) & MASK), [0, 0, 0, 0])
            k = 0 if a == "alloc" else 2
            s[k], s[k + 1] = s[k] + 1, s[k + 1] + e.get("size", 0)
    eq("%s: action counts" % name, d["actions"], acts)
    eq("%s: segment churn" % name, {k: [v["count"], v["bytes"]] for k, v in d["segment_churn"].items()},
       {k: churn.get(k, [0, 0]) for k in ("segment_alloc", "segment_free", "segment_map", "segment_unmap")})
    eq("%s: per-stream totals" % name,
       {s["stream"]: [s["allocs"], s["alloc_bytes"], s["segment_allocs"], s["segment_bytes"]] for s in d["streams"]},
       streams)


# --- the real snapshots --------------------------------------------------------------------

def mib(v):
    return "%.1f MiB" % (v / 1048576.0)


def txt_line(txt, start, n=0):
    """The @n-th line of @txt that starts with @start, stripped of its indent."""
    lines = [x.strip() for x in (txt or "").splitlines() if x.strip().startswith(start)]
    return lines[n] if n < len(lines) else None


def test_real():
    global skipped
    if not os.path.isdir(TESTDATA):
        print("replay: the %d real-snapshot tests are skipped: %s is absent" % (len(REAL), TESTDATA), flush=True)
        skipped += len(REAL)
        return
    for what, fname in REAL:
        path = os.path.join(TESTDATA, fname)
        if not check(os.path.isfile(path), "real snapshot %s (%s) is there" % (fname, what)):
            continue
        with open(path, "rb") as f:
            snap = pickle.load(f)       # trusted test data
        r = run(path)
        if not check(r.rc == 0 and r.report is not None and r.sanitizer_clean(), "%s: exit 0 with a report" % fname,
                     "exit %d, %s" % (r.rc, r.stderr.strip()[-400:])):
            continue
        devs = devices_of(snap)
        eq("%s: devices" % fname, [d["device"] for d in r.devices()], devs)
        eq("%s: events in the snapshot" % fname, r.report["snapshots"][0]["events"],
           sum(len(t) for t in snap["device_traces"]))
        eq("%s: timeline.csv header" % fname, r.rows[0] if r.rows else None,
           ["device", "index", "action", "addr", "size", "stream", "allocated", "requested", "active", "reserved",
            "time_us"])
        eq("%s: timeline.csv rows" % fname, len(r.rows) - 1, sum(len(t) for t in snap["device_traces"]))
        for k, d in enumerate(r.devices()):
            ref = Ref(snap, d["device"])
            compare_with_ref("%s device %d" % (fname, d["device"]), d, ref, r.timeline(d["device"]))
            # At dump time the allocator's bytes are the file's own record of them, exactly.
            segs = [g for g in snap["segments"] if g["device"] == d["device"]]
            eq("%s device %d: at dump, allocated and requested are the segments' allocated_size and requested_size"
               % (fname, d["device"]), (d["dump"]["allocated"], d["dump"]["requested"]),
               (sum(g["allocated_size"] for g in segs), sum(g["requested_size"] for g in segs)))
            has_live = any(b["state"] != "inactive" for g in snap["segments"] for b in g["blocks"])
            eq("%s device %d: the rounding rule told from the live blocks" % (fname, d["device"]),
               d["rounding"]["rule"], "torch_npu" if has_live else None)
            line = txt_line(r.txt, "Peak allocated", k)
            check(line is not None and mib(ref.peak("allocated")[0]) in line,
                  "%s device %d: report.txt gives the allocated peak as %s" % (fname, d["device"],
                                                                              mib(ref.peak("allocated")[0])), line)
        if fname == REAL[-1][1]:
            # The same snapshot as JSON and as a pickle of protocol 2 (LONG1 addresses).
            for form, data in (("json", json.dumps(snap).encode()), ("pickle2", pickle.dumps(snap, protocol=2))):
                o = run(write("real." + form, data))
                if check(o.rc == 0 and o.report is not None, "%s as %s: exit 0" % (fname, form), o.last):
                    eq("%s as %s: the same report as the original pickle" % (fname, form), o.devices(), r.devices())
                    eq("%s as %s: the same timeline as the original pickle" % (fname, form), o.rows, r.rows)


# --- synthetic snapshots -------------------------------------------------------------------

F1 = [{"name": "f1", "filename": "model.py", "line": 10}, {"name": "main", "filename": "train.py", "line": 20}]
F2 = [{"name": "f2", "filename": "model.py", "line": 30}]


def seg(addr, total, blocks, device=0, stream=0, expandable=False, **extra):
    d = {"device": device, "address": addr, "total_size": total, "stream": stream, "segment_type": "large",
         "segment_pool_id": (0, 0), "is_expandable": expandable, "frames": [], "blocks": blocks}
    d["allocated_size"] = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    d["active_size"] = sum(b["size"] for b in blocks if b["state"] != "inactive")
    d["requested_size"] = sum(b.get("requested_size", b["size"]) for b in blocks if b["state"] != "inactive")
    d.update(extra)
    return d


def blk(addr, size, state="inactive", requested=None, frames=(), **extra):
    b = {"size": size, "requested_size": size if requested is None else requested, "state": state,
         "frames": list(frames)}
    if addr is not None:
        b["address"] = addr
    b.update(extra)
    return b


def ev(action, addr=0, size=0, stream=0, **extra):
    e = {"action": action, "addr": addr, "size": size, "stream": stream, "frames": []}
    e.update(extra)
    return e


def snapshot(segments, *traces, **extra):
    d = {"segments": segments, "device_traces": [list(t) for t in traces]}
    d.update(extra)
    return d


def test_actions():
    """Each action's undo, with the timeline worked out by hand; block addresses implied."""
    s = snapshot(
        [seg(0x10000, 4096, [blk(None, 512, "active_allocated", 500, novel_block_key=1),
                             blk(None, 512, "active_pending_free", 512), blk(None, 3072)], new_segment_key=[1])],
        [ev("segment_alloc", 0x10000, 4096),
         ev("alloc", 0x10000, 500),
         ev("alloc", 0x10200, 512),
         ev("free_requested", 0x10200, 512),
         {"action": "oom", "device_free": 123, "size": 999, "stream": 0, "frames": F2},
         ev("snapshot"),
         ev("alloc", 0x10400, 256, novel_event_key={"x": [1, 2]}),
         ev("free_requested", 0x10400, 256),
         ev("free_completed", 0x10400, 256),
         ev("banana", 0x10400, 256),
         ev("segment_alloc", 0x20000, 2048),
         ev("alloc", 0x20000, 100),
         ev("free", 0x20000, 100),
         ev("segment_free", 0x20000, 2048)],
        mystery_top_level={"a": [1, 2.5, None, True]},
        allocator_settings={"expandable_segments": False, "max_split_size": 1 << 40},
        external_annotations=[{"device": 0, "stage": "fwd"}, {"device": 0, "stage": "bwd"}])
    # Blocks by the allocator's bytes: the live ones (512 for 500 asked; 512) obey PyTorch's
    # rounding, so the block of 256 and the one of 100 that undone frees re-create take 512.
    want = [("segment_alloc", 0, 0, 4096), ("alloc", 512, 512, 4096), ("alloc", 1024, 1024, 4096),
            ("free_requested", 512, 1024, 4096), ("oom", 512, 1024, 4096), ("snapshot", 512, 1024, 4096),
            ("alloc", 1024, 1536, 4096), ("free_requested", 512, 1536, 4096),
            ("free_completed", 512, 1024, 4096), ("unknown", 512, 1024, 4096),
            ("segment_alloc", 512, 1024, 6144), ("alloc", 1024, 1536, 6144), ("free", 512, 1024, 6144),
            ("segment_free", 512, 1024, 4096)]
    want_requested = [0, 500, 1012, 500, 500, 500, 756, 500, 500, 500, 500, 600, 500, 500]
    ref = Ref(s, 0)
    eq_rows("actions: the reference replay agrees with the hand-worked timeline", ref_vals(ref), want)
    eq("actions: the reference replay's requested bytes", [a[1] for a in ref.after], want_requested)
    outs = [analyse("actions-p%d" % p, s, p) for p in (2, 3, 4, 5)]
    for p, r in zip((2, 3, 4, 5), outs):
        if r is None:
            continue
        if p != 2:
            if outs[0]:
                eq("actions: protocol %d gives the same report as protocol 2" % p, r.devices(), outs[0].devices())
            continue
        eq_rows("actions: the timeline after each undone action", timeline_vals(r), want)
        eq("actions: the requested bytes after each undone action", requested_vals(r), want_requested)
        eq("actions: timeline.csv row of the oom (addr is device_free, size, no time)", r.timeline(0)[4],
           ["0", "4", "oom", "0x7b", "999", "0x0", "512", "500", "1024", "4096", ""])
        d = r.devices()[0]
        compare_with_ref("actions", d, ref, r.timeline(0))
        eq("actions: peaks", {k: pbi(d, k) for k in d["peak"]},
           {"allocated": (1024, 2), "requested": (1012, 2), "active": (1536, 6), "reserved": (6144, 10)})
        eq("actions: peak action names", [d["peak"][k]["action"] for k in ("allocated", "active", "reserved")],
           ["alloc", "alloc", "segment_alloc"])
        eq("actions: start", d["start"],
           {"allocated": 0, "requested": 0, "active": 0, "active_requested": 0, "reserved": 0})
        eq("actions: dump", d["dump"], {"allocated": 512, "requested": 500, "active": 1024, "active_requested": 1012,
                                        "reserved": 4096, "segments": 1})
        eq("actions: the rounding rule, the sizes it gave, the waste at the peak and at dump",
           (d["rounding"]["rule"], d["rounding"]["live_blocks"], d["rounding"]["obeying"], d["rounding"]["inferred"],
            d["rounding"]["at_peak"]["waste"], d["rounding"]["at_dump"]["waste"]), ("pytorch", 2, 2, 2, 12, 12))
        eq("actions: the unknown action is counted as such", d["actions"].get("unknown"), 1)
        eq("actions: oom list", [(o["index"], o["size"], o["device_free"], o["frames"][0]["name"]) for o in d["oom"]],
           [(4, 999, 123, "f2")])
        eq("actions: leaks (the block allocated at event 1 and live at dump)",
           (d["leaks"]["count"], d["leaks"]["bytes"], d["leaks"]["requested"], [b["addr"] for b in d["leaks"]["blocks"]]),
           (1, 512, 500, ["0x10000"]))
        eq("actions: live at the peak", (d["live_at_peak"]["count"], d["live_at_peak"]["bytes"],
                                         sorted(b["addr"] for b in d["live_at_peak"]["blocks"])),
           (2, 1024, ["0x10000", "0x10200"]))
        eq("actions: free delay (one completed a step later; one pending at dump)",
           (d["free_delay"]["events"], d["free_delay"]["pending_at_dump"], d["free_delay"]["time_us"]),
           ({"count": 1, "median": 1, "p99": 1, "max": 1}, 1, None))
        eq("actions: untimed", d["timed"], False)
        sn = r.report["snapshots"][0]
        eq("actions: allocator_settings copied", sn["allocator_settings"], s["allocator_settings"])
        eq("actions: external_annotations counted", sn["external_annotations"], 2)
        eq("actions: not legacy", sn["legacy"], False)
        check("Inconsistencies: none" in r.txt, "actions: report.txt says there is no inconsistency")


U = 0x200000
A = 0x12d300000000


def expandable_case(name, proto, segments, events, rows, start_reserved, frag):
    """A one- or few-event trace on expandable segments; the state before the first event is
    what the fragmentation section describes when nothing is allocated during the trace."""
    s = snapshot(segments, events)
    r = analyse("expandable-" + name, s, proto)
    if r is None:
        return
    d = r.devices()[0]
    eq_rows("expandable %s: timeline" % name, timeline_vals(r), rows)
    eq("expandable %s: reserved before the first event" % name, d["start"]["reserved"], start_reserved)
    eq("expandable %s: no inconsistency" % name, d["inconsistencies"]["count"], 0)
    f = d["fragmentation"]
    eq("expandable %s: before the first event (index, segments, free_bytes, largest_free)" % name,
       (f["index"], f["segments"], f["free_bytes"], f["largest_free"]), frag)
    line = txt_line(r.txt, "Peak reserved")
    peak = max([start_reserved] + [v[3] for v in rows])
    check(line is not None and mib(peak) in line,
          "expandable %s: report.txt gives the reserved peak as %s" % (name, mib(peak)), line)
    ref = Ref(s, 0)
    eq("expandable %s: the reference replay agrees on segments and reserved before the first event" % name,
       (ref.start_segs, ref.start["reserved"], ref.issues), (frag[1], start_reserved, []))


def test_expandable():
    exp = dict(expandable=True, stream=5)
    # A map at the front: undone, the segment starts later; the live block at its end stays in it.
    expandable_case("map at the front", 2,
                    [seg(A, 4 * U, [blk(A, 3 * U), blk(A + 3 * U, U, "active_allocated")], **exp)],
                    [ev("segment_map", A, U, 5)], [("segment_map", U, U, 4 * U)], 3 * U, (None, 1, 2 * U, 2 * U))
    # A map at the end: undone, the segment ends earlier; the live block at its front stays in it.
    expandable_case("map at the end", 3,
                    [seg(A, 4 * U, [blk(A, U, "active_allocated"), blk(A + U, 3 * U)], **exp)],
                    [ev("segment_map", A + 3 * U, U, 5)], [("segment_map", U, U, 4 * U)], 3 * U,
                    (None, 1, 2 * U, 2 * U))
    # A map in the middle: undone, the segment is split in two.
    expandable_case("map in the middle", 4, [seg(A, 4 * U, [blk(A, 4 * U)], **exp)],
                    [ev("segment_map", A + U, U, 5)], [("segment_map", 0, 0, 4 * U)], 3 * U, (None, 2, 3 * U, 2 * U))
    # Unmaps: undone, the range is re-inserted and merged with neighbours of its stream.
    expandable_case("unmap merging with the segment before", 5, [seg(A, 2 * U, [blk(A, 2 * U)], **exp)],
                    [ev("segment_unmap", A + 2 * U, U, 5)], [("segment_unmap", 0, 0, 2 * U)], 3 * U,
                    (None, 1, 3 * U, 3 * U))
    expandable_case("unmap merging with the segment after", 2, [seg(A + U, 2 * U, [blk(A + U, 2 * U)], **exp)],
                    [ev("segment_unmap", A, U, 5)], [("segment_unmap", 0, 0, 2 * U)], 3 * U, (None, 1, 3 * U, 3 * U))
    expandable_case("unmap merging with both neighbours", 3,
                    [seg(A, U, [blk(A, U)], **exp), seg(A + 2 * U, U, [blk(A + 2 * U, U)], **exp)],
                    [ev("segment_unmap", A + U, U, 5)], [("segment_unmap", 0, 0, 2 * U)], 3 * U,
                    (None, 1, 3 * U, 3 * U))
    expandable_case("unmap after another stream's segment", 4, [seg(A, 2 * U, [blk(A, 2 * U)], **exp)],
                    [ev("segment_unmap", A + 2 * U, U, 6)], [("segment_unmap", 0, 0, 2 * U)], 3 * U,
                    (None, 2, 3 * U, 2 * U))
    expandable_case("unmap before another stream's segment", 5, [seg(A + U, 2 * U, [blk(A + U, 2 * U)], **exp)],
                    [ev("segment_unmap", A, U, 6)], [("segment_unmap", 0, 0, 2 * U)], 3 * U, (None, 2, 3 * U, 2 * U))
    # Grow, grow, shrink: undoing the shrink must leave one segment that the map of the
    # whole front range (event 0) then removes entirely.
    expandable_case("grow twice then unmap", 5, [seg(A, U, [blk(A, U)], **exp)],
                    [ev("segment_map", A, 2 * U, 5), ev("segment_map", A + 2 * U, U, 5),
                     ev("segment_unmap", A + U, 2 * U, 5)],
                    [("segment_map", 0, 0, 2 * U), ("segment_map", 0, 0, 3 * U), ("segment_unmap", 0, 0, U)], 0,
                    (None, 0, 0, 0))


def test_workspace():
    W1, W2, S = 0x900000, 0xA00000, 0x100000
    s = snapshot([seg(S, 8192, [blk(S, 1024, "active_allocated", 1000), blk(S + 1024, 7168)])],
                 [ev("workspace_snapshot", W1, 65536), ev("segment_alloc", W1, 65536), ev("alloc", W1, 65536),
                  ev("workspace_snapshot", W2, 32768), ev("segment_alloc", W2, 32768), ev("alloc", W2, 32768),
                  ev("alloc", S, 1000)])
    r = analyse("workspace", s, 4)
    if r is None:
        return
    d = r.devices()[0]
    eq("workspace: count and bytes", d["workspace"], {"count": 2, "bytes": 98304})
    eq("workspace: counted as allocated and active at dump time", d["dump"],
       {"allocated": 99328, "requested": 99304, "active": 99328, "active_requested": 99304, "reserved": 106496,
        "segments": 3})
    eq_rows("workspace: timeline", timeline_vals(r),
            [("workspace_snapshot", 0, 0, 8192), ("segment_alloc", 0, 0, 73728), ("alloc", 65536, 65536, 73728),
             ("workspace_snapshot", 65536, 65536, 73728), ("segment_alloc", 65536, 65536, 106496),
             ("alloc", 98304, 98304, 106496), ("alloc", 99328, 99328, 106496)])
    eq("workspace: start", d["start"],
       {"allocated": 0, "requested": 0, "active": 0, "active_requested": 0, "reserved": 8192})
    eq("workspace: no inconsistency", d["inconsistencies"]["count"], 0)
    eq("workspace: ghosts", d["ghosts"]["count"], 0)
    ref = Ref(s, 0)
    eq_rows("workspace: the reference replay agrees", timeline_vals(r), ref_vals(ref))
    check("Workspace" in r.txt, "workspace: report.txt mentions the workspace")


def test_inconsistencies():
    s = snapshot([seg(0x10000, 4096, [blk(0x10000, 256, "active_allocated", 200), blk(0x10100, 3840)])],
                 [ev("alloc", 0x10000, 100), ev("free_requested", 0x10000, 100), ev("free_completed", 0x10000, 100),
                  ev("free_requested", 0x55550, 64), ev("segment_alloc", 0x77770000, 2048),
                  ev("alloc", 0x10000, 200)])
    r = analyse("inconsistent", s, 5)
    if r is not None:
        d = r.devices()[0]
        inc = d["inconsistencies"]
        eq("inconsistent: count", inc["count"], 2)
        eq("inconsistent: each with its event index, action and address",
           sorted((i["index"], i["action"], i["addr"]) for i in inc["items"]),
           [(3, "free_requested", "0x55550"), (4, "segment_alloc", "0x77770000")])
        check(all(i["what"] for i in inc["items"]), "inconsistent: each says what is wrong")
        eq_rows("inconsistent: the replay carries on", timeline_vals(r),
                [("alloc", 100, 100, 4096), ("free_requested", 0, 100, 4096), ("free_completed", 0, 0, 4096),
                 ("free_requested", 0, 0, 4096), ("segment_alloc", 0, 0, 4096), ("alloc", 256, 256, 4096)])
        eq("inconsistent: no live block obeys a rounding rule: the re-created block keeps its requested size",
           (d["rounding"]["rule"], d["rounding"]["inferred"], d["rounding"]["unsized"]), (None, 0, 1))
        check("Inconsistencies: 2" in r.txt and "0x77770000" in r.txt,
              "inconsistent: report.txt lists the inconsistencies")
        ref = Ref(s, 0)
        eq("inconsistent: the reference replay finds the same two", sorted(i[:2] for i in ref.issues),
           [(3, "free_requested"), (4, "segment_alloc")])
    path = os.path.join(tmp, "inconsistent.pkl")
    st = run(path, "--strict")
    eq("inconsistent --strict: exit status", st.rc, 1)
    check("event 4" in st.last and "segment_alloc" in st.last,
          "inconsistent --strict: the last stderr line names the event (the newest inconsistent one)", st.last)
    check(st.sanitizer_clean(), "inconsistent --strict: no sanitizer report", st.stderr[-400:])


def test_ghosts():
    s = snapshot([seg(0x10000, 4096, [blk(0x10000, 0x800), blk(0x10800, 512, "active_allocated"),
                                      blk(0x10a00, 0x600)])],
                 [ev("free_requested", 0x10000, 300), ev("free_completed", 0x10000, 300), ev("alloc", 0x10100, 50),
                  ev("free_requested", 0x10100, 50), ev("free_completed", 0x10100, 50)])
    r = analyse("ghosts", s, 3)
    if r is None:
        return
    d = r.devices()[0]
    eq_rows("ghosts: timeline", timeline_vals(r),
            [("free_requested", 512, 1024, 4096), ("free_completed", 512, 512, 4096), ("alloc", 1024, 1024, 4096),
             ("free_requested", 512, 1024, 4096), ("free_completed", 512, 512, 4096)])
    eq("ghosts: count and bytes", (d["ghosts"]["count"], d["ghosts"]["bytes"]), (2, 812))
    eq("ghosts: one freed in the trace, one alive throughout",
       (d["ghosts"]["freed_in_trace"], d["ghosts"]["alive_throughout"]),
       ({"count": 1, "bytes": 300}, {"count": 1, "bytes": 512}))
    eq("ghosts: not inconsistencies", d["inconsistencies"]["count"], 0)
    eq("ghosts: not leaks", d["leaks"]["count"], 0)
    eq("ghosts: the allocated peak is before the first event", (pbi(d, "allocated"), pbi(d, "requested")),
       ((1024, None), (812, None)))
    eq("ghosts: the reference replay agrees", (Ref(s, 0).ghosts, Ref(s, 0).start["allocated"]), ((2, 812), 1024))
    check("before the first event" in r.txt, "ghosts: report.txt says the peak was before the first event")


def test_leaks():
    s = snapshot([seg(0x10000, 8192, [blk(0x10000, 1024, "active_allocated", 1000, F1),
                                      blk(0x10400, 1024, "active_allocated", 1024, F2),
                                      blk(0x10800, 512, "active_allocated", 500, F1), blk(0x10a00, 0x1600)])],
                 [ev("alloc", 0x10000, 1000, frames=F1), ev("alloc", 0x10400, 1024, frames=F2),
                  ev("alloc", 0x10800, 500, frames=F1), ev("alloc", 0x11000, 64, frames=F2),
                  ev("free_requested", 0x11000, 64), ev("free_completed", 0x11000, 64)])
    r = analyse("leaks", s, 2)
    if r is None:
        return
    lk = r.devices()[0]["leaks"]
    eq("leaks: count, bytes and bytes requested", (lk["count"], lk["bytes"], lk["requested"]), (3, 2560, 2524))
    eq("leaks: largest first, with when they were allocated",
       [(b["addr"], b["size"], b["allocated_at"], b["free_requested_at"]) for b in lk["blocks"]],
       [("0x10400", 1024, 1, None), ("0x10000", 1000, 0, None), ("0x10800", 500, 2, None)])
    eq("leaks: by call site, most bytes first",
       [(x["count"], x["bytes"], [f["name"] for f in x["frames"]]) for x in lk["sites"]],
       [(2, 1500, ["f1", "main"]), (1, 1024, ["f2"])])
    eq("leaks: frames carry file and line", lk["sites"][0]["frames"][0], F1[0])
    eq("leaks: the reference replay agrees", tuple(Ref(s, 0).leaks), (3, 2560))
    check("Never freed" in r.txt and "f1 (model.py:10)" in r.txt, "leaks: report.txt lists them with their stacks")


def fr(name, line):
    return [{"name": name, "filename": "model.py", "line": line}, {"name": "main", "filename": "train.py", "line": 1}]


SA, SB, SC, SD, SE, SF, SG = (fr(n, k) for k, n in enumerate(("attn", "mlp", "embed", "loss", "zero_grad", "head",
                                                             "cache"), 1))


def test_top_sites():
    """Sites ranked by bytes x events alive, which is not the ranking by bytes. 21 events; a
    block is alive after its alloc up to, not including, the event that requests its free.
      mlp    B1 256 B, events 0-21 (alive at dump)       5376
      attn   A1 4096 B, 1-3                              8192
      embed  C1 1024 B, 2-7; C2 1024 B, 6-21 (at dump)   5120 + 15360 = 20480
      ()     X 512 B, 5-9, allocated with no stack and freed with zero_grad's: freed there,
             not allocated there; G, a 600-byte ghost, 0-18, known from its free only
                                                         2048 + 10800 = 12848
      loss   D1 1024 B, 11-13                            2048
      head   F1 2048 B, 14-15                            2048, as loss: loss's stack appears first
      cache  P, 300 B pending free throughout            0
    By bytes: attn 4096, embed 2048, head 2048, () 1112, loss 1024, cache 300, mlp 256."""
    S = 0x100000
    segs = [seg(S, 0x10000, [blk(S, 256, "active_allocated", frames=SB), blk(S + 0x100, 0x4f00),
                             blk(S + 0x5000, 1024, "active_allocated", frames=SC), blk(S + 0x5400, 0x3c00),
                             blk(S + 0x9000, 512, "active_pending_free", 300, frames=SG), blk(S + 0x9200, 0x6e00)])]
    A1, C1, X, D1, F1, G = S + 0x1000, S + 0x3000, S + 0x4000, S + 0x6000, S + 0x7000, S + 0x8000
    events = [ev("alloc", S, 256, frames=SB), ev("alloc", A1, 4096, frames=SA), ev("alloc", C1, 1024, frames=SC),
              ev("free_requested", A1, 4096, frames=SE), ev("free_completed", A1, 4096, frames=SE),
              ev("alloc", X, 512), ev("alloc", S + 0x5000, 1024, frames=SC),
              ev("free_requested", C1, 1024), ev("free_completed", C1, 1024),
              ev("free_requested", X, 512, frames=SE), ev("free_completed", X, 512, frames=SE),
              ev("alloc", D1, 1024, frames=SD), ev("snapshot"), ev("free_requested", D1, 1024),
              ev("alloc", F1, 2048, frames=SF), ev("free_requested", F1, 2048),
              ev("free_completed", D1, 1024, frames=SE), ev("free_completed", F1, 2048, frames=SE),
              ev("free_requested", G, 600, frames=SE), ev("free_completed", G, 600, frames=SE), ev("snapshot")]
    s = snapshot(segs, events)
    want = [(2, 2048, 20480.0, SC), (2, 1112, 12848.0, []), (1, 4096, 8192.0, SA), (1, 256, 5376.0, SB),
            (1, 1024, 2048.0, SD), (1, 2048, 2048.0, SF), (1, 300, 0.0, SG)]
    want = [(c, b, w, stack_key(k)) for c, b, w, k in want]
    ref = Ref(s, 0)
    eq("top sites: the reference replay agrees with the hand-worked ranking", ref_sites(ref), want)
    eq("top sites: ranked by bytes, they would read otherwise",
       [x[3] for x in sorted(want, key=lambda x: -x[1])] != [x[3] for x in want], True)
    r = analyse("top-sites", s, 4)
    if r is None:
        return
    d = r.devices()[0]
    eq("top sites: count, bytes, byte_events and frames, most bytes x events first", sites_of(d), want)
    compare_with_ref("top sites", d, ref, r.timeline(0))
    eq("top sites: the ghost known only from its free is live at the peak with no allocation stack",
       [(b["addr"], b["frames"]) for b in d["live_at_peak"]["blocks"] if b["addr"] == hex(G)], [(hex(G), [])])
    t = run(os.path.join(tmp, "top-sites.json"), "--top", "3")
    if check(t.rc == 0 and t.report is not None, "top sites --top 3: exit 0", t.last):
        eq("top sites --top 3: the first three", sites_of(t.devices()[0]), want[:3])
    part = (r.txt or "").partition("Call sites holding the most memory the longest")[2]
    check(part.split("embed (model.py:3)")[0].count("block(s)") == 1 and "zero_grad" not in part.split("Static")[0],
          "top sites: report.txt lists embed first, and zero_grad nowhere among the top sites", part[:600])


def test_peak_state():
    """The state at a mid-trace allocated peak (after event 9), worked out by hand:
      segment 0x200000 (32 KiB): a 4 KiB [0x200000], hole 4 KiB, b 4 KiB [0x202000], c 2 KiB
        pending free [0x203000] (taken, not allocated), hole 10 KiB, d [0x206000] taking 4 KiB
        for 3840 bytes asked, g (a ghost) 1 KiB [0x207000], hole 3 KiB;
      segment 0x300000 (16 KiB, allocated at event 0): e 4 KiB, hole 12 KiB.
    Free 4 + 10 + 3 + 12 = 29 KiB, the largest 12 KiB; 48 KiB reserved, 17408 bytes allocated
    (the allocator's: d takes 4 KiB), 17152 asked for.
    After the peak b and g are freed and a third segment allocated. Live at the peak, largest
    first and a, b, e (4096 bytes each) by address, though allocated in the order e, b, a."""
    a, b, c, d, e, f, g, x = 0x200000, 0x202000, 0x203000, 0x206000, 0x300000, 0x400000, 0x207000, 0x201000
    s = snapshot([seg(0x200000, 0x8000, [blk(a, 0x1000, "active_allocated", frames=SA), blk(0x201000, 0x5000),
                                         blk(d, 0x1000, "active_allocated", 0xf00, frames=SD), blk(0x207000, 0x1000)]),
                  seg(0x300000, 0x4000, [blk(e, 0x1000, "active_allocated", frames=SC), blk(0x301000, 0x3000)]),
                  seg(0x400000, 0x2000, [blk(f, 0x400, "active_allocated"), blk(0x400400, 0x1c00)])],
                 [ev("segment_alloc", 0x300000, 0x4000), ev("alloc", e, 4096, frames=SC), ev("alloc", c, 2048),
                  ev("alloc", b, 4096, frames=SB), ev("alloc", x, 4096), ev("free_requested", c, 2048),
                  ev("free_requested", x, 4096), ev("free_completed", x, 4096), ev("alloc", d, 0xf00, frames=SD),
                  ev("alloc", a, 4096, frames=SA), ev("free_requested", b, 4096), ev("segment_alloc", f, 0x2000),
                  ev("alloc", f, 1024), ev("free_requested", g, 1024), ev("free_completed", g, 1024),
                  ev("free_completed", c, 2048), ev("free_completed", b, 4096)])
    K = 1024
    frag = dict(index=9, segments=2, reserved=48 * K, allocated=17408, unallocated=48 * K - 17408,
                free_bytes=29 * K, largest_free=12 * K, largest_free_ratio=g15(12 / 29))
    live = (5, 17408, [(a, 4096, 9, None, stack_key(SA)), (b, 4096, 3, 10, stack_key(SB)),
                       (e, 4096, 1, None, stack_key(SC)), (d, 0xf00, 8, None, stack_key(SD)), (g, 1024, None, 13, ())])
    ref = Ref(s, 0)
    eq("peak state: the reference replay finds the peak after event 9", (ref.peak("allocated"), ref.peak("requested")),
       ((17408, 9), (17152, 9)))
    eq("peak state: the reference replay's free space at the peak", ref_frag(ref),
       (frag["free_bytes"], frag["largest_free"], frag["largest_free_ratio"]))
    eq("peak state: the reference replay's blocks live at the peak", ref_live(ref), live)
    r = analyse("peak-state", s, 5)
    if r is None:
        return
    dev = r.devices()[0]
    eq("peak state: fragmentation at the allocated peak", dev["fragmentation"], frag)
    lp = dev["live_at_peak"]
    eq("peak state: live_at_peak as listed: largest first, equal sizes by address", (lp["count"], lp["bytes"],
                                                                                    blocks_of(lp)), live)
    compare_with_ref("peak state", dev, ref, r.timeline(0))
    t = run(os.path.join(tmp, "peak-state.pkl"), "--top", "2")
    if check(t.rc == 0 and t.report is not None, "peak state --top 2: exit 0", t.last):
        lp = t.devices()[0]["live_at_peak"]
        eq("peak state --top 2: the first two of the three of 4096 bytes, all counted",
           (lp["count"], lp["bytes"], blocks_of(lp)), (5, 17408, live[2][:2]))


def test_legacy():
    s = [seg(0x1000, 4096, [blk(None, 1024, "active_allocated", 1000,
                                history=[{"addr": 0x1000, "real_size": 1000, "frames": F1}]), blk(None, 3072)]),
         seg(0x100000, 2048, [blk(None, 2048, "active_pending_free")])]
    for b in s[0]["blocks"]:
        del b["frames"]         # legacy blocks keep their stack in the history only
    r = analyse("legacy", s, 2)
    if r is None:
        return
    sn = r.report["snapshots"][0]
    eq("legacy: said to be legacy", sn["legacy"], True)
    d = sn["devices"][0]
    eq("legacy: no events", (d["events"], sn["events"]), (0, 0))
    dump = {"allocated": 1024, "requested": 1000, "active": 3072, "active_requested": 3048, "reserved": 6144}
    eq("legacy: dump", d["dump"], dict(dump, segments=2))
    eq("legacy: the start is the dump", d["start"], dump)
    eq("legacy: peaks before the first event", {k: pbi(d, k) for k in d["peak"]},
       {"allocated": (1024, None), "requested": (1000, None), "active": (3072, None), "reserved": (6144, None)})
    eq("legacy: the stack comes from the block's history",
       [f["name"] for f in d["live_at_peak"]["blocks"][0]["frames"]], ["f1", "main"])
    eq("legacy: timeline.csv has its header only", len(r.rows), 1)
    ref = Ref(s, 0)
    eq("legacy: the reference replay agrees", (ref.dump, ref.start), (dict(dump, segments=2), dump))


def test_times_and_free_delay():
    """Five frees completed 1, 2, 3, 4 and 10 events (10 to 100 us) after they were
    requested, and one still pending at dump; every event has a time."""
    S = 0x10000
    B = [S + k * 0x1000 for k in range(5)]
    events = [ev("alloc", b, 4096) for b in B]
    events += [ev("free_requested", B[0], 4096), ev("free_completed", B[0], 4096),
               ev("free_requested", B[1], 4096), ev("free_requested", B[2], 4096),
               ev("free_completed", B[1], 4096), ev("free_requested", B[3], 4096),
               ev("free_completed", B[2], 4096), ev("free_requested", B[4], 4096), ev("snapshot"),
               ev("free_completed", B[3], 4096)] + [ev("snapshot") for _ in range(7)]
    events += [ev("free_completed", B[4], 4096), ev("alloc", S + 0x5000, 512), ev("free_requested", S + 0x5000, 512)]
    for i, e in enumerate(events):
        e["time_us"] = 1000 + 10 * i
    s = snapshot([seg(S, 0x10000, [blk(S, 0x5000), blk(S + 0x5000, 512, "active_pending_free"),
                                   blk(S + 0x5200, 0xae00)])], events)
    r = analyse("times", s, 5)
    if r is None:
        return
    d = r.devices()[0]
    eq("times: the free delay in events", d["free_delay"]["events"], {"count": 5, "median": 3, "p99": 10, "max": 10})
    eq("times: the free delay in microseconds", d["free_delay"]["time_us"],
       {"count": 5, "median": 30, "p99": 100, "max": 100})
    eq("times: pending at dump", d["free_delay"]["pending_at_dump"], 1)
    eq("times: the allocated peak with its time", (d["peak"]["allocated"]["bytes"], d["peak"]["allocated"]["index"],
                                                   d["peak"]["allocated"]["time_us"]), (20480, 4, 1040))
    eq("times: timed", d["timed"], True)
    eq("times: timeline.csv time_us column", [row[10] for row in r.timeline(0)],
       [str(1000 + 10 * i) for i in range(len(events))])
    ref = Ref(s, 0)
    eq("times: the reference replay agrees on the delays", sorted(ref.delays), [1, 2, 3, 4, 10])
    compare_with_ref("times", d, ref, r.timeline(0))
    line = txt_line(r.txt, "Peak allocated")
    check(line is not None and line.endswith(" at +40 us") and "1040" not in line,
          "times: report.txt gives the peak's time from the first event's, not the raw microseconds", line)

    # Times since the epoch, as traces record them: an offset and a date.
    t0 = 1768383987920985
    for i, e in enumerate(events):
        e["time_us"] = t0 + 250000 * i
    r = analyse("epoch times", snapshot([seg(S, 0x10000, [blk(S, 0x5000), blk(S + 0x5000, 512, "active_pending_free"),
                                                         blk(S + 0x5200, 0xae00)])], events), 5)
    if r is not None:
        line = txt_line(r.txt, "Peak allocated")
        check(line is not None and line.endswith(" at +1 s (2026-01-14 09:46:28.920 UTC)"),
              "epoch times: report.txt gives the peak's offset and its date", line)


def test_rounding():
    """Live blocks that obey torch_npu's rule only (1536 for 1000 asked, 512 for 100): a block
    that an undone free re-creates gets the size that rule gives (1024 asked: 1536), counted as
    inferred, and the waste between the allocator's bytes and the program's is reported."""
    S = 0x100000
    s = snapshot([seg(S, 8192, [blk(S, 1536, "active_allocated", 1000), blk(S + 1536, 512, "active_allocated", 100),
                                blk(S + 2048, 6144)])],
                 [ev("alloc", S, 1000), ev("alloc", S + 2048, 1024), ev("free_requested", S + 2048, 1024),
                  ev("free_completed", S + 2048, 1024), ev("alloc", S + 1536, 100)])
    r = analyse("rounding", s, 4)
    if r is None:
        return
    d = r.devices()[0]
    eq("rounding: torch_npu's rule, obeyed by both live blocks", (d["rounding"]["rule"], d["rounding"]["live_blocks"],
                                                                   d["rounding"]["obeying"]), ("torch_npu", 2, 2))
    eq("rounding: the re-created block's size is inferred", (d["rounding"]["inferred"], d["rounding"]["unsized"]),
       (1, 0))
    eq_rows("rounding: the allocator's bytes after each event", timeline_vals(r),
            [("alloc", 1536, 1536, 8192), ("alloc", 3072, 3072, 8192), ("free_requested", 1536, 3072, 8192),
             ("free_completed", 1536, 1536, 8192), ("alloc", 2048, 2048, 8192)])
    eq("rounding: the requested bytes", requested_vals(r), [1000, 2024, 1000, 1000, 1100])
    eq("rounding: the peak, allocated and requested", (pbi(d, "allocated"), pbi(d, "requested")),
       ((3072, 1), (2024, 1)))
    eq("rounding: the waste at the peak and at dump",
       (d["rounding"]["at_peak"], d["rounding"]["at_dump"]),
       ({"allocated": 3072, "requested": 2024, "waste": 1048}, {"allocated": 2048, "requested": 1100, "waste": 948}))
    eq("rounding: the block live at the peak that was re-created has the rule's size",
       [(b["addr"], b["size"], b["block_size"]) for b in d["live_at_peak"]["blocks"]],
       [("0x%x" % (S + 2048), 1024, 1536), ("0x%x" % S, 1000, 1536)])
    compare_with_ref("rounding", d, Ref(s, 0), r.timeline(0))
    line = txt_line(r.txt, "Rounding waste")
    check(line is not None and "torch_npu's rule" in line and "2 of 2 live blocks" in line and "1 re-created" in line,
          "rounding: report.txt says the waste and the rule", line)


def test_full_segments():
    """At the allocated peak every byte reserved is allocated: report.txt says there is no
    free range, not "0 B ... (100.0% of free memory)"."""
    S = 0x20000
    s = snapshot([seg(S, 4096, [blk(S, 4096, "active_allocated")])], [ev("alloc", S, 4096)])
    r = analyse("full", s, 5)
    if r is None:
        return
    fr = r.devices()[0]["fragmentation"]
    eq("full: no free bytes at the peak", (fr["free_bytes"], fr["largest_free"]), (0, 0))
    check("no free range in the segments" in r.txt and "of free memory" not in r.txt,
          "full: report.txt says there is no free range", txt_line(r.txt, "free ranges") or txt_line(r.txt, "no free"))


def test_plan():
    """Sizes 100, 60, 50, 40 alive over [1,3), [2,7), [5,9), [6,11) (after-event positions):
    largest first, 100 opens a partition, 60 overlaps it and opens another, 50 fits after the
    100, 40 overlaps both the 50 and the 60 and opens a third: 200 bytes against 160 live."""
    a, b, c, dd = 0x10000, 0x10100, 0x10200, 0x10300
    s = snapshot([seg(0x10000, 4096, [blk(0x10000, 4096)])],
                 [ev("alloc", a, 100), ev("alloc", b, 60), ev("free_requested", a, 100), ev("free_completed", a, 100),
                  ev("alloc", c, 50), ev("alloc", dd, 40), ev("free_requested", b, 60), ev("free_completed", b, 60),
                  ev("free_requested", c, 50), ev("free_completed", c, 50), ev("free_requested", dd, 40),
                  ev("free_completed", dd, 40)])
    r = analyse("plan", s, 3)
    if r is None:
        return
    p = r.devices()[0]["plan"]
    eq("plan: plan_bytes, peak_live_bytes, partitions, tensors",
       (p["plan_bytes"], p["peak_live_bytes"], p["partitions"], p["tensors"]), (200, 160, 3, 4))
    eq("plan: plan over peak live", p["plan_over_peak_live"], 1.25)
    eq("plan: the peak reservation", (p["peak_reserved_bytes"], p["peak_reserved_over_plan"]), (4096, 4096 / 200))
    eq_rows("plan: timeline", requested_vals(r), [100, 160, 60, 60, 110, 150, 90, 90, 40, 40, 0, 0])


def test_plan_order():
    """Largest first, whatever the order of the starts: 40 over [1,3), 100 over [2,6), 60 over
    [5,8). The 100 opens a partition, the 60 overlaps it and opens one of its own, the 40 fits
    after the 60: 160 bytes, as many as are live at once. Taken by start instead, the 40 would
    open the first partition and the 60 land in it: a plan of 140 that cannot hold it. At a
    scale of 2^20 the sizes differ only above the radix sort's lowest digit."""
    for scale in (1, 1 << 20):
        base, total = 0x10000000, 256 << 20
        a, b, c = base, base + (64 << 20), base + (192 << 20)
        s = snapshot([seg(base, total, [blk(base, total)])],
                     [ev("alloc", a, 40 * scale), ev("alloc", b, 100 * scale), ev("free_requested", a, 40 * scale),
                      ev("free_completed", a, 40 * scale), ev("alloc", c, 60 * scale),
                      ev("free_requested", b, 100 * scale), ev("free_completed", b, 100 * scale),
                      ev("free_requested", c, 60 * scale), ev("free_completed", c, 60 * scale)])
        r = analyse("plan-order-%d" % scale, s, 4)
        if r is None:
            return
        p = r.devices()[0]["plan"]
        eq("plan order (scale %d): plan_bytes, peak_live_bytes, partitions, tensors" % scale,
           (p["plan_bytes"], p["peak_live_bytes"], p["partitions"], p["tensors"]),
           (160 * scale, 160 * scale, 2, 3))


def test_plan_many_live():
    """150,000 blocks alive from before the trace to the dump, a short trace: every one
    conflicts with every other, so the plan has a partition each. First-fit that searched
    every partition for every block did 10^10 searches (69 s for such a segment); the plan
    must not grow with the square of the blocks. The analyzer runs under a CPU limit of
    60 s it needs a fraction of (about a second; several under a sanitizer)."""
    n, size = 150000, 512
    base = 0x100000000
    blocks = [blk(base + i * size, size, "active_allocated", size) for i in range(n)]
    s = snapshot([seg(base, n * size, blocks)],
                 [ev("alloc", base + (n - 1) * size, size)])
    r = run(write("plan-many-live.pkl", pickle.dumps(s, protocol=4)), "--limit-cpu", "60")
    if not check(r.rc == 0 and r.report is not None and r.sanitizer_clean(),
                 "plan, %d blocks live throughout: the analysis ends within its CPU limit" % n,
                 "exit %d, %s" % (r.rc, r.stderr.strip()[-400:])):
        return
    p = r.devices()[0]["plan"]
    eq("plan, %d blocks live throughout: a partition each, the plan the peak" % n,
       (p["partitions"], p["tensors"], p["plan_bytes"], p["peak_live_bytes"]), (n, n, n * size, n * size))


def test_streams():
    s = snapshot([seg(0x10000, 4096, [blk(0x10000, 256), blk(0x10100, 256, "active_allocated", 200),
                                      blk(0x10200, 3584)], stream=1),
                  seg(0x40000, 8192, [blk(0x40000, 512, "active_allocated", 50), blk(0x40200, 7680)], stream=2)],
                 [ev("segment_alloc", 0x40000, 8192, 2), ev("alloc", 0x10000, 100, 1), ev("alloc", 0x10100, 200, 1),
                  ev("alloc", 0x40000, 50, 2), ev("free_requested", 0x10000, 100, 1),
                  ev("free_completed", 0x10000, 100, 1)])
    r = analyse("streams", s, 4)
    if r is None:
        return
    d = r.devices()[0]
    eq("streams: per-stream totals",
       {x["stream"]: (x["allocs"], x["alloc_bytes"], x["segment_allocs"], x["segment_bytes"]) for x in d["streams"]},
       {"0x1": (2, 300, 0, 0), "0x2": (1, 50, 1, 8192)})
    eq_rows("streams: timeline", timeline_vals(r),
            [("segment_alloc", 0, 0, 12288), ("alloc", 512, 512, 12288), ("alloc", 768, 768, 12288),
             ("alloc", 1280, 1280, 12288), ("free_requested", 768, 1280, 12288), ("free_completed", 768, 768, 12288)])
    # One live block obeys each rule (512 for 50 asked), none the other (256 for 200): torch_npu's.
    eq("streams: a tie goes to torch_npu's rule", (d["rounding"]["rule"], d["rounding"]["obeying"]), ("torch_npu", 1))
    eq("streams: the requested bytes", requested_vals(r), [0, 100, 300, 350, 250, 250])
    eq("streams: timeline.csv stream column", [row[5] for row in r.timeline(0)],
       ["0x2", "0x1", "0x1", "0x2", "0x1", "0x1"])


def test_two_devices():
    """Device 1 has a trace and a segment, device 0 a segment only; device 2's trace is empty."""
    s = snapshot([seg(0x10000, 4096, [blk(0x10000, 4096, "active_allocated", 4000)], device=0),
                  seg(0x90000, 8192, [blk(0x90000, 1024, "active_allocated", 1000), blk(0x90400, 7168)], device=1)],
                 [], [ev("alloc", 0x90000, 1000), ev("alloc", 0x90400, 24), ev("free_requested", 0x90400, 24),
                      ev("free_completed", 0x90400, 24)], [])
    r = analyse("devices", s, 5)
    if r is None:
        return
    ds = r.devices()
    eq("devices: ascending, with a segment or a trace", [d["device"] for d in ds], [0, 1])
    eq("devices: device 0 has no events and its dump state", (ds[0]["events"], ds[0]["dump"]),
       (0, {"allocated": 4096, "requested": 4000, "active": 4096, "active_requested": 4000, "reserved": 4096,
            "segments": 1}))
    eq_rows("devices: device 1's timeline", timeline_vals(r, 1),
            [("alloc", 1024, 1024, 8192), ("alloc", 1536, 1536, 8192), ("free_requested", 1024, 1536, 8192),
             ("free_completed", 1024, 1024, 8192)])
    eq("devices: timeline.csv has device 1's rows only", [row[0] for row in r.rows[1:]], ["1"] * 4)


# --- hostile and broken inputs ------------------------------------------------------------

REFUSED = {"GLOBAL", "STACK_GLOBAL", "REDUCE", "BUILD", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "EXT1", "EXT2",
           "EXT4", "PERSID", "BINPERSID", "NEXT_BUFFER", "READONLY_BUFFER"}


def first_refused(data):
    for op, _, _ in pickletools.genops(data):
        if op.name in REFUSED:
            return op.name
    return None


def refused_case(name, data, opcode):
    r = run(write(name, data))
    eq("%s: exit status" % name, r.rc, 1)
    check(opcode is not None and ("opcode %s " % opcode) in r.said,
          "%s: the last stderr line names the opcode %s" % (name, opcode), r.last)
    check("refused" in r.said, "%s: the last stderr line says it was refused" % name, r.last)
    check(not os.path.exists(os.path.join(r.outdir, "report.json")), "%s: no report.json written" % name,
          "%s exists" % os.path.join(r.outdir, "report.json"))
    check(r.sanitizer_clean(), "%s: no sanitizer report" % name, r.stderr[-400:])


def test_hostile():
    for proto in (2, 4):
        data = pickle.dumps(os.system, protocol=proto)
        refused_case("os-system-p%d.pkl" % proto, data, first_refused(data))
    data = pickle.dumps(snapshot([], [ev("alloc", 1, 2, when=datetime.datetime(2025, 1, 2, 3, 4, 5))]), protocol=3)
    refused_case("datetime.pkl", data, first_refused(data))
    refused_case("bare-reduce.pkl", b"\x80\x02N)R.", "REDUCE")

    good = pickle.dumps(snapshot([seg(0x1000, 4096, [blk(0x1000, 4096, "active_allocated")])],
                                 [ev("alloc", 0x1000, 4096, frames=F1)]), protocol=4)
    cuts = sorted({2, 3, len(good) // 4, len(good) // 3, len(good) // 2, len(good) - 2, len(good) - 1})
    bad = []
    for n in cuts:
        r = run(write("cut-%d.pkl" % n, good[:n]))
        if r.rc != 1 or "truncated" not in r.said or not r.sanitizer_clean():
            bad.append("%d bytes: exit %d, %r" % (n, r.rc, r.last))
    check(not bad, "truncated pickles (%d cuts): exit 1 and \"truncated\" on the last stderr line" % len(cuts),
          "; ".join(bad))

    r = run(write("input-1.pkl", b""))
    eq("empty file: exit status", r.rc, 1)
    check("empty" in r.said, "empty file: the last stderr line says the file is empty", r.last)

    r = run(write("input-2.json", b'{"hello": [1, 2, 3]}'))
    eq("JSON that is not a snapshot: exit status", r.rc, 1)
    check("snapshot" in r.said, "JSON that is not a snapshot: the last stderr line says what was expected", r.last)
    r = run(write("input-3.json", b'{"segments": 5, "device_traces": []}'))
    eq("JSON whose segments is not a list: exit status", r.rc, 1)
    check("segments" in r.said and "list" in r.said, "JSON whose segments is not a list: the message says so",
          r.last)
    r = run(write("input-4.json", b'{"segments": [], "device_traces": [[{"action": "alloc", '))
    eq("broken JSON: exit status", r.rc, 1)
    check("line 1" in r.said, "broken JSON: the message gives the place", r.last)
    r = run(write("input-5.json", json.dumps(snapshot([], [ev("alloc", 1, "big")])).encode()))
    eq("a trace entry's size as a str: exit status", r.rc, 1)
    check("size" in r.said and "str" in r.said, "a trace entry's size as a str: the message names it", r.last)

    empty_dir = os.path.join(tmp, "nothing")
    os.mkdir(empty_dir)
    with open(os.path.join(empty_dir, "notes.txt"), "w") as f:
        f.write("nothing to see\n")
    with open(os.path.join(empty_dir, "manifest.json"), "w") as f:
        f.write('{"rank": 0}\n')
    r = Run([empty_dir, "-q"], os.path.join(empty_dir, "analysis"))
    eq("a directory with nothing to analyse: exit status", r.rc, 1)
    check("no memory snapshot, no trace and no framework's profiler output" in r.said and r.report is None,
          "a directory with nothing to analyse: says so, writes no report", r.last)


# --- progress lines ----------------------------------------------------------------------------

PROGRESS = re.compile(r"npuprof-replay: (.+): +(\d+)% \((\d+\.\d) MiB of (\d+\.\d) MiB\)$")


def test_progress():
    """A 36 MiB snapshot (thirty-six 1 MiB strings beside a one-event trace), as a pickle and as
    JSON, with the hidden NPF_REPLAY_PROGRESS_AFTER_MS at 0 instead of a second: progress
    lines while the input is read, the phases, then the summary; none with -q, and only the
    summary when the wait is an hour."""
    s = snapshot([seg(0x10000, 4096, [blk(0x10000, 4096, "active_allocated")])], [ev("alloc", 0x10000, 4096)],
                 padding=["%06d" % k + "x" * ((1 << 20) - 6) for k in range(36)])
    for form, data in (("pickle", pickle.dumps(s, protocol=4)), ("JSON", json.dumps(s).encode())):
        path = write("progress." + form.lower(), data)
        total = len(data) / 1048576.0
        outdir = os.path.join(tmp, "progress-" + form)
        r = Run([path, "-o", outdir], outdir, env=dict(ENV, NPF_REPLAY_PROGRESS_AFTER_MS="0"))
        if not check(r.rc == 0 and r.report is not None, "progress, %s: exit 0 with a report" % form,
                     "exit %d, %s" % (r.rc, r.stderr[-400:])):
            continue
        check(r.stderr.endswith("\n") and "\r" not in r.stderr and
              all(x.startswith("npuprof-replay: ") for x in r.stderr.splitlines()),
              "progress, %s: whole lines, each naming the program" % form, repr(r.stderr[-400:]))
        lines = r.stderr.splitlines()
        prog = [PROGRESS.match(x) for x in lines]
        n = next((k for k, m in enumerate(prog) if not m), len(lines))
        pct = [int(m.group(2)) for m in prog[:n]]
        check(n >= 2, "progress, %s: a progress line about every 16 MiB read, two at least" % form, repr(lines))
        eq("progress, %s: each names the input" % form, {m.group(1) for m in prog[:n]}, {path})
        check(all(0 < p < 100 for p in pct) and pct == sorted(set(pct)),
              "progress, %s: the percentage grows, below 100%%" % form, repr(pct))
        eq("progress, %s: each says the input's size" % form, {m.group(4) for m in prog[:n]}, {"%.1f" % total})
        bad = [m.group(0) for m in prog[:n] if abs(float(m.group(3)) / total * 100 - int(m.group(2))) > 1]
        check(not bad, "progress, %s: the percentage is the bytes read over the size" % form, repr(bad))
        # Reported once 16 MiB more have been read (a 1 MiB string is read whole), as documented.
        bad = [m.group(0) for k, m in enumerate(prog[:n], 1) if not 16 * k <= float(m.group(3)) <= 16 * k + 1.1]
        check(not bad, "progress, %s: the k-th line after about 16k MiB read" % form, repr(bad))
        eq("progress, %s: then the phases and the summary, last" % form, lines[n:],
           ["npuprof-replay: replaying device 0", "npuprof-replay: analysing", "npuprof-replay: writing the report",
            "npuprof-replay: writing memory.svg",
            "npuprof-replay: wrote %s/report.json, report.txt, timeline.csv and memory.svg" % outdir])
        q = Run([path, "-q", "-o", outdir], outdir, env=dict(ENV, NPF_REPLAY_PROGRESS_AFTER_MS="0"))
        check(q.rc == 0 and q.stderr == "", "progress, %s: none with -q" % form, "exit %d, %r" % (q.rc, q.stderr))
        if form == "pickle":
            h = Run([path, "-o", outdir], outdir, env=dict(ENV, NPF_REPLAY_PROGRESS_AFTER_MS="3600000"))
            eq("progress, %s: only the summary when the wait is an hour" % form, (h.rc, h.stderr.splitlines()),
               (0, lines[-1:]))
        os.unlink(path)


# --- the window directory, --json, -o -------------------------------------------------------

def test_db():
    """--db FILE: the replay as an SQLite database, queried here with SQL: a row per event that
    says what timeline.csv says, a row per block's life, the segments at dump time, and every
    event's frames through stack_frames."""
    S = 0x100000
    s = snapshot([seg(S, 8192, [blk(S, 1024, "active_allocated", 1000, frames=F1), blk(S + 1024, 7168)],
                      stream=7)],
                 [ev("alloc", S + 4096, 2048, 7, frames=F2), ev("free_requested", S + 4096, 2048, 7),
                  ev("free_completed", S + 4096, 2048, 7), ev("alloc", S, 1000, 7, frames=F1)])
    dbpath = os.path.join(tmp, "replay.db")
    r = run(write("db.pkl", pickle.dumps(s, protocol=4)), "--db", dbpath)
    if not check(r.rc == 0 and os.path.isfile(dbpath) and not [n for n in os.listdir(tmp) if n.startswith(".replay.db")],
                 "db: exit 0, the database written, no temporary left", "exit %d, %s" % (r.rc, r.last)):
        return
    c = sqlite3.connect(dbpath)
    q = lambda sql: c.execute(sql).fetchall()
    eq("db: the events, as timeline.csv says them",
       [[str(v) if v is not None else "" for v in row] for row in
        q("SELECT device, idx, action, printf('0x%x', addr), size, printf('0x%x', stream), allocated, requested,"
          " active, reserved, time_us FROM events ORDER BY device, idx")], r.rows[1:])
    eq("db: the blocks' lives: what was asked, the block, when allocated and freed",
       q("SELECT addr, size, block_size, alloc_idx, free_requested_idx, free_idx FROM blocks ORDER BY addr"),
       [(S, 1000, 1024, 3, None, None), (S + 4096, 2048, 2048, 0, 1, 2)])
    eq("db: the segments at dump time", q("SELECT device, addr, total, allocated, requested, stream FROM segments"),
       [(0, S, 8192, 1024, 1000, 7)])
    eq("db: the device, its rule and the sizes it gave", q("SELECT * FROM devices"), [(0, 4, "pytorch", 1)])
    eq("db: each allocation's innermost frame, through stack_frames",
       q("SELECT e.idx, f.name, f.filename, f.line FROM events e JOIN stack_frames sf ON sf.stack = e.stack"
         " AND sf.depth = 0 JOIN frames f ON f.id = sf.frame WHERE e.action = 'alloc' ORDER BY e.idx"),
       [(0, F2[0]["name"], F2[0]["filename"], F2[0]["line"]), (3, F1[0]["name"], F1[0]["filename"], F1[0]["line"])])
    c.close()
    if os.path.isdir(TESTDATA):
        path = os.path.join(TESTDATA, REAL[-1][1])
        with open(path, "rb") as f:
            snap = pickle.load(f)       # trusted test data
        rr = run(path, "--db", dbpath)
        c = sqlite3.connect(dbpath)
        eq("db: a real snapshot's events, all of them", c.execute("SELECT count(*) FROM events").fetchone()[0],
           sum(len(t) for t in snap["device_traces"]))
        eq("db: at dump time its segments' bytes are the replay's",
           c.execute("SELECT sum(allocated), sum(requested) FROM segments WHERE device = 0").fetchone(),
           (rr.devices()[0]["dump"]["allocated"], rr.devices()[0]["dump"]["requested"]))
        c.close()
    # A trace is no snapshot: --db says so, exit 1.
    t = run(write("db-trace.json", json.dumps({"traceEvents": []}).encode()), "--db", os.path.join(tmp, "t.db"))
    check(t.rc == 1 and "--db" in t.last and "one snapshot" in t.last, "db: a run with no snapshot is refused",
          "exit %d, %s" % (t.rc, t.last))


def split_check(name, path, args, want_pieces):
    """Split @path with @args: each piece a pickle Python loads and npuprof-replay replays
    without an inconsistency; their entries add up to the file's, device by device; each
    piece ends in the state the next begins from; the pieces' timelines, one after the other,
    are the file's."""
    outdir = os.path.join(tmp, name + "-split")
    sp = Run(["split", "-q", "-o", outdir] + args + [path], None)
    pieces = sorted(glob.glob(os.path.join(outdir, "*.pickle")))
    if not check(sp.rc == 0 and len(pieces) == want_pieces and sp.sanitizer_clean(),
                 "%s: split into %d pieces" % (name, want_pieces), "exit %d, %s, %r" % (sp.rc, sp.last, pieces)):
        return
    whole = run(path)
    runs = [run(piece) for piece in pieces]
    check(all(r.rc == 0 and r.report is not None for r in runs), "%s: every piece replays" % name,
          [r.last for r in runs])
    for piece in pieces:
        with open(piece, "rb") as f:
            data = f.read()
        p = pickle.loads(data)          # Python's own unpickler: a plain data pickle
        # What repeats is written once: each string, each stack (one list, however many
        # entries and blocks hold it), each frame; the piece is smaller than it would be
        # without its memo, as Python writes it without one (Pickler.fast), and a large one a
        # fraction of that.
        stacks = [e["frames"] for t in p["device_traces"] for e in t] + \
                 [b["frames"] for g in p["segments"] for b in g["blocks"]]
        one = {}
        for st in stacks:
            one.setdefault(repr(st), st)
        flat = io.BytesIO()
        pk = pickle.Pickler(flat, protocol=2)
        pk.fast = True
        pk.dump(p)
        gets = sum(1 for op, _, _ in pickletools.genops(data) if op.name in ("BINGET", "LONG_BINGET"))
        flat_len = len(flat.getvalue())
        check(all(st is one[repr(st)] for st in stacks) and gets > 0 and len(data) < flat_len and
              (flat_len < 100000 or len(data) * 3 < flat_len),
              "%s: %s writes each string and stack once, then refers to it" % (name, os.path.basename(piece)),
              "%d memo reads, %d bytes, %d without a memo, %d stacks of %d distinct" %
              (gets, len(data), len(flat.getvalue()), len(set(map(id, stacks))), len(one)))
    if not all(r.report for r in runs):
        return
    eq("%s: no piece has an inconsistency" % name,
       [d["inconsistencies"]["count"] for r in runs for d in r.devices()], [0] * sum(len(r.devices()) for r in runs))
    for dev in [d["device"] for d in whole.devices()]:
        ds = [next(d for d in r.devices() if d["device"] == dev) for r in runs]
        wd = next(d for d in whole.devices() if d["device"] == dev)
        eq("%s device %d: the pieces' entries add up to the file's" % (name, dev), sum(d["events"] for d in ds),
           wd["events"])
        eq("%s device %d: the first piece begins where the file does, each piece where the one before ends, "
           "the last ends at the file's dump" % (name, dev),
           [strip(d["start"]) for d in ds] + [strip(ds[-1]["dump"])],
           [strip(wd["start"])] + [strip(d["dump"]) for d in ds[:-1]] + [strip(wd["dump"])])
        eq("%s device %d: the pieces' timelines, one after the other, are the file's" % (name, dev),
           [row[2:] for r in runs for row in r.timeline(dev)], [row[2:] for row in whole.timeline(dev)])


def strip(state):
    """A start or dump state without its segment count, which the start has not."""
    return {k: v for k, v in state.items() if k != "segments"}


def test_split():
    S = 0x100000
    s = snapshot([seg(S, 8192, [blk(S, 1024, "active_allocated", 1000, frames=F1), blk(S + 1024, 7168)])],
                 [ev("alloc", S + 4096, 2048, frames=F2), ev("free_requested", S + 4096, 2048),
                  ev("free_completed", S + 4096, 2048), ev("segment_alloc", 0x900000, 4096),
                  ev("alloc", 0x900000, 512), ev("alloc", S, 1000, frames=F1), ev("free_requested", 0x900000, 512),
                  ev("free_completed", 0x900000, 512), ev("segment_free", 0x900000, 4096)])
    split_check("split", write("split.pkl", pickle.dumps(s, protocol=4)), ["--slices", "3"], 3)
    if os.path.isdir(TESTDATA):
        # 9,700 entries at most 3,000 to a piece: four pieces.
        split_check("split real", os.path.join(TESTDATA, REAL[-1][1]), ["--max-entries", "3000"], 4)
    u = Run(["split", "-q", write("split-usage.pkl", pickle.dumps(s, protocol=4))], None)
    check(u.rc == 2 and "--slices" in u.last, "split: neither --slices nor --max-entries is a usage error", u.last)
    u = Run(["--slices", "2", os.path.join(tmp, "split-usage.pkl")], None)
    check(u.rc == 2 and "for split" in u.last, "--slices outside split is a usage error", u.last)


def test_host_window():
    """A host window without the heap tracker: its trace.json samples the process's resident
    memory at every step ("memory" counter events), and memory.svg draws it over the window,
    its peak marked, instead of a chart that says "no events"."""
    win = os.path.join(tmp, "rank3_start5_stop9")
    os.mkdir(win)
    with open(os.path.join(win, "manifest.json"), "w") as f:
        json.dump({"rank": 3, "start_step": 5, "stop_step": 9}, f)
    events, ts, rss = [], 1.7e15, [2000, 2600, 2400, 3100, 2900]
    for k, kib in enumerate(rss):
        events.append({"name": "ProfilerStep#%d" % (5 + k), "ph": "X", "ts": ts, "dur": 1000, "pid": 9, "tid": 9,
                       "args": {"step": 5 + k, "rss_kib": kib}})
        events.append({"name": "memory", "ph": "C", "ts": ts, "pid": 9, "args": {"rss_kib": kib}})
        events.append({"name": "cpu", "ph": "C", "ts": ts, "pid": 9, "args": {"cpu_ms": 0.5}})
        ts += 1000
    with open(os.path.join(win, "trace.json"), "w") as f:
        json.dump({"traceEvents": events}, f)
    r = Run([win, "-q"], os.path.join(win, "analysis"))
    if not check(r.rc == 0 and r.report is not None and r.sanitizer_clean(), "host window: exit 0 with a report",
                 "exit %d, %s" % (r.rc, r.last)):
        return
    tr = r.report["traces"][0]
    eq("host window: the trace's resident memory, its samples and peak",
       (tr["rss"]["samples"], tr["rss"]["peak_bytes"], tr["rss"]["peak_time_us"]), (5, 3100 * 1024, 1.7e15 + 3000))
    eq("host window: the counters are still no events of the trees", (tr["events"], tr["ignored"]), (5, 10))
    with open(os.path.join(win, "analysis", "memory.svg")) as f:
        svg = f.read()
    check("process resident memory" in svg and "rss (max 3.0 MiB)" in svg and "no events" not in svg and
          'id="p0-peak"' in svg, "host window: memory.svg draws the resident memory over the window, its peak marked",
          svg[:300])
    steps = re.search(r'id="p0-steps" d="([^"]*)"', svg)
    check(steps is not None and steps.group(1).count("M") == 5 and "ProfilerStep (5)" in svg,
          "host window: each of the 5 steps' beginnings is marked on it", steps and steps.group(1))


def test_forms():
    s = snapshot([seg(0x10000, 4096, [blk(0x10000, 512, "active_allocated", 500), blk(0x10200, 3584)])],
                 [ev("segment_alloc", 0x10000, 4096), ev("alloc", 0x10000, 500)])
    win = os.path.join(tmp, "rank0_start10_stop20")
    os.mkdir(win)
    manifest = {"rank": 0, "start_step": 10, "stop_step": 20}
    with open(os.path.join(win, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    with open(os.path.join(win, "memory_snapshot.pkl"), "wb") as f:
        pickle.dump(s, f, protocol=4)
    r = Run([win, "-q", "--json"], os.path.join(win, "analysis"))
    if check(r.rc == 0 and r.report is not None, "window directory: exit 0, report in DIR/analysis",
             "exit %d, %s" % (r.rc, r.last)):
        eq("window directory: kind", r.report["kind"], "window")
        eq("window directory: the manifest is in the report", r.report["window"], manifest)
        eq("window directory: the snapshot was replayed", [pbi(d, "allocated") for d in r.devices()], [(512, 1)])
        try:
            out = json.loads(r.stdout)
        except ValueError as e:
            out = "not JSON: %s" % e
        eq("--json: stdout is report.json", out, r.report)
    check(r.json_error is None, "report.json is valid JSON", r.json_error or "")
    r = run(os.path.join(win, "memory_snapshot.pkl"), outdir=os.path.join(tmp, "fresh-dir"))
    check(r.rc == 0 and os.path.isfile(os.path.join(tmp, "fresh-dir", "report.json")) and
          os.path.isfile(os.path.join(tmp, "fresh-dir", "timeline.csv")) and
          os.path.isfile(os.path.join(tmp, "fresh-dir", "memory.svg")),
          "-o creates the output directory with report.json, timeline.csv and memory.svg", r.last)
    eq("a snapshot file: kind", r.report and r.report["kind"], "snapshot")

    # An output that cannot be written (its temporary's name taken by a directory): a clear
    # error, exit 1, and no report.json, which would say the analysis is complete.
    for k, name in enumerate(("timeline.csv", "report.txt", "memory.svg", "report.json")):
        outdir = os.path.join(tmp, "blocked-%d" % k)
        os.makedirs(os.path.join(outdir, "." + name + ".tmp"))
        r = run(os.path.join(win, "memory_snapshot.pkl"), outdir=outdir)
        check(r.rc == 1 and "cannot write %s/%s" % (outdir, name) in r.last and "Is a directory" in r.last and
              r.report is None and
              not os.path.exists(os.path.join(outdir, "report.json")) and r.sanitizer_clean(),
              "%s cannot be written: exit 1, the error names it, no report.json" % name,
              "exit %d, %s" % (r.rc, r.last))


def main():
    if not os.access(REPLAY, os.X_OK):
        print("test-replay: %s is not built" % REPLAY, file=sys.stderr)
        print("replay: 0 passed, 1 failed")
        return 1
    try:
        for t in (test_real, test_actions, test_expandable, test_workspace, test_inconsistencies, test_ghosts,
                  test_leaks, test_top_sites, test_peak_state, test_legacy, test_times_and_free_delay, test_full_segments, test_rounding, test_plan, test_plan_order, test_plan_many_live, test_streams, test_two_devices,
                  test_hostile, test_progress, test_host_window, test_db, test_split, test_forms):
            try:
                t()
            except Exception as e:  # a broken test is a failed test, and the others still run
                traceback.print_exc()
                check(False, "%s: %s: %s" % (t.__name__, type(e).__name__, e))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if skipped:
        print("replay: %d skipped" % skipped)
    print("replay: %d passed, %d failed" % (passed, failed), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
