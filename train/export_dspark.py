"""Writes a DSpark checkpoint in the released 0731 layout (shared/spec/dspark.md §1): the target's
main-model tensors as they are in its exported directory, without its MTP layer (no
mtp.0.e_proj/h_proj/enorm/hnorm, no MTP block), plus the drafter's mtp.{s}.* tensors of §1.4:

  --quant fp8   the target's tensors copied byte for byte (it must be an FP8 export, e.g.
                models/kjv-9m); drafter matrices FP8 e4m3 + ue8m0 128x128 .scale (main_proj
                included), routed experts packed FP4 + per-32 scales; markov_w1/w2 and
                confidence_head.proj BF16 without scale; norms and gate.weight BF16; hc_*,
                attn_sink, gate.bias F32
  --quant none  the BF16 variant: the target's FP8/FP4 tensors dequantized to BF16 (exact:
                e4m3 and e2m1 values times a power of two fit BF16), the drafter's matrices BF16

config.json: the target's, compress_ratios = main entries + NS zeros, num_nextn_predict_layers 1
(stale, as in the release), dspark_block_size, dspark_noise_token_id, dspark_target_layer_ids,
dspark_markov_rank. generation_config.json and the tokenizer files are copied from the target.

Usage: /usr/bin/python3 train/export_dspark.py --ckpt runs/dspark/ckpt.pt --quant fp8 --out DIR
       [--target DIR (default: the directory the checkpoint was trained against)]
"""
import argparse
import hashlib
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export  # noqa: E402

SIDE_FILES = ("generation_config.json", "tokenizer.json", "tokenizer_config.json")


def main_tensors(target_dir, quant):
    """The target's tensors minus every mtp.* tensor, as [(name, dtype, raw array)]."""
    raw = export.read_safetensors(os.path.join(target_dir, "model.safetensors"))
    names = sorted(n for n in raw if not n.startswith("mtp."))
    if quant == "fp8":
        if not any(raw[n][0] == "F8_E4M3" for n in names):
            raise SystemExit(f"{target_dir}: not an FP8 export; --quant fp8 copies its tensors")
        return [(n, raw[n][0], raw[n][1]) for n in names]
    deq = export.load_dequantized(target_dir)
    out = []
    for n in names:
        dt, a = raw[n]
        if n.endswith(".scale"):
            continue
        if dt in ("F8_E4M3", "I8"):
            v = deq[n].astype(np.float32)
            bits = export.bf16_bits(v)
            back = (bits.astype(np.uint32) << 16).view(np.float32)
            assert np.array_equal(back, v), f"{n}: dequantized values not exact in BF16"
            out.append((n, "BF16", bits))
        else:
            out.append((n, dt, a))
    return out


def export_dspark(state, cfg, target_dir, out_dir, quant, generator="dsv4 train/export_dspark.py"):
    """state: {mtp.* name: numpy array}; cfg: the DSpark config dict (dspark.dspark_config)."""
    assert quant in ("fp8", "none")
    assert all(k.startswith("mtp.") for k in state)
    os.makedirs(out_dir, exist_ok=True)
    tensors = main_tensors(target_dir, quant)
    for name in sorted(state):
        tensors += export.encode(name, state[name], quant)
    tensors.sort(key=lambda t: t[0])
    export.write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors,
                             {"format": "pt", "dsv4_generator": generator})
    export.write_config(export.quantized_config(cfg, quant), out_dir)
    for fn in SIDE_FILES:
        shutil.copyfile(os.path.join(target_dir, fn), os.path.join(out_dir, fn))
    return tensors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ckpt", required=True, help="a checkpoint written by train_dspark.py")
    ap.add_argument("--out", required=True)
    ap.add_argument("--quant", choices=("fp8", "none"), default="fp8")
    ap.add_argument("--target", help="the target's exported directory (default: the ckpt's)")
    a = ap.parse_args()
    import torch
    ck = torch.load(a.ckpt, map_location="cpu")
    target = a.target or ck["target"]
    with open(os.path.join(target, "model.safetensors"), "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    if sha != ck["target_sha256"]:
        raise SystemExit(f"{target}: not the target {a.ckpt} was trained against (sha256 differs)")
    state = {k: v.detach().cpu().numpy() for k, v in ck["model"].items()}
    tensors = export_dspark(state, ck["config"], target, a.out, a.quant,
                            f"dsv4 train/export_dspark.py step={ck.get('step')}")
    n_mtp = sum(1 for t in tensors if t[0].startswith("mtp."))
    print(f"export_dspark: {a.quant} -> {a.out} ({len(tensors)} tensors, {n_mtp} mtp.*; "
          f"{os.path.getsize(os.path.join(a.out, 'model.safetensors')) / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
