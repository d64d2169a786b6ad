#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# The inputs of the hostile battery too big to keep in git, made at test time:
#   tests/hostile/gen-big.py NAME OUT      (NAME is the file's name without NNN- and .json)
import sys

def ranks_list(items):
    return '{"start_step": 1, "ranks": [' + ", ".join(items) + "]}"

BIG = {
    # 100000 '[' and an object 100000 deep: the parser's depth limit, not the stack, stops them.
    "nesting-brackets-100000": lambda: "[" * 100000,
    "nesting-braces-in-value-100000": lambda: '{"metadata": ' + '{"a": ' * 100000,
    # Nearly 1 MiB of ranks, the last one out of range: its place is found at the end of the file.
    "size-huge-rank-array-bad-last": lambda: ranks_list([str(i % 65536) for i in range(150000)] + ["65536"]),
    # 90000 items that each select every rank, then a bad one: costs its size, not 90000 x 65536 steps.
    "size-huge-range-strings": lambda: ranks_list(['"0-65535"'] * 90000 + ['"x"']),
    # 100000 bad items: every one counted, 32 kept.
    "size-huge-bad-array": lambda: '{"start_step": 1, "host_sys": [' + ", ".join(['"gpu"'] * 100000) + "]}",
    "size-many-unknown-keys-and-one-bad": lambda: "{" + ", ".join('"k%d": %d' % (i, i) for i in range(40000))
                                                  + ', "steps": 0, "start_step": 1}',
    # Over the 1 MiB cap: by one byte, and by ten times.
    "size-one-mib-plus-one": lambda: '{"start_step": 1}' + " " * (1048577 - 17),
    "size-ten-mib": lambda: '{"start_step": 1, "metadata": {"pad": "' + "p" * (10 * 1048576) + '"}}',
}

if __name__ == "__main__":
    name, out = sys.argv[1], sys.argv[2]
    with open(out, "w") as f:
        f.write(BIG[name]())
