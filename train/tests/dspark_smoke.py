"""train_dspark.py on a few steps against the committed target models/kjv-9m (seconds): the
loss decreases; a run stopped and resumed from its checkpoint ends with exactly the parameters
of an uninterrupted run. Then export_dspark.py writes both layouts and they are checked
against dspark.md §1: the mtp.* inventory (241 tensors in the released layout, 144 in BF16 for
NS 3, E 8), storage classes and shapes, no MTP-layer tensor, the main tensors byte-identical to
models/kjv-9m (FP8), the config fields; the BF16 file reads back as the bf16-rounded
checkpoint, and dspark.load_drafter() reads both and drafts with them.

Usage: dspark_smoke.py DSV4_BINARY(unused) WORKDIR      (exit 77 without torch)
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIP: {e} (install python3-torch: scripts/setup.sh --train)")
    sys.exit(77)
TRAIN = os.path.dirname(HERE)
sys.path.insert(0, TRAIN)
import dspark as DS  # noqa: E402
import export  # noqa: E402
import export_dspark  # noqa: E402

TARGET = os.path.join(os.path.dirname(TRAIN), "models", "kjv-9m")
# One thread: threaded reductions may differ in the last bit from run to run.
ARGS = ["--threads", "1", "--batch", "2", "--seq", "64", "--anchors", "8", "--lr", "3e-3",
        "--warmup", "2", "--log-every", "4", "--eval-every", "1000", "--save-every", "1000",
        "--data-chars", "200000", "--no-final-eval", "--target", TARGET]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout[-1500:])
    if r.returncode != 0:
        print(r.stderr[-3000:])
        raise SystemExit(f"failed: {' '.join(cmd)}")


def train(out, steps, extra=()):
    run([sys.executable, os.path.join(TRAIN, "train_dspark.py"), "--out", out, "--steps",
         str(steps)] + ARGS + list(extra))


def check_export(ck_path, work):
    ok = True
    ck = torch.load(ck_path)
    cfg = ck["config"]
    E, NS = cfg["n_routed_experts"], DS.n_stages_of(cfg)
    ref_raw = export.read_safetensors(os.path.join(TARGET, "model.safetensors"))
    for quant in ("fp8", "none"):
        d = os.path.join(work, f"export_{quant}")
        subprocess.run([sys.executable, os.path.join(TRAIN, "export_dspark.py"), "--ckpt", ck_path,
                        "--quant", quant, "--out", d], check=True)
        raw = export.read_safetensors(os.path.join(d, "model.safetensors"))
        with open(os.path.join(d, "config.json")) as f:
            c = json.load(f)
        mtp = sorted(n for n in raw if n.startswith("mtp."))
        want = NS * (29 + 6 * E) + 10 if quant == "fp8" else NS * (21 + 3 * E) + 9
        errs = []
        if len(mtp) != want:
            errs.append(f"{len(mtp)} mtp.* tensors, expected {want}")
        for bad in ("e_proj", "h_proj", "enorm", "hnorm"):
            if any(f".{bad}." in n for n in raw):
                errs.append(f"an MTP-layer tensor ({bad}) in the DSpark file")
        L = c["num_hidden_layers"]
        if c["compress_ratios"] != ref_cfg()["compress_ratios"][:L] + [0] * NS or \
                c["num_nextn_predict_layers"] != 1 or \
                any(f not in c for f in DS.DSPARK_FIELDS) or \
                (quant == "fp8") != ("quantization_config" in c):
            errs.append(f"config fields: {({k: c.get(k) for k in ('compress_ratios', 'num_nextn_predict_layers') + DS.DSPARK_FIELDS})}")
        D, Rm, V = c["hidden_size"], c["dspark_markov_rank"], c["vocab_size"]
        expect = {"mtp.0.main_proj.weight": ("F8_E4M3" if quant == "fp8" else "BF16",
                                             [D, len(c["dspark_target_layer_ids"]) * D]),
                  f"mtp.{NS - 1}.markov_head.markov_w1.weight": ("BF16", [V, Rm]),
                  f"mtp.{NS - 1}.markov_head.markov_w2.weight": ("BF16", [V, Rm]),
                  f"mtp.{NS - 1}.confidence_head.proj.weight": ("BF16", [1, D + Rm]),
                  "mtp.0.main_norm.weight": ("BF16", [D]), f"mtp.{NS - 1}.hc_head_fn": ("F32", [4, 4 * D]),
                  "mtp.1.ffn.gate.bias": ("F32", [E]), "mtp.1.attn.attn_sink": ("F32", [4]),
                  "mtp.2.ffn.experts.3.w2.weight": ("I8" if quant == "fp8" else "BF16",
                                                    [D, c["moe_intermediate_size"] // (2 if quant == "fp8" else 1)])}
        if quant == "fp8":
            expect["mtp.0.main_proj.scale"] = ("F8_E8M0", [-(-D // 128), -(-3 * D // 128)])
        for n, (dt, shape) in expect.items():
            if n not in raw or raw[n][0] != dt or list(raw[n][1].shape) != shape:
                got = (raw[n][0], list(raw[n][1].shape)) if n in raw else None
                errs.append(f"{n}: {got}, expected {(dt, shape)}")
        if any(n.startswith(f"mtp.{NS - 1}.markov_head") and n.endswith(".scale") for n in raw):
            errs.append("a .scale next to a Markov table")
        main = [n for n in raw if not n.startswith("mtp.")]
        if quant == "fp8":
            ref_main = sorted(n for n in ref_raw if not n.startswith("mtp."))
            if sorted(main) != ref_main or any(
                    raw[n][0] != ref_raw[n][0] or not np.array_equal(raw[n][1], ref_raw[n][1]) for n in ref_main):
                errs.append("main tensors differ from models/kjv-9m")
        # read back: BF16 = the bf16-rounded checkpoint; both drive the reference
        deq = export.load_dequantized(d)
        if quant == "none":
            for k, v in ck["model"].items():
                w = v.float().numpy()
                r = w.astype(np.float64) if export.storage_of(k) == "f32" else export.bf16_round(w)
                if not np.array_equal(deq[k], r.astype(np.float64)):
                    errs.append(f"{k}: read back differs from the bf16-rounded checkpoint")
                    break
        target, drafter, _ = DS.load_drafter(d)
        out = DS.draft_logits(target, drafter, list(range(100, 140)), 5)
        if not torch.isfinite(out["lambda"]).all():
            errs.append("non-finite λ from the read-back drafter")
        size = os.path.getsize(os.path.join(d, "model.safetensors")) / 1e6
        print(f"export {quant}: {len(raw)} tensors ({len(mtp)} mtp.*), {size:.1f} MB -> "
              f"{'ok' if not errs else 'FAIL'}")
        for e in errs:
            print(f"  FAIL: {e}")
        ok &= not errs
    return ok


def ref_cfg():
    with open(os.path.join(TARGET, "config.json")) as f:
        return json.load(f)


def main():
    work = sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    ok = True
    full, parts = os.path.join(work, "full"), os.path.join(work, "parts")
    os.makedirs(parts)
    train(full, 12)
    for f in os.listdir(full):
        if f.startswith("data_"):
            shutil.copy(os.path.join(full, f), parts)
    train(parts, 12, ["--stop-after", "6"])
    train(parts, 12)
    a = torch.load(os.path.join(full, "ckpt.pt"))
    b = torch.load(os.path.join(parts, "ckpt.pt"))
    losses = [h["loss"] for h in a["history"] if h["kind"] == "train"]
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    print(f"loss: first 3 steps {first:.3f}, last 3 steps {last:.3f}")
    if not last < first - 0.5:
        print("FAIL: the loss does not decrease")
        ok = False
    if a["step"] != 12 or b["step"] != 12:
        print(f"FAIL: steps {a['step']} and {b['step']}, expected 12")
        ok = False
    diff = max((a["model"][k].double() - b["model"][k].double()).abs().max().item() for k in a["model"])
    print(f"resume: max parameter difference to the uninterrupted run {diff:.3e}")
    if diff != 0.0:
        print("FAIL: the resumed run differs from the uninterrupted one")
        ok = False
    ok &= check_export(os.path.join(full, "ckpt.pt"), work)
    print("dspark_smoke: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
