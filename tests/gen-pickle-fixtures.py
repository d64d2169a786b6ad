#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate the fixtures of tests/test-pickle.c from CPython's own pickle module.

    tests/gen-pickle-fixtures.py > tests/pickle-fixtures.h
    tests/gen-pickle-fixtures.py --corpus tests/fuzz/corpus-pickle
    tests/gen-pickle-fixtures.py --handoff build/tests/handoff.pkl

The header holds, as C byte arrays, pickles written by CPython's pickle of a document that
uses every data opcode, for protocols 0 to 5, and real pickles that the reader must refuse,
each with the name and byte offset of its first refused opcode (found with pickletools).
For every document it also holds a canonical text of what the pickle holds, written here
from the Python objects; the test writes the same text from the C tree and compares them.
For the real torch_npu snapshots in ../shared/testdata/torch_npu_snapshots it holds facts
only (counts, sums, addresses, a hash of the canonical text): the files are not ours to
commit. Run it from the project root.
"""
import collections
import copyreg
import io
import os
import pickle
import pickletools
import struct
import sys
import types

SNAPSHOT_DIR = "../shared/testdata/torch_npu_snapshots"
SNAPSHOT_DEVICES_MAX = 8
INLINE_BYTES_MAX = 40          # longer strings and bytes are canonicalised as a hash

REFUSED = {
    "GLOBAL", "STACK_GLOBAL", "REDUCE", "BUILD", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX",
    "EXT1", "EXT2", "EXT4", "PERSID", "BINPERSID", "NEXT_BUFFER", "READONLY_BUFFER",
}


def fnv1a64(data, h=0xCBF29CE484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


class Canon:
    """The canonical text of a value; tests/test-pickle.c writes the same from a tree.

    Every value ends with ','. None N, booleans T F, integers i<n> (signed 64-bit),
    u<n> (above INT64_MAX, below 2**64), h+ h- (wider: only the sign is kept), floats
    f<the 16 hex digits of the IEEE bits>, strings s<len>:<hex> (UTF-8) and bytes
    b<len>:<hex>, or s<len>#<fnv1a64 hex> past 40 bytes, lists [...], tuples (...),
    dicts {key value ...}, sets <...>.
    """

    def __init__(self, keep_text=True):
        self.keep_text = keep_text
        self.parts = []
        self.hash = 0xCBF29CE484222325
        self.length = 0

    def put(self, s):
        b = s.encode("ascii")
        self.hash = fnv1a64(b, self.hash)
        self.length += len(b)
        if self.keep_text:
            self.parts.append(s)

    def text(self):
        return "".join(self.parts)

    def blob(self, tag, b):
        if len(b) <= INLINE_BYTES_MAX:
            self.put("%s%d:%s," % (tag, len(b), b.hex()))
        else:
            self.put("%s%d#%016x," % (tag, len(b), fnv1a64(b)))

    def value(self, o):
        # An explicit stack: the real snapshots are shallow, but nothing here should care.
        stack = [o]
        while stack:
            o = stack.pop()
            if type(o) is _Close:
                self.put(o + ",")
            elif o is None:
                self.put("N,")
            elif o is True:
                self.put("T,")
            elif o is False:
                self.put("F,")
            elif isinstance(o, int):
                if -2**63 <= o < 2**63:
                    self.put("i%d," % o)
                elif 2**63 <= o < 2**64:
                    self.put("u%d," % o)
                else:
                    self.put("h+," if o > 0 else "h-,")
            elif isinstance(o, float):
                self.put("f%016x," % struct.unpack("<Q", struct.pack("<d", o))[0])
            elif isinstance(o, str):
                self.blob("s", o.encode("utf-8", "surrogatepass"))
            elif isinstance(o, (bytes, bytearray)):
                self.blob("b", bytes(o))
            elif isinstance(o, dict):
                self.put("{")
                stack.append(_Close("}"))
                for k, v in reversed(list(o.items())):
                    stack.append(v)
                    stack.append(k)
            else:
                opening, closing = {list: "[]", tuple: "()", set: "<>", frozenset: "<>"}[type(o)]
                self.put(opening)
                stack.append(_Close(closing))
                stack.extend(reversed(list(o)))


class _Close(str):
    """A closing bracket on Canon's stack, told apart from a string value by its type."""


def canon_of(o, keep_text=True):
    c = Canon(keep_text)
    c.value(o)
    return c


# --- the documents -----------------------------------------------------------------------

INTS = [0, 1, 255, 256, 65535, 65536, -1, -255, -256, 2**31 - 1, -2**31, 2**31, -2**31 - 1,
        2**32, 2**63 - 1, -2**63, 2**63, 2**64 - 1, 2**64, -2**63 - 1, 2**200, -2**200,
        2**2100, -2**2100]
FLOATS = [0.0, -0.0, 1.5, -2.25, 1e308, 5e-324, float("inf"), float("-inf"), float("nan"),
          0.1]
STRS = ["", "a", "hello", "h\u00e9llo \u2713 \U0001f40d", "back\\slash\nnewline\ttab\x00nul",
        "\u00ff\u0100", "x" * 300]


def small_doc(proto):
    """Every data opcode of @proto that CPython writes for plain data (no GLOBAL needed)."""
    shared = [1, "two"]
    doc = {
        "none": None,
        "true": True,
        "false": False,
        "ints": list(INTS),
        "floats": list(FLOATS),
        "strs": list(STRS),
        "tuples": [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)],
        "lists": [[], [None], [1, 2], [1, 2, 3], [1, 2, 3, 4]],
        "nested": {"a": {"b": {"c": {}}}, "k": [{}, {"x": 1}], "t": ((1, (2, (3,))),)},
        "shared": [shared, shared, (shared,)],
        "keys": {1: "one", -1: "minus one", 2**70: "huge", 1.5: "float", (1, 2): "tuple",
                 None: "none", False: "false"},
    }
    if proto >= 3:
        doc["bytes"] = [b"", b"\x00\xff", bytes(range(256)), b"y" * 300]
    if proto >= 4:
        doc["sets"] = [set(), {1, 2, 3}, frozenset(), frozenset({"a"}), {(1, 2)}]
    if proto >= 5:
        doc["bytearray"] = [bytearray(), bytearray(b"\x01\x02\x03")]
    return doc


def big_doc():
    """Long strings, batches of APPENDS and SETITEMS, more than 256 memo slots, frames."""
    shared = {"shared": True}
    doc = {
        "str300": "s" * 300,
        "str65600": "".join(chr(0x61 + i % 26) for i in range(65600)),
        "dict1200": {i: i * 3 for i in range(1200)},
        "list1200": ["item%d" % i for i in range(1200)],
        "first": shared,
        "tail": [shared, shared],
    }
    return doc


def reduce_doc():
    """Trace entries for the reduce callback: one entry referenced three times (the memo sees
    the record), one referenced again only after it was placed, a dict that stays a dict."""
    e1 = {"action": "alloc", "addr": 4096, "size": 512}
    e2 = {"action": "free", "addr": 4096, "size": 512}
    e3 = {"action": "alloc", "addr": 8192, "size": 64}
    oom = {"action": "oom", "addr": 0, "size": 2**40}
    return {"traces": [e1, e2, e1, oom], "late": [e3], "plain": [{"x": 1}, (1, 2)], "again": e3,
            "other": {"k": e1}}


def reduce_root_doc():
    """A document that is itself a trace entry: the root is reduced too."""
    return {"action": "free", "addr": 2**63 + 5, "size": 7}


# --- the pickles the reader must refuse, as CPython writes them --------------------------

class _PersistentPickler(pickle.Pickler):
    def persistent_id(self, obj):
        return "ref" if obj == "persistent" else None


def _persistent(proto):
    out = io.BytesIO()
    _PersistentPickler(out, proto).dump(["persistent"])
    return out.getvalue()


def _extension(code):
    copyreg.add_extension("collections", "OrderedDict", code)
    try:
        return pickle.dumps(collections.OrderedDict(), 2)
    finally:
        copyreg.remove_extension("collections", "OrderedDict", code)


def hostile():
    out = []
    for p in range(6):
        out.append(("os.system, protocol %d" % p, pickle.dumps(os.system, p)))
    for p in (2, 4):
        out.append(("OrderedDict(), protocol %d" % p, pickle.dumps(collections.OrderedDict(), p)))
        out.append(("SimpleNamespace, protocol %d" % p, pickle.dumps(types.SimpleNamespace(a=1), p)))
    out.append(("complex, protocol 2", pickle.dumps(complex(1, 2), 2)))
    out.append(("bytes, protocol 2", pickle.dumps(b"abc", 2)))
    out.append(("set, protocol 3", pickle.dumps({1, 2}, 3)))
    out.append(("bytearray, protocol 4", pickle.dumps(bytearray(b"x"), 4)))
    out.append(("persistent id, protocol 0", _persistent(0)))
    out.append(("persistent id, protocol 2", _persistent(2)))
    out.append(("extension 240", _extension(240)))
    out.append(("extension 300", _extension(300)))
    out.append(("extension 70000", _extension(70000)))
    out.append(("out-of-band buffer", pickle.dumps(pickle.PickleBuffer(b"abc"), 5,
                                                   buffer_callback=lambda b: False)))
    result = []
    for name, data in out:
        first = next((op.name, pos) for op, arg, pos in pickletools.genops(data) if op.name in REFUSED)
        result.append((name, data, first[0], first[1]))
    return result


# --- facts about the real snapshots ------------------------------------------------------

def snapshot_facts(path):
    with open(path, "rb") as f:
        data = f.read()
    d = pickle.loads(data)
    traces = d["device_traces"]
    assert len(traces) <= SNAPSHOT_DEVICES_MAX
    c = canon_of(d, keep_text=False)
    facts = {
        "name": os.path.basename(path),
        "size": len(data),
        "segments": len(d["segments"]),
        "blocks": sum(len(s["blocks"]) for s in d["segments"]),
        "segment_bytes": sum(s["total_size"] for s in d["segments"]),
        "devices": len(traces),
        "entries": [len(t) for t in traces],
        "size_sum": [sum(e.get("size", 0) for e in t) for t in traces],
        "first_addr": [t[0]["addr"] if t else 0 for t in traces],
        "last_addr": [t[-1]["addr"] if t else 0 for t in traces],
        "canon_len": c.length,
        "canon_hash": c.hash,
    }
    return facts


# --- output ------------------------------------------------------------------------------

def c_bytes(data, indent="        "):
    """@data as adjacent C string literals: printable ASCII as is, the rest in octal escapes
    of three digits (an octal escape never swallows a following digit)."""
    lines, line = [], ""
    for b in data:
        ch = chr(b)
        if 0x20 <= b < 0x7F and ch not in '"\\?':
            line += ch
        else:
            line += "\\%03o" % b
        if len(line) >= 92:
            lines.append(indent + '"' + line + '"')
            line = ""
    if line or not lines:
        lines.append(indent + '"' + line + '"')
    return "\n".join(lines)


def c_text(s, indent="        "):
    """Printable ASCII @s as adjacent C string literals of at most 96 characters."""
    assert all(0x20 <= ord(ch) < 0x7F for ch in s)
    s = s.replace("\\", "\\\\").replace('"', '\\"').replace("?", "\\?")
    return "\n".join(indent + '"' + s[i:i + 96] + '"' for i in range(0, len(s), 96)) or indent + '""'


def emit_fixture(w, cname, data):
    w("static const unsigned char %s[%d] =\n%s;\n" % (cname, len(data), c_bytes(data)))


def main_header():
    out = []
    w = out.append
    w("/* SPDX-License-Identifier: MIT */\n")
    w("/*\n * Generated by tests/gen-pickle-fixtures.py; do not edit. The pickles below were written\n"
      " * by CPython %s's own pickle module (the reference writer), the canonical texts from the\n"
      " * same Python objects, and the snapshot facts from ../shared/testdata/torch_npu_snapshots\n"
      " * read with pickle.load().\n */\n" % sys.version.split()[0])
    w("#ifndef NPUPROF_TESTS_PICKLE_FIXTURES_H\n#define NPUPROF_TESTS_PICKLE_FIXTURES_H\n\n")
    w("#include <stddef.h>\n#include <stdint.h>\n\n")

    w("struct fx_doc {\n        const char *name;\n        int proto;\n        const unsigned char *data;\n"
      "        size_t len;\n        const char *canon;          /* NULL: compare canon_len and canon_hash */\n"
      "        size_t canon_len;\n        uint64_t canon_hash;\n};\n\n")
    small = [("small, protocol %d" % p, "fx_small_p%d" % p, p, small_doc(p), True) for p in range(6)]
    # 3 and 5 write this document as 2 and 4 do, but for the PROTO byte.
    big = [("big, protocol %d" % p, "fx_big_p%d" % p, p, big_doc(), False) for p in (2, 4)]
    reduce = [("reduce, protocol %d" % p, "fx_reduce_p%d" % p, p, reduce_doc(), True) for p in range(6)]
    reduce_root = [("reduce root, protocol %d" % p, "fx_reduce_root_p%d" % p, p, reduce_root_doc(), True)
                   for p in (0, 2, 4)]
    for array, docs in (("fx_docs", small + big), ("fx_reduce", reduce), ("fx_reduce_root", reduce_root)):
        for name, cname, p, doc, inline in docs:
            emit_fixture(w, cname, pickle.dumps(doc, p))
            if inline:
                w("static const char %s_canon[] =\n%s;\n\n" % (cname, c_text(canon_of(doc).text())))
            else:
                w("\n")
        w("static const struct fx_doc %s[] = {\n" % array)
        for name, cname, p, doc, inline in docs:
            c = canon_of(doc)
            w('        { "%s", %d, %s, sizeof(%s), %s, %d, UINT64_C(0x%016x) },\n'
              % (name, p, cname, cname, cname + "_canon" if inline else "NULL", c.length, c.hash))
        w("};\n\n")

    batches = batch_docs()
    for name, cname, p, data, doc in batches:
        emit_fixture(w, cname, data)
    w("\n/* Batches of flat dicts, read by the batch fast path and by the opcodes one by one: each\n"
      " * has BATCH_ENTRIES entries, read by the fast path unless the name says otherwise. */\n")
    w("#define FX_BATCH_ENTRIES %d\n" % BATCH_ENTRIES)
    w("static const struct fx_doc fx_batches[] = {\n")
    for name, cname, p, data, doc in batches:
        c = canon_of(doc)
        w('        { "%s", %d, %s, sizeof(%s), NULL, %d, UINT64_C(0x%016x) },\n'
          % (name, p, cname, cname, c.length, c.hash))
    w("};\n\n")

    w("struct fx_hostile {\n        const char *name;\n        const unsigned char *data;\n        size_t len;\n"
      "        const char *opcode;         /* the first refused opcode */\n        size_t offset;\n};\n\n")
    hs = hostile()
    for i, (name, data, op, pos) in enumerate(hs):
        emit_fixture(w, "fx_hostile_%d" % i, data)
    w("\nstatic const struct fx_hostile fx_hostiles[] = {\n")
    for i, (name, data, op, pos) in enumerate(hs):
        w('        { "%s", fx_hostile_%d, sizeof(fx_hostile_%d), "%s", %d },\n' % (name, i, i, op, pos))
    w("};\n\n")

    w("#define FX_SNAPSHOT_DIR \"%s\"\n#define FX_DEVICES_MAX %d\n\n" % (SNAPSHOT_DIR, SNAPSHOT_DEVICES_MAX))
    w("struct fx_snapshot {\n        const char *name;\n        size_t size;\n        size_t segments;\n"
      "        size_t blocks;\n        uint64_t segment_bytes;     /* sum of total_size */\n"
      "        size_t devices;             /* len(device_traces) */\n"
      "        size_t entries[FX_DEVICES_MAX];\n        uint64_t size_sum[FX_DEVICES_MAX];\n"
      "        uint64_t first_addr[FX_DEVICES_MAX];\n        uint64_t last_addr[FX_DEVICES_MAX];\n"
      "        size_t canon_len;\n        uint64_t canon_hash;\n};\n\n")
    w("static const struct fx_snapshot fx_snapshots[] = {\n")
    names = sorted(n for n in os.listdir(SNAPSHOT_DIR) if n.endswith(".pkl")) if os.path.isdir(SNAPSHOT_DIR) else []
    if not names:
        sys.exit("gen-pickle-fixtures: no snapshots in %s; run from the project root" % SNAPSHOT_DIR)
    for n in names:
        f = snapshot_facts(os.path.join(SNAPSHOT_DIR, n))

        def arr(xs):
            return "{ " + ", ".join("UINT64_C(%d)" % x for x in xs) + " }"
        w('        { "%s", %d, %d, %d, UINT64_C(%d), %d,\n          %s,\n          %s,\n'
          '          %s,\n          %s,\n          %d, UINT64_C(0x%016x) },\n'
          % (f["name"], f["size"], f["segments"], f["blocks"], f["segment_bytes"], f["devices"],
             arr(f["entries"]), arr(f["size_sum"]), arr(f["first_addr"]), arr(f["last_addr"]),
             f["canon_len"], f["canon_hash"]))
    w("};\n\n#endif /* NPUPROF_TESTS_PICKLE_FIXTURES_H */\n")
    sys.stdout.write("".join(out))


def snapshot_like(proto):
    """A tiny snapshot: the shape the snapshot reader's reduce callback sees."""
    frames = [{"name": "f", "filename": "a.py", "line": 3}]
    return {
        "segments": [{"device": 0, "address": 2**44, "total_size": 2**21, "stream": 0,
                      "segment_type": "small", "is_expandable": False, "frames": frames,
                      "blocks": [{"address": 2**44, "size": 512, "state": "active_allocated",
                                  "frames": frames}]}],
        "device_traces": [[{"action": "alloc", "addr": 2**44, "size": 512, "stream": 0,
                            "time_us": 1, "frames": frames},
                           {"action": "free_requested", "addr": 2**44, "size": 512, "stream": 0,
                            "frames": frames}]],
    }


BATCH_ENTRIES = 40


def trace_doc(n, shared_stack=False, fail_at=None, kept_every=None, entry_ref=False, nested=False, no_frames=False):
    """Trace entries as torch writes them: after a preamble that memoizes the frames, the
    action strings and the keys, a list of n flat dicts (in Python's batches of 1,000, which
    the reader's fast path reads), each with a stack of its own of 0 to 3 shared frames (no list, APPEND, APPENDS)
    and values of every kind a batch takes. shared_stack: every entry holds the same list
    (the memo slot of an entry of the batch itself); fail_at: that entry has "fail";
    kept_every: every k-th dict has no "action" and is kept as a dict; entry_ref: every entry
    but the first refers to the one before; nested: every entry holds a dict; no_frames:
    every stack is empty, and the batch has no list items at all."""
    frames = [{"name": "f%d" % i, "filename": "m%d.py" % (i % 3), "line": i} for i in range(8)]
    actions = ["alloc", "free_requested", "free_completed", "segment_map"]
    stack = [frames[0], frames[1]]
    entries = []
    for i in range(n):
        e = {"action": actions[i % 4], "addr": 2**44 + 512 * i, "size": (7, 300, 70000, 2**33, 2**70)[i % 5],
             "stream": -(i % 3), "frames": stack if shared_stack else [frames[(i + k) % 8] for k in range(i % 4)]}
        if no_frames:
            e["frames"] = []
        if i % 6 == 0:
            e["time_us"] = 0.5 * i
        if i % 9 == 0:
            e["compile_context"] = None
        if i % 10 == 0:
            e["is_expandable"] = i % 20 == 0
        if kept_every and i % kept_every == 0:
            del e["action"]
        if fail_at == i:
            e["fail"] = True
        if entry_ref and entries:
            e["prev"] = entries[-1]
        if nested:
            e["nested"] = {"k": i}
        entries.append(e)
    keys = ["action", "addr", "size", "stream", "frames", "time_us", "compile_context", "is_expandable", "fail", "prev",
            "nested", "k"]
    return {"preamble": [frames, actions, keys],
            "device_traces": [entries, entries[:1]]}


def with_frames(data, before, every):
    """data with a FRAME opcode (an 8-byte length of 0) before every every-th opcode named in
    before, past the preamble: where Python's framer may put one (before a value) or not."""
    start = data.index(b"device_traces")
    positions = [pos for op, arg, pos in pickletools.genops(data) if pos > start and op.name in before][::every]
    for pos in reversed(positions):
        data = data[:pos] + b"\x95" + struct.pack("<Q", 0) + data[pos:]
    return data


def batch_docs():
    """The documents of the batch fast path's tests: (name, C name, protocol, pickle, document)."""
    docs = []
    for p in range(2, 6):
        d = trace_doc(BATCH_ENTRIES)
        docs.append(("trace, protocol %d" % p, "fx_batch_p%d" % p, p, pickle.dumps(d, p), d))
    for name, cname, d in (("a stack shared by every entry", "fx_batch_shared",
                            trace_doc(BATCH_ENTRIES, shared_stack=True)),
                           ("a dict with fail in a batch", "fx_batch_fail", trace_doc(BATCH_ENTRIES, fail_at=17)),
                           ("dicts kept among entries", "fx_batch_kept", trace_doc(BATCH_ENTRIES, kept_every=3)),
                           ("entries with empty stacks", "fx_batch_no_frames", trace_doc(BATCH_ENTRIES, no_frames=True)),
                           ("entries that refer to the one before (left to the opcodes)", "fx_batch_entry_ref",
                            trace_doc(BATCH_ENTRIES, entry_ref=True)),
                           ("entries that hold a dict (left to the opcodes)", "fx_batch_nested",
                            trace_doc(BATCH_ENTRIES, nested=True))):
        docs.append((name, cname, 4, pickle.dumps(d, 4), d))
    d = trace_doc(BATCH_ENTRIES)
    values = ("EMPTY_DICT", "EMPTY_LIST", "BINGET", "LONG_BINGET", "BININT", "BININT1", "BININT2", "LONG1",
              "BINFLOAT", "NONE", "NEWTRUE", "NEWFALSE")
    for k in (1, 3):
        docs.append(("FRAME before every %d. value" % k, "fx_batch_frames%d" % k, 4,
                     with_frames(pickle.dumps(d, 4), values, k), d))
    docs.append(("FRAME before SETITEMS", "fx_batch_frames_setitems", 4,
                 with_frames(pickle.dumps(d, 4), ("SETITEMS",), 5), d))
    docs.append(("FRAME before MEMOIZE (left to the opcodes)", "fx_batch_frames_memoize", 4,
                 with_frames(pickle.dumps(d, 4), ("MEMOIZE",), 40), d))
    return docs


def handoff_doc(n=9500):
    """Trace entries across more batches than the reader reads before it hands them to its
    second thread (eight of 1,000), so that the batches after the first are read while the
    one before is built, and refer to what it memoized: frames first seen late, strings
    (user_metadata) first seen at the end of one hand-over and used in the next, and every
    thousandth entry holding the stack of the entry before."""
    frames = [{"name": "g%d" % k, "filename": "late.py", "line": k} for k in range(48)]
    tags = ["tag %d" % k for k in range(n // 300 + 1)]
    entries = []
    for i in range(n):
        stack = [frames[(i // 200 + k) % 48] for k in range(1 + i % 3)]
        if i % 1000 == 0 and entries:
            stack = entries[-1]["frames"]
        entries.append({"action": "alloc" if i % 2 == 0 else "free_requested", "addr": 2**44 + 512 * (i // 2),
                        "size": 512, "stream": 0, "frames": stack, "user_metadata": tags[i // 300]})
    return {"device_traces": [entries]}


def write_corpus(directory):
    """Small seeds for tests/fuzz/fuzz-pickle.c: a few per protocol, refused and cyclic ones."""
    os.makedirs(directory, exist_ok=True)
    seeds = {}
    for p in range(6):
        doc = small_doc(p)
        seeds["small-p%d" % p] = pickle.dumps(doc, p)
        seeds["ints-p%d" % p] = pickle.dumps(INTS, p)
        seeds["snapshot-p%d" % p] = pickle.dumps(snapshot_like(p), p)
        seeds["reduce-p%d" % p] = pickle.dumps(reduce_doc(), p)
        seeds["shared-p%d" % p] = pickle.dumps(doc["shared"], p)
        loop = []
        loop_tuple = (loop,)
        loop.append(loop_tuple)
        seeds["cycle-p%d" % p] = pickle.dumps(loop_tuple, p)
    seeds["strs-p0"] = pickle.dumps(STRS, 0)
    seeds["floats-p0"] = pickle.dumps(FLOATS, 0)
    seeds["appends-p2"] = pickle.dumps(list(range(1200)), 2)
    seeds["fail-p4"] = pickle.dumps([{"action": "alloc"}, {"fail": True}], 4)
    for name, cname, p, data, doc in batch_docs():
        if len(data) <= 16384:
            seeds[cname[3:].replace("_", "-")] = data
    for i, (name, data, op, pos) in enumerate(hostile()):
        seeds["refused-%02d" % i] = data
    for name, data in seeds.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--corpus":
        write_corpus(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "--handoff":
        with open(sys.argv[2], "wb") as f:
            pickle.dump(handoff_doc(), f, 4)
    elif len(sys.argv) == 1:
        main_header()
    else:
        sys.exit(__doc__)
