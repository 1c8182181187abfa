#!/usr/bin/env python3
"""Markdown tables of a `dsv4 bench --json FILE` run, for docs/benchmarks.md.

Usage: scripts/bench_tables.py FILE.json
Prints the probe line, the layer / head table (every decode and prefill case), the core
GEMV/GEMM table beside oneDNN bf16 (same shape, T and threads), the tiny-e2e table and the
1-vs-N-thread scaling of the layer and head at B = 1.
"""
import json
import sys


def main(path):
    with open(path) as f:
        run = json.load(f)
    m, cases = run["machine"], run["cases"]
    threads = sorted(m["read_gbps"], key=int)
    print(f"probe: read {m['read_probe']}, "
          + ", ".join(f"{t} thread{'s' if t != '1' else ''} {m['read_gbps'][t]:.1f} GB/s" for t in threads)
          + f"; dot {m['dot_probe']}: "
          + " / ".join(f"{m['peak_gflops'][t]:.0f}" for t in threads)
          + f" GFLOP/s; peak RSS {run['peak_rss_bytes'] / 2**30:.2f} GiB\n")

    nmax = max(int(t) for t in threads)
    layer = [c for c in cases if c["case"] in ("layer-csa", "layer-hca", "head") and c["threads"] == nmax]
    print("| layer | phase | B | S | T | step ms | tokens/s | MB moved | GB/s | % bw | GFLOP/s | % peak "
          "| % roofline | experts hit |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in layer:
        hit = f"{c['experts_hit']:.1f}" if c.get("experts_hit", -1) >= 0 else ""
        print(f"| {c['case']} | {c['phase']} | {c['B']} | {c['S']} | {c['T']} | {c['step_ms']:.1f} "
              f"| {c['tokens_per_s']:.1f} | {c['bytes'] / 1e6:.0f} | {c['gbps']:.2f} "
              f"| {100 * c['bandwidth_fraction']:.1f} | {c['gflops']:.1f} | {100 * c['compute_fraction']:.1f} "
              f"| {100 * c['roofline_fraction']:.1f} | {hit} |")

    ref = {(c["shape"].split()[0], c["T"], c["threads"]): c for c in cases if c["case"] == "onednn-bf16"}
    gemm = [c for c in cases if c["case"] in ("gemm-fp8", "gemm-fp4")]
    if gemm:
        print("\n| shape | T | threads | engine ms | engine GB/s (% bw) | engine GFLOP/s (% peak) "
              "| oneDNN bf16 ms | oneDNN GB/s (% bw) | oneDNN GFLOP/s (% peak) | engine / oneDNN time |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for c in gemm:
            fmt = "FP4" if c["case"] == "gemm-fp4" else "FP8"
            r = ref.get((c["shape"].split()[0], c["T"], c["threads"]))
            row = (f"| {c['shape']} {fmt} | {c['T']} | {c['threads']} | {c['step_ms']:.3f} "
                   f"| {c['gbps']:.1f} ({100 * c['bandwidth_fraction']:.0f} %) "
                   f"| {c['gflops']:.0f} ({100 * c['compute_fraction']:.0f} %) ")
            if r:
                row += (f"| {r['step_ms']:.3f} | {r['gbps']:.1f} ({100 * r['bandwidth_fraction']:.0f} %) "
                        f"| {r['gflops']:.0f} ({100 * r['compute_fraction']:.0f} %) "
                        f"| {c['step_ms'] / r['step_ms']:.2f} |")
            else:
                row += "| | | | |"
            print(row)

    peer = {(c["shape"], c["T"], c["threads"]): c for c in cases if c["case"].startswith("ggml-")}
    if peer:
        print("\n| shape | T | engine ms | ggml ms | engine GB/s | ggml GB/s | ggml time / engine time |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for c in gemm:
            g = peer.get((c["shape"], c["T"], c["threads"]))
            if g:
                fmt = "FP4 vs MXFP4" if c["case"] == "gemm-fp4" else "FP8 vs Q8_0"
                print(f"| {c['shape']} {fmt} | {c['T']} | {c['step_ms']:.3f} | {g['step_ms']:.3f} | {c['gbps']:.2f} "
                      f"| {g['gbps']:.2f} | {g['step_ms'] / c['step_ms']:.2f}x |")

    flash = [c for c in cases if c["case"] == "spec-flash"]
    if flash:
        print("\n| B | method, γ, acceptance profile (PROJECTION) | E tokens/round | round ms | tokens/s | x plain "
              "| roofline tokens/s | x plain |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|")
        for c in flash:
            print(f"| {c['B']} | {c['shape']} | {c['expected_tokens']:.2f} | {c['step_ms']:.1f} | {c['tokens_per_s']:.3g} "
                  f"| {c['speedup']:.2f} | {c['roofline_tokens_per_s']:.3g} | {c['roofline_speedup']:.2f} |")

    tiny = [c for c in cases if c["case"] == "tiny-e2e"]
    if tiny:
        ts = sorted({c["threads"] for c in tiny})
        print("\n| tiny-e2e B | " + " | ".join(f"tokens/s {t} thread{'s' if t > 1 else ''}" for t in ts) + " |")
        print("|---:|" + "---:|" * len(ts))
        for b in sorted({c["B"] for c in tiny}):
            by = {c["threads"]: c for c in tiny if c["B"] == b}
            print(f"| {b} | " + " | ".join(f"{by[t]['tokens_per_s']:.0f}" if t in by else "" for t in ts) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
