#!/usr/bin/env python3
"""Static instruction budget of the FP4 and FP8 linear paths: instructions per 64 weight bytes in
each path's hot loop, read from the compiled object with objdump (docs/benchmarks.md).

A count does not judge a path; with a core's issue width it bounds the GB/s the path can
reach on a host that has the ISA but is not at hand (GB/s <= 64 B x width x GHz / count).

Usage: scripts/isa_budget.py [BUILD_DIR] [--cxx FILE]   (default build/release)
  --cxx FILE: also write the table as a C++ string (dsv4::bench::kIsaBudgetTable) that
              `dsv4 bench` prints (bench/CMakeLists.txt runs this at build time).
"""
import re
import subprocess
import sys
from pathlib import Path

# path, ISA, object, T, and the parts a tile of T rows runs over the same 64 code bytes
# (linear_fp4_avx512.cc run_rows: blocks of block_rows rows x block_regs / rows tiles; linear_fp4_avx2.cc:
# see avx2()), each with the marker instruction of its hot loop and how many of it one 64-byte
# code chunk takes there. The exact rows (x outside the dot's range, linear_fp4.h) are rare.
STEP = "(dsv4::kernels::linear_tile::(anonymous namespace)::Step)"  # 0 dot, 1 FMA, 2 exact


def avx512(rows_tiles, step):
    marker, per_chunk = ("vpermw", 4) if step == 0 else ("vpermps", 8)
    return [(f"run_block<{r}, {t}, {STEP}{step}>", marker, per_chunk) for r, t in rows_tiles]


def avx2(rows, fma):
    """Up to 4 rows: run_block decodes in registers per block of rows. From 5 rows: the tile's
    block is decoded once (decode_block, inlined in run_rows_decoded) and each block of 4 rows reads the fp32 vectors
    (rows_on_decoded: 4 FMAs or multiply-adds per row and column pair)."""
    f = "true" if fma else "false"
    if rows <= 4:
        return [(f"run_block<{rows}, {f}>", "vpermps", 16)]
    mark = "vfmadd" if fma else "vmulps"
    return [(f"run_rows_decoded<{f}>", "vpermps", 16)] + [(f"rows_on_decoded<4, {f}>", mark, 16 * 4)] * (rows // 4)


def fp8_avx512(rows_tiles, step):
    """linear_fp8_avx512.h: the dot in register blocks (run_block: per 64-byte code vector one
    vpunpcklbw); the FMA and exact steps from 5 rows on the block decoded once (decode_f32 in
    run_rows_decoded: one vpshufb per code vector; rows_on_decoded: 4 FMAs or multiplies per
    row and code vector), below 5 rows in register blocks (run_block: one vpshufb)."""
    rows = sum(r for r, _ in rows_tiles)
    if step == 0 or rows < 5:
        marker = "vpunpcklbw" if step == 0 else "vpshufb"
        return [(f"run_block<{r}, {t}, {STEP}{step}>", marker, 1) for r, t in rows_tiles]
    mark = "vfmadd" if step == 1 else "vmulps"
    return [(f"run_rows_decoded<{STEP}{step}>", "vpshufb", 1)] + [
        (f"rows_on_decoded<{r}, {STEP}{step}>", mark, 4 * r) for r, _ in rows_tiles]


def fp8_avx2(rows, fma):
    """linear_fp8_avx2.cc: up to 4 rows, run_block decodes in registers (two vpshufb per 64-byte
    code vector); from 5 rows, the tile block is decoded once (decode_block, in run_rows_decoded)
    and each block of 4 rows reads the fp32 vectors (rows_on_decoded: 8 FMAs or multiplies per
    row and code vector)."""
    f = "true" if fma else "false"
    if rows <= 4:
        return [(f"run_block<{rows}, {f}>", "vpshufb", 2)]
    mark = "vfmadd" if fma else "vmulps"
    return [(f"run_rows_decoded<{f}>", "vpshufb", 2)] + [(f"rows_on_decoded<4, {f}>", mark, 8 * 4)] * (rows // 4)


T16 = [(6, 2), (6, 2), (4, 3)]  # FP4 FMA / exact: blocks of up to 6 rows x 12 / rows tiles
T16_DOT = [(8, 2), (8, 2)]  # FP4 dot: blocks of up to 8 rows x 16 / rows tiles
T16_FP8 = [(8, 2), (8, 2)]  # linear_fp8_avx512.h: blocks of up to 8 rows x 16 / rows tiles
PATHS = [
    ("FP4 dot", "avx512bf16", "linear_fp4_avx512", 1, avx512([(1, 4)], 0)),
    ("FP4 dot", "avx512bf16", "linear_fp4_avx512", 16, avx512(T16_DOT, 0)),
    ("FP4 FMA", "avx512", "linear_fp4_avx512", 1, avx512([(1, 4)], 1)),
    ("FP4 FMA", "avx512", "linear_fp4_avx512", 16, avx512(T16, 1)),
    ("FP4 FMA", "avx2", "linear_fp4_avx2", 1, avx2(1, True)),
    ("FP4 FMA", "avx2", "linear_fp4_avx2", 16, avx2(16, True)),
    ("FP4 exact", "avx512", "linear_fp4_avx512", 1, avx512([(1, 4)], 2)),
    ("FP4 exact", "avx2", "linear_fp4_avx2", 1, avx2(1, False)),
    ("FP8 dot", "avx512bf16", "linear_fp8_avx512_bf16", 1, fp8_avx512([(1, 4)], 0)),
    ("FP8 dot", "avx512bf16", "linear_fp8_avx512_bf16", 16, fp8_avx512(T16_FP8, 0)),
    ("FP8 FMA", "avx512", "linear_fp8_avx512", 1, fp8_avx512([(1, 4)], 1)),
    ("FP8 FMA", "avx512", "linear_fp8_avx512", 16, fp8_avx512(T16_FP8, 1)),
    ("FP8 FMA", "avx2", "linear_fp8_avx2", 1, fp8_avx2(1, True)),
    ("FP8 FMA", "avx2", "linear_fp8_avx2", 16, fp8_avx2(16, True)),
    ("FP8 exact", "avx512", "linear_fp8_avx512", 1, fp8_avx512([(1, 4)], 2)),
    ("FP8 exact", "avx2", "linear_fp8_avx2", 1, fp8_avx2(1, False)),
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
    """The innermost backward-jump loop holding the marker (a mnemonic prefix): its instructions."""
    best = None
    for addr, mnem, ops in insns:
        if not mnem.startswith("j"):
            continue
        t = JUMP_TARGET.match(ops)
        if not t or int(t.group(1), 16) >= addr:
            continue
        lo = int(t.group(1), 16)
        body = [i for i in insns if lo <= i[0] <= addr]
        if any(i[1].startswith(marker) for i in body) and (best is None or len(body) < len(best)):
            best = body
    return best


def table(build: Path) -> str:
    objdir = build / "src/kernels/linear/CMakeFiles/dsv4_kernel_linear.dir"
    cache = {}
    lines = [f"{'path':<10} {'isa':<11} {'T':>3} {'parts':>6} {'insns / 64 B':>12}"]
    for label, isa, obj, T, parts in PATHS:
        if obj not in cache:
            try:
                cache[obj] = functions(objdir / f"{obj}.cc.o")
            except (OSError, subprocess.CalledProcessError):
                cache[obj] = {}  # no object (another build layout): the rows say n/a
        total = 0.0
        for fn, marker, per_chunk in parts:  # every part decodes or reads the same 64 bytes
            matches = [v for k, v in cache[obj].items() if f"::{fn}(" in k]
            body = hot_loop(matches[0], marker) if matches else None
            if body is None:  # inlined or reshaped by this build's flags
                total = None
                break
            total += len(body) / (sum(1 for i in body if i[1].startswith(marker)) / per_chunk)
        count = f"{total:>12.1f}" if total is not None else f"{'n/a':>12}"
        lines.append(f"{label:<10} {isa:<11} {T:>3} {len(parts):>6} {count}")
    return "\n".join(lines) + "\n"


def main():
    args = sys.argv[1:]
    cxx = None
    if "--cxx" in args:
        i = args.index("--cxx")
        cxx = Path(args[i + 1])
        del args[i:i + 2]
    text = table(Path(args[0] if args else "build/release"))
    if not cxx:
        print(text, end="")
    else:
        cxx.write_text("// Generated by scripts/isa_budget.py at build time.\n"
                       "namespace dsv4::bench {\n"
                       f"extern const char* const kIsaBudgetTable = R\"budget({text})budget\";\n"
                       "}\n")

if __name__ == "__main__":
    main()
