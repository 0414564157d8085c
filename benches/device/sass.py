#!/usr/bin/env python3
"""Summarises Nsight Compute's SASS source page (`ncu --import ... --page source
--csv --print-source sass`, plain or gzipped) of one kernel: the share of warp
instructions executed and of warp stall samples by opcode, then by execution
count — lines executed equally often are one block of the kernel (a loop body,
a once-a-tile stretch), so each class is a place in the kernel, with its
opcodes. Usage: sass.py FILE [TOP]"""
import collections
import csv
import gzip
import sys


def opcode(source):
    """The instruction's opcode without its modifiers (`IMAD.U32` → `IMAD`)."""
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = list(csv.reader(f))
    # The first line names the kernel; the second holds the column names.
    head = next(i for i, r in enumerate(rows) if "Source" in r and "Instructions Executed" in r)
    cols = rows[head]
    src, ex = cols.index("Source"), cols.index("Instructions Executed")
    st = cols.index("Warp Stall Sampling (All Samples)")
    lines = []
    for r in rows[head + 1:]:
        if len(r) <= max(src, ex, st) or not r[ex].strip().isdigit():
            continue
        lines.append((opcode(r[src]), int(r[ex]), int(r[st] or 0)))
    total = sum(n for _, n, _ in lines) or 1
    samples = sum(s for _, _, s in lines) or 1
    print(f"# {total} warp instructions, {samples} stall samples, {len(lines)} SASS lines")
    by_op = collections.defaultdict(lambda: [0, 0])
    for op, n, s in lines:
        by_op[op][0] += n
        by_op[op][1] += s
    for op, (n, s) in sorted(by_op.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{op:<10} {100 * n / total:5.1f}% instructions {100 * s / samples:5.1f}% stall samples")
    print("\n# blocks: lines executed equally often (count, lines, share, top opcodes)")
    blocks = collections.defaultdict(collections.Counter)
    for op, n, _ in lines:
        if n:
            blocks[n][op] += 1
    ranked = sorted(blocks.items(), key=lambda kv: -kv[0] * sum(kv[1].values()))
    for count, ops in ranked[:top]:
        size = sum(ops.values())
        share = 100 * count * size / total
        common = ", ".join(f"{o} {k}" for o, k in ops.most_common(8))
        print(f"{count:>10} x {size:>5} lines {share:5.1f}%: {common}")


if __name__ == "__main__":
    main()
