"""Trainer vs engine (issue 12, "Trainer vs engine"): the PyTorch model's logits equal
`dsv4 logits --numerics float` on its exported checkpoint, main and MTP heads, for the BF16
and the FP8 export. The PyTorch side runs in fp64 with the weights read back from the exported
files (dequantized: checkpoint.md §4), so the comparison checks the export as well as the
forward. Near-ties of routing and indexer top-k are taken out of the comparison by replaying
the trainer's decisions in the engine (--decisions-in).

Usage: engine_match.py DSV4_BINARY WORKDIR [--ckpt CKPT.pt | --model-dir DIR] [--tokens N]
--model-dir compares an already exported directory (the committed built-in model, models/kjv-9m)
instead of exporting: the trainer's model is built from its config.json and its weights read back
from its files. Also runs `dsv4 generate` (the engine's Level-A numerics) on the FP8 model with
and without --mtp and requires the same greedy tokens.
Exit 0 when all of it holds, 1 otherwise, 77 (skip) without torch.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see train.py
try:
    import numpy as np
    import torch
except ImportError as e:  # the release pass installs python3-torch (scripts/setup.sh --train)
    print(f"SKIP: {e} (install python3-torch: scripts/setup.sh --train)")
    sys.exit(77)
import bpe  # noqa: E402
import corpus  # noqa: E402
import export  # noqa: E402
import model as M  # noqa: E402

TOKENIZER_DIR = os.path.join(os.path.dirname(HERE), "tokenizer")
# Level B in fp32 (engine) against fp64 (trainer): summation-order noise only.
ABS_TOL, REL_TOL = 1e-4, 1e-4


def passage(n):
    """The first n tokens of the validation split (held out from training)."""
    tok = bpe.Tokenizer.load(os.path.join(TOKENIZER_DIR, "tokenizer.json"))
    _, val = corpus.split_texts()
    return tok.encode(val[:4 * n])[:n]


def load_into(model, weights):
    sd = model.state_dict()
    for k in sd:
        sd[k] = torch.from_numpy(np.asarray(weights[k])).to(sd[k].dtype)
    missing = set(weights) - set(sd)
    assert not missing, f"exported tensors the model does not have: {sorted(missing)[:5]}"
    model.load_state_dict(sd)


def run_engine(dsv4, model_dir, tokens_file, dec_file, out, mtp):
    cmd = [dsv4, "logits", "--model", model_dir, "--tokens", "@" + tokens_file, "--numerics",
           "float", "--decisions-in", dec_file, "--out", out, "--threads", "2"]
    if mtp:
        cmd.append("--mtp")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr)
        raise SystemExit(f"engine failed: {' '.join(cmd)}")
    return np.load(out)


def compare(name, ref, got):
    ref = ref.astype(np.float64)
    d = np.abs(got.astype(np.float64) - ref)
    rel = d / np.maximum(np.abs(ref), 1.0)
    ok = got.shape == ref.shape and bool((d <= ABS_TOL + REL_TOL * np.abs(ref)).all())
    print(f"{name}: shape {list(got.shape)}, max |logit| {np.abs(ref).max():.3f}, "
          f"max abs diff {d.max():.3e}, max rel diff {rel.max():.3e}, "
          f"argmax agree {np.mean(ref.argmax(-1) == got.argmax(-1)):.4f} -> "
          f"{'ok' if ok else 'FAIL'}")
    return ok, float(d.max()), float(rel.max())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dsv4")
    ap.add_argument("workdir")
    ap.add_argument("--ckpt", help="a train.py checkpoint (default: random init, seed 1)")
    ap.add_argument("--model-dir", help="an exported directory to compare as it is (no export)")
    ap.add_argument("--tokens", type=int, default=160)
    a = ap.parse_args()
    torch.set_num_threads(2)
    os.makedirs(a.workdir, exist_ok=True)
    if a.model_dir:
        with open(os.path.join(a.model_dir, "config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        src = None
    elif a.ckpt:
        ck = torch.load(a.ckpt, map_location="cpu")
        cfg = ck["config"]
        src = M.Model(cfg)
        src.load_state_dict(ck["model"])
    else:
        with open(os.path.join(TOKENIZER_DIR, "tokenizer.json"), encoding="utf-8") as f:
            V = len(json.load(f)["model"]["vocab"]) + len(bpe.CHAT_MARKERS)
        cfg = M.default_config(V)
        src = M.Model(cfg)
        src.init_weights(1)
        with torch.no_grad():  # non-trivial routing biases, sinks and ape
            g = torch.Generator().manual_seed(2)
            for n, p in src.named_parameters():
                if n.endswith(("attn_sink", "ape")):
                    p.copy_(torch.randn(p.shape, generator=g) * (1.0 if "sink" in n else 0.03))
            for n, b in src.named_buffers():
                if n.endswith("gate.bias"):
                    b.copy_(torch.randn(b.shape, generator=g) * 0.1)
    toks = passage(a.tokens)
    tokens_file = os.path.join(a.workdir, "tokens.txt")
    with open(tokens_file, "w") as f:
        f.write(",".join(map(str, toks)) + "\n")
    ok_all = True
    if a.model_dir:
        checks = [("FP8" if "quantization_config" in cfg else "BF16", a.model_dir)]
        fp8_dir = a.model_dir
    else:
        state = export.model_state(src)
        checks = []
        for quant in ("none", "fp8"):
            d = os.path.join(a.workdir, f"model_{quant}")
            export.export(state, cfg, d, quant, TOKENIZER_DIR)
            checks.append(("BF16" if quant == "none" else "FP8", d))
        fp8_dir = os.path.join(a.workdir, "model_fp8")
    for name, d in checks:
        m = M.Model(cfg).double().eval()
        load_into(m, export.load_dequantized(d))
        decisions = []
        with torch.no_grad():
            logits, mtp_logits, _ = m(torch.tensor([toks]), mtp=True, decisions=decisions)
        dec_file = os.path.join(a.workdir, f"decisions_{name}.json")
        with open(dec_file, "w") as f:
            json.dump({"decisions": decisions}, f)
        for head, ref in (("main", logits[0]), ("mtp", mtp_logits[0])):
            got = run_engine(a.dsv4, d, tokens_file, dec_file,
                             os.path.join(a.workdir, f"{name}_{head}.npy"), head == "mtp")
            ok, _, _ = compare(f"{name} {head}", ref.numpy(), got)
            ok_all &= ok
    # The engine's own (Level-A) path accepts the FP8 export: greedy decode with and without
    # MTP drafts gives the same tokens.
    outs = []
    for extra in ([], ["--mtp"]):
        cmd = [a.dsv4, "generate", "--model", fp8_dir, "--prompt-ids",
               ",".join(map(str, toks[:24])), "--max-tokens", "24", "--verbose", "--quiet-steps"] + extra
        r = subprocess.run(cmd, capture_output=True, text=True)
        line = [x for x in (r.stdout + r.stderr).splitlines() if x.startswith("request 0 (")]
        if r.returncode != 0 or not line:
            print(r.stdout + r.stderr)
            print(f"FAIL: {' '.join(cmd)}")
            ok_all = False
        outs.append(line[0].split("->")[-1].strip() if line else None)
    if outs[0] != outs[1]:
        print(f"FAIL: generate differs with --mtp: {outs[0]} vs {outs[1]}")
        ok_all = False
    print(f"generate (Level A, FP8 export): {outs[0]}, the same with --mtp")
    n_idx = sum(1 for e in decisions if e["kind"] == "idx")
    print(f"{len(toks)} tokens, {len(decisions)} forced decisions ({n_idx} indexer rows)")
    print("engine_match: " + ("PASS" if ok_all else "FAIL"))
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
