# SPDX-License-Identifier: MIT
"""A strict reader of the Prometheus text exposition format 0.0.4, for the tests.

    python3 tests/promtext.py check FILE...   exit 0 if every FILE is valid, else name the faults
    python3 tests/promtext.py json FILE       print {"name{label=\"v\",...}": value, ...}

Checked: HELP and TYPE lines (a known type, at most one of each per metric, before its
samples), metric and label names, label values and their escapes, values (floats, NaN,
+Inf, -Inf), an optional integer timestamp, samples of a metric in one group, no sample
twice, a final newline; and the conventions: a counter's name ends in _total, no label
name starts with __.
"""
import math
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}
SUFFIXES = ("_bucket", "_sum", "_count")


class Invalid(ValueError):
    pass


def parse_value(s, where):
    if s in ("NaN", "+Inf", "-Inf"):
        return float(s.replace("Inf", "inf").replace("NaN", "nan"))
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", s):
        raise Invalid("%s: value %r is not a number" % (where, s))
    return float(s)


def parse_labels(s, i, where):
    """Labels from s[i] == '{'. Return: (sorted tuple of (name, value), index past '}')."""
    labels, i = [], i + 1
    while True:
        if s.startswith("}", i):
            return tuple(sorted(labels)), i + 1
        m = LABEL.match(s, i)
        if not m:
            raise Invalid("%s: bad label name at column %d" % (where, i + 1))
        name, i = m.group(0), m.end()
        if name.startswith("__"):
            raise Invalid("%s: label name %s is reserved" % (where, name))
        if any(n == name for n, _ in labels):
            raise Invalid("%s: label %s twice" % (where, name))
        if not s.startswith('="', i):
            raise Invalid("%s: label %s without =\"value\"" % (where, name))
        i += 2
        value = []
        while True:
            if i >= len(s):
                raise Invalid("%s: unterminated value of label %s" % (where, name))
            c = s[i]
            if c == "\\":
                nxt = s[i + 1:i + 2]
                if nxt not in ("\\", '"', "n"):
                    raise Invalid("%s: bad escape \\%s in label %s" % (where, nxt, name))
                value.append("\n" if nxt == "n" else nxt)
                i += 2
            elif c == '"':
                i += 1
                break
            else:
                value.append(c)
                i += 1
        labels.append((name, "".join(value)))
        if s.startswith(",", i):
            i += 1
        elif not s.startswith("}", i):
            raise Invalid("%s: expected , or } after label %s" % (where, name))


def family_of(name, types):
    for suffix in SUFFIXES:
        base = name[:-len(suffix)]
        if name.endswith(suffix) and types.get(base) in ("histogram", "summary"):
            return base
    return name


def parse(text):
    """Return: {(name, labels): value}. Raise Invalid on the first fault."""
    if text == "":
        raise Invalid("empty exposition")
    if not text.endswith("\n"):
        raise Invalid("the last line does not end with a newline (a partial file?)")
    types, helps, samples, done, current = {}, {}, {}, set(), None
    for n, line in enumerate(text[:-1].split("\n"), 1):
        where = "line %d" % n
        if line.strip() == "":
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 2 and parts[1] in ("HELP", "TYPE"):
                if len(parts) < 3 or not NAME.fullmatch(parts[2]):
                    raise Invalid("%s: %s without a valid metric name" % (where, parts[1]))
                name = parts[2]
                if name in done or name == current:
                    raise Invalid("%s: %s %s after its samples" % (where, parts[1], name))
                if parts[1] == "TYPE":
                    if name in types:
                        raise Invalid("%s: second TYPE for %s" % (where, name))
                    if len(parts) != 4 or parts[3] not in TYPES:
                        raise Invalid("%s: TYPE %s has no known type" % (where, name))
                    if parts[3] == "counter" and not name.endswith("_total"):
                        raise Invalid("%s: counter %s does not end in _total" % (where, name))
                    types[name] = parts[3]
                else:
                    if name in helps:
                        raise Invalid("%s: second HELP for %s" % (where, name))
                    doc = parts[3] if len(parts) == 4 else ""
                    if re.search(r"\\[^\\n]|\\$", doc):
                        raise Invalid("%s: bad escape in HELP %s" % (where, name))
                    helps[name] = doc
            continue
        m = NAME.match(line)
        if not m:
            raise Invalid("%s: no metric name" % where)
        name, i = m.group(0), m.end()
        labels = ()
        if line.startswith("{", i):
            labels, i = parse_labels(line, i, where)
        rest = line[i:]
        if not rest.startswith(" "):
            raise Invalid("%s: no space before the value of %s" % (where, name))
        fields = rest.split()
        if len(fields) not in (1, 2):
            raise Invalid("%s: expected a value and maybe a timestamp, got %r" % (where, rest))
        value = parse_value(fields[0], where)
        if len(fields) == 2 and not re.fullmatch(r"-?\d+", fields[1]):
            raise Invalid("%s: timestamp %r is not an integer" % (where, fields[1]))
        family = family_of(name, types)
        if family != current:
            if family in done:
                raise Invalid("%s: samples of %s are not in one group" % (where, family))
            if current is not None:
                done.add(current)
            current = family
        if (name, labels) in samples:
            raise Invalid("%s: sample %s%s twice" % (where, name, dict(labels)))
        samples[(name, labels)] = value
    return samples


def key(name, labels):
    return name + ("{%s}" % ",".join('%s="%s"' % kv for kv in labels) if labels else "")


def main(argv):
    if len(argv) < 3 or argv[1] not in ("check", "json"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    bad = 0
    for path in argv[2:]:
        try:
            with open(path, encoding="utf-8") as f:
                samples = parse(f.read())
        except (OSError, UnicodeDecodeError, Invalid) as e:
            print("%s: %s" % (path, e), file=sys.stderr)
            bad += 1
            continue
        if argv[1] == "json":
            import json
            print(json.dumps({key(n, l): (v if math.isfinite(v) else str(v)) for (n, l), v in samples.items()}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
