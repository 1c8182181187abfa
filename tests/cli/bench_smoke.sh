#!/usr/bin/env bash
# dsv4 bench in a tiny mode (tiny layer shapes, 8 MiB probe buffers, small sets): the JSON
# holds every default case group (not dspark), every required field, finite values; the PNG
# is a PNG when gnuplot is installed. A third run takes the opt-in dspark group (tiny-ds cut
# to one layer and one stage) and spec-e2e: their records, the share summary, acceptance.
# Usage: bench_smoke.sh /path/to/dsv4 WORKDIR
set -euo pipefail
dsv4=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
export XDG_CACHE_HOME="$work/xdg"
"$dsv4" bench --preset tiny --quick --bandwidth-mib 8 --gemm-span-mib 1 --batches 1,2 --spec-rows 1,2 \
  --prefill 16 --gemm-rows 1,4 --repeats 2 --context 16 --spec-tokens 8 --cache-dir "$work/cache" \
  --json "$work/bench.json" \
  >"$work/out.txt" 2>&1 || { echo "FAIL: dsv4 bench exited $?"; cat "$work/out.txt"; exit 1; }
grep -q "verify overhead" "$work/out.txt" || { echo "FAIL: no verify-overhead table"; exit 1; }
grep -q "barriers (thread-pool runs) per tiny" "$work/out.txt" || { echo "FAIL: no barrier count"; exit 1; }
# A second run reuses the cached layer checkpoints, on the portable kernels (--isa).
"$dsv4" bench --preset tiny --cases layer-hca --batches 1 --spec-rows 1 --prefill 16 --bandwidth-mib 8 --repeats 1 \
  --context 16 --no-scaling --cache-dir "$work/cache" --isa scalar >"$work/out2.txt" 2>&1 ||
  { echo "FAIL: second run exited $?"; cat "$work/out2.txt"; exit 1; }
if grep -q "writing random layer checkpoint" "$work/out2.txt"; then echo "FAIL: checkpoint not reused"; exit 1; fi
grep -q "machine: isa scalar" "$work/out2.txt" || { echo "FAIL: --isa scalar not used"; cat "$work/out2.txt"; exit 1; }
if "$dsv4" bench --preset tiny --cases layer-hca --isa nope >"$work/out2b.txt" 2>&1; then
  echo "FAIL: --isa nope accepted"; exit 1; fi
grep -q "isa 'nope' unknown" "$work/out2b.txt" || { echo "FAIL: unclear --isa error"; cat "$work/out2b.txt"; exit 1; }
/usr/bin/python3 - "$work/bench.json" <<'PY'
import json, math, sys
d = json.load(open(sys.argv[1]))
need = ["case", "B", "S", "T", "step_ms", "tokens_per_s", "bytes", "gbps", "bandwidth_fraction", "gflops",
        "compute_fraction", "roofline_fraction"]
cases = d["cases"]
names = {c["case"] for c in cases}
want = {"layer-csa", "layer-hca", "head", "gemm-fp8", "gemm-fp4", "tiny-e2e", "spec-e2e"}
assert not any(n.startswith("dspark") for n in names), "dspark ran in the default run"
if not any("oneDNN rows skipped" in n for n in d["notes"]):
    want.add("onednn-bf16")
missing = want - names
assert not missing, f"missing cases {missing}"
for c in cases:
    for k in need:
        assert k in c, f"{c['case']}: no field {k}"
        if k != "case":
            assert isinstance(c[k], (int, float)) and math.isfinite(c[k]), f"{c['case']}: {k} = {c[k]}"
    assert c["step_ms"] > 0 and (c["bytes"] > 0 or c["case"] == "spec-e2e"), c
for c in ("layer-csa", "layer-hca"):
    phases = {(x["phase"], x["B"], x["S"]) for x in cases if x["case"] == c and x["threads"] == 2}
    assert {("decode", 1, 1), ("decode", 2, 2), ("prefill", 1, 16)} <= phases, (c, phases)
    assert any(x["case"] == c and x["threads"] == 1 for x in cases), f"{c}: no 1-thread row"
    assert all(x["pool_runs"] > 0 for x in cases if x["case"] == c and x["phase"] == "decode"), f"{c}: pool_runs"
    assert all(x.get("verify_overhead", 0) > 0 for x in cases
               if x["case"] == c and x["phase"] == "decode" and x["S"] > 1), f"{c}: verify_overhead"
m = d["machine"]
assert m["read_gbps"]["1"] > 0 and m["read_gbps"]["2"] > 0 and m["peak_gflops"]["2"] > 0, m
assert d["peak_rss_bytes"] > 0
PY
# The opt-in DSpark drafter and speculative decoding end to end.
"$dsv4" bench --preset tiny --cases dspark,spec-e2e --batches 1,2 --gammas 1,3 --spec-tokens 16 --bandwidth-mib 8 \
  --repeats 2 --context 16 --no-scaling --cache-dir "$work/cache" --json "$work/spec.json" >"$work/out3.txt" 2>&1 ||
  { echo "FAIL: dspark/spec-e2e run exited $?"; cat "$work/out3.txt"; exit 1; }
grep -q "EXTRAPOLATED" "$work/out3.txt" || { echo "FAIL: no extrapolation notice"; cat "$work/out3.txt"; exit 1; }
/usr/bin/python3 - "$work/spec.json" <<'PY'
import json, math, sys
d = json.load(open(sys.argv[1]))
cases = d["cases"]
def finite(c):
    for k, v in c.items():
        if isinstance(v, (int, float)):
            assert math.isfinite(v), (c["case"], k, v)
        if isinstance(v, list):
            assert all(math.isfinite(x) for x in v), (c["case"], k, v)
pieces = ["dspark-target", "dspark-thead", "dspark-commit", "dspark-round", "dspark-head", "dspark-markov"]
for B in (1, 2):
    for g in (1, 3):
        got = {c["case"]: c for c in cases if c["case"].startswith("dspark") and c["B"] == B and c["gamma"] == g}
        assert set(got) == set(pieces) | {"dspark-share"}, (B, g, sorted(got))
        for n in pieces:
            c = got[n]
            finite(c)
            assert c["step_ms"] > 0 and c["bytes"] > 0 and c["flops"] > 0, c
            assert c["S"] == (g if n in ("dspark-round", "dspark-head", "dspark-markov") else 1 + g), c
        s = got["dspark-share"]
        finite(s)
        assert 0 < s["share"] < 1 and s["n_stages"] == 3 and s["n_layers"] == 4 and s["extrapolated"] == 1, s
        assert s["stage_ms"] >= 0 and s["drafter_ms"] > 0 and s["target_ms"] > 0, s
        assert abs(s["step_ms"] - s["drafter_ms"] - s["target_ms"]) < 1e-6 * s["step_ms"], s
        # Bytes: the Markov chain reads W2 [V, Rm] bf16 once per block row (tiny-ds: V 512, Rm 48).
        assert got["dspark-markov"]["bytes"] == g * (512 * 48 * 2 + B * 48 * 2), got["dspark-markov"]
spec = [c for c in cases if c["case"] == "spec-e2e"]
variants = {(c["shape"], c["B"]) for c in spec}
assert variants == {(v, B) for v in ("plain", "mtp", "dspark g=1", "dspark g=3") for B in (1, 4)}, variants
for c in spec:
    finite(c)
    assert c["tokens"] == 4 * 16 and c["steps"] > 0 and c["tokens_per_s"] > 0 and c["step_ms"] > 0, c
    at = c["acceptance_at"]
    assert len(at) == c["gamma"] and all(0 <= a <= 1 for a in at), c
    assert all(x >= y for x, y in zip(at, at[1:])), c
    assert sum(c["rounds_by_accepted"]) == c["rounds"], c
    if c["shape"] == "plain":
        assert c["drafts"] == 0 and c["speed_up"] == 1, c
    else:
        assert c["rounds"] > 0 and 0 <= c["accepted"] <= c["drafts"], c
PY
# --peer-ggml: a stand-in peer (the harness's CSV for whatever case and T it is asked),
# interleaved per round; the side-by-side table and the ggml records. An empty DIR is an error.
mkdir -p "$work/peer" "$work/nopeer"
cat >"$work/peer/peer_plain" <<'SH'
#!/usr/bin/env bash
while [ $# -gt 0 ]; do case $1 in --only) only=$2; shift;; --T) ts=$2; shift;; esac; shift; done
echo "# fake repack=0"
echo "mode,case,type,rows,K,T,n_copies,weight_bytes,median_us,GBps,min_us,max_us,buft,relerr"
echo "$(date +%s%N)" >>"$(dirname "$0")/calls"
for t in ${ts//,/ }; do echo "ggml,$only,x,1,1,$t,1,1000,$((100 * t)).0,1,1,1,CPU,0"; done
SH
chmod +x "$work/peer/peer_plain"
"$dsv4" bench --preset tiny --cases gemm --gemm-rows 1,4 --bandwidth-mib 8 --gemm-span-mib 1 --repeats 1 --no-scaling \
  --peer-ggml "$work/peer" --peer-rounds 2 --json "$work/peer.json" >"$work/out4.txt" 2>&1 ||
  { echo "FAIL: --peer-ggml run exited $?"; cat "$work/out4.txt"; exit 1; }
grep -q "engine vs ggml" "$work/out4.txt" || { echo "FAIL: no comparison table"; cat "$work/out4.txt"; exit 1; }
[ "$(wc -l <"$work/peer/calls")" -eq 10 ] || { echo "FAIL: peer not called 2 rounds x 5 shapes"; exit 1; }
/usr/bin/python3 - "$work/peer.json" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))["cases"]
peer = [c for c in cases if c["case"].startswith("ggml-")]
assert {c["case"] for c in peer} == {"ggml-q8_0", "ggml-mxfp4", "ggml-bf16"}, peer  # bf16: the compressor's wkv
assert len(peer) == 10 and all(c["rounds"] == 2 and abs(c["step_ms"] - 0.1 * c["T"]) < 1e-9 for c in peer), peer
assert all(c["bytes"] == 1000 and c["engine_speedup"] > 0 for c in peer), peer
PY
if "$dsv4" bench --preset tiny --cases gemm --gemm-rows 1 --bandwidth-mib 8 --repeats 1 --no-scaling \
    --peer-ggml "$work/nopeer" >"$work/out5.txt" 2>&1; then echo "FAIL: empty --peer-ggml DIR accepted"; exit 1; fi
grep -q "no peer_plain or peer_lf" "$work/out5.txt" || { echo "FAIL: unclear peer error"; cat "$work/out5.txt"; exit 1; }
# spec-flash: the projection from the two earlier JSONs (no timing, their machine).
"$dsv4" bench --preset tiny --cases spec-flash --from "$work/bench.json" --from "$work/spec.json" \
  --json "$work/flash.json" >"$work/out6.txt" 2>&1 || { echo "FAIL: spec-flash exited $?"; cat "$work/out6.txt"; exit 1; }
grep -q "PROJECTION" "$work/out6.txt" || { echo "FAIL: spec-flash not labelled a projection"; exit 1; }
/usr/bin/python3 - "$work/flash.json" <<'PY'
import json, math, sys
rows = [c for c in json.load(open(sys.argv[1]))["cases"] if c["case"] == "spec-flash"]
methods = {c["shape"].split()[0] for c in rows}
assert methods == {"plain", "mtp", "dspark"}, methods
for c in rows:
    for k in ("step_ms", "tokens_per_s", "expected_tokens", "roofline_ms", "roofline_tokens_per_s", "speedup"):
        assert math.isfinite(c[k]) and c[k] > 0, (c["shape"], k, c[k])
    assert c["expected_tokens"] <= 1 + c["gamma"] + 1e-9, c
    assert c["roofline_ms"] <= c["step_ms"] * 1.0001 or c["estimated"] == 1, c
plain = [c for c in rows if c["shape"].startswith("plain")]
assert all(abs(c["speedup"] - 1) < 1e-9 and c["expected_tokens"] == 1 for c in plain), plain
assert any("built-in" in c["shape"] for c in rows), "no measured acceptance profile"
PY
if "$dsv4" bench --preset tiny --cases gemm --from "$work/bench.json" >"$work/out7.txt" 2>&1; then
  echo "FAIL: --from without spec-flash accepted"; exit 1; fi
grep -q "only --cases spec-flash" "$work/out7.txt" || { echo "FAIL: unclear --from error"; cat "$work/out7.txt"; exit 1; }
echo "not json" >"$work/bad.json"
if "$dsv4" bench --preset tiny --cases spec-flash --from "$work/bad.json" >"$work/out8.txt" 2>&1; then
  echo "FAIL: --from a non-JSON file accepted"; exit 1; fi
grep -q "bad.json: not JSON" "$work/out8.txt" || { echo "FAIL: unclear --from parse error"; cat "$work/out8.txt"; exit 1; }
# A peer that fails: its exit status and output are reported, the run fails.
mkdir -p "$work/badpeer" && printf '#!/bin/sh\necho "ggml: no such case" >&2\nexit 3\n' >"$work/badpeer/peer_plain"
chmod +x "$work/badpeer/peer_plain"
if "$dsv4" bench --preset tiny --cases gemm --gemm-rows 1 --bandwidth-mib 8 --repeats 1 --no-scaling \
    --peer-ggml "$work/badpeer" >"$work/out9.txt" 2>&1; then echo "FAIL: a failing peer accepted"; exit 1; fi
grep -q "exited with status 3: ggml: no such case" "$work/out9.txt" ||
  { echo "FAIL: unclear peer failure"; cat "$work/out9.txt"; exit 1; }
if command -v gnuplot >/dev/null; then
  head -c 8 "$work/bench.png" | od -An -tx1 | grep -q "89 50 4e 47 0d 0a 1a 0a" ||
    { echo "FAIL: $work/bench.png is not a PNG"; exit 1; }
fi
echo "bench smoke: ok"
