#!/usr/bin/env python3
"""Static instruction budget of the FP4 linear paths: instructions per 64 weight bytes in
each path's hot loop, read from the compiled object with objdump (docs/benchmarks.md).

A count does not judge a path; with a core's issue width it bounds the GB/s the path can
reach on a host that has the ISA but is not at hand (GB/s <= 64 B x width x GHz / count).

Usage: scripts/isa_budget.py [BUILD_DIR]   (default build/release)
"""
import re
import subprocess
import sys
from pathlib import Path

# path, ISA, object, T, the register blocks a tile of T rows runs (linear_fp4_avx512.cc
# run_rows: blocks of up to 6 rows x 12 / rows tiles; linear_fp4_avx2.cc: 4 rows x 1 tile),
# and the marker instruction of the weight decode with how many of it one 64-byte code
# chunk takes per block. The exact rows (x outside the dot's range, linear_fp4.h) are rare.
STEP = "(dsv4::kernels::linear_tile::(anonymous namespace)::Step)"  # 0 dot, 1 FMA, 2 exact


def avx512(rows_tiles, step):
    return [f"run_block<{r}, {t}, {STEP}{step}>" for r, t in rows_tiles]


T16 = [(6, 2), (6, 2), (4, 3)]
PATHS = [
    ("FP4 dot", "avx512bf16", "linear_fp4_avx512", 1, avx512([(1, 4)], 0), "vpermw", 4),
    ("FP4 dot", "avx512bf16", "linear_fp4_avx512", 16, avx512(T16, 0), "vpermw", 4),
    ("FP4 FMA", "avx512", "linear_fp4_avx512", 1, avx512([(1, 4)], 1), "vpermps", 8),
    ("FP4 FMA", "avx512", "linear_fp4_avx512", 16, avx512(T16, 1), "vpermps", 8),
    ("FP4 FMA", "avx2", "linear_fp4_avx2", 1, ["run_block<1, true>"], "vpermps", 16),
    ("FP4 FMA", "avx2", "linear_fp4_avx2", 16, ["run_block<4, true>"] * 4, "vpermps", 16),
    ("FP4 exact", "avx512", "linear_fp4_avx512", 1, avx512([(1, 4)], 2), "vpermps", 8),
    ("FP4 exact", "avx2", "linear_fp4_avx2", 1, ["run_block<1, false>"], "vpermps", 16),
]

INSN = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
JUMP_TARGET = re.compile(r"^([0-9a-f]+)\b")


def functions(obj: Path):
    """Demangled function name -> list of (address, mnemonic, operands)."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", str(obj)], check=True,
                         capture_output=True, text=True).stdout
    funcs, name = {}, None
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            name = m.group(1)
            funcs[name] = []
            continue
        m = INSN.match(line)
        if name and m:
            funcs[name].append((int(m.group(1), 16), m.group(2), m.group(3)))
    return funcs


def hot_loop(insns, marker):
    """The innermost backward-jump loop holding the marker: its instructions."""
    best = None
    for addr, mnem, ops in insns:
        if not mnem.startswith("j"):
            continue
        t = JUMP_TARGET.match(ops)
        if not t or int(t.group(1), 16) >= addr:
            continue
        lo = int(t.group(1), 16)
        body = [i for i in insns if lo <= i[0] <= addr]
        if any(i[1] == marker for i in body) and (best is None or len(body) < len(best)):
            best = body
    return best


def main():
    build = Path(sys.argv[1] if len(sys.argv) > 1 else "build/release")
    objdir = build / "src/kernels/linear/CMakeFiles/dsv4_kernel_linear.dir"
    cache = {}
    print(f"{'path':<10} {'isa':<11} {'T':>3} {'blocks':>6} {'insns / 64 B':>12}")
    for label, isa, obj, T, blocks, marker, per_chunk in PATHS:
        if obj not in cache:
            cache[obj] = functions(objdir / f"{obj}.cc.o")
        total = 0.0
        for fn in blocks:  # every block of rows decodes and reads the same 64 bytes
            matches = [v for k, v in cache[obj].items() if f"::{fn}(" in k]
            body = hot_loop(matches[0], marker) if matches else None
            if body is None:
                sys.exit(f"{label} {isa} T={T}: no hot loop found in {fn}")
            total += len(body) / (sum(1 for i in body if i[1] == marker) / per_chunk)
        print(f"{label:<10} {isa:<11} {T:>3} {len(blocks):>6} {total:>12.1f}")


if __name__ == "__main__":
    main()
