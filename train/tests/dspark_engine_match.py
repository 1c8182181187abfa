"""Trainer vs engine for the DSpark drafter: dspark.draft_logits() (Level B, fp64, weights read
back from the exported files) equals

  dsv4 logits --model DIR --tokens @FILE --dspark --gamma G --numerics float --out F.npy

the Markov-corrected logits λ_0..λ_{G-1} of one drafting round per anchor a = 0..n-2 (context =
positions 0..a, x0 = t_{a+1}, the chain on the drafter's own argmax drafts), float32
[n-1, G, V], for the BF16 and the FP8 export (or one given directory). Near-ties are taken out
of the comparison by replaying the trainer's decisions (--decisions-in): the main model's
routing and indexer picks (as engine_match.py), and the drafter's per dspark.md §3.10 —
{"block": "dspark", "kind": "moe", "stage": s, "anchor": a, "row": i, "selected": K ids} and
{"block": "dspark", "kind": "draft", "anchor": a, "row": i, "selected": [d_{i+1}]} (the draft
made from row i; forcing it continues the chain with that token). --main-decisions-only
leaves the drafter's out. Level-B storage choice (dspark.md §3.10): the target features and the
ring rows are not rounded to bf16 (fp64 here; the engine's float run is expected to keep them
in fp32 like its float KV cache).

Usage: dspark_engine_match.py DSV4_BINARY WORKDIR [--ckpt CKPT.pt | --model-dir DIR]
                              [--tokens N] [--gamma G] [--main-decisions-only]
Default: a random drafter (seeded, non-trivial sinks, routing biases, Markov tables) on the
committed target models/kjv-9m, exported both ways. --ckpt: a train_dspark.py checkpoint,
exported both ways; --model-dir: an exported DSpark directory as it is (models/kjv-9m-dspark).
Exit 0 when it holds, 1 otherwise (also when `dsv4 logits --help` does not list --dspark); 77
(skip) when torch is missing.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.dirname(HERE)
sys.path.insert(0, TRAIN)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see train.py
try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIP: {e} (install python3-torch: scripts/setup.sh --train)")
    sys.exit(77)
import bpe  # noqa: E402
import corpus  # noqa: E402
import dspark as DS  # noqa: E402
import export_dspark  # noqa: E402

TARGET = os.path.join(os.path.dirname(TRAIN), "models", "kjv-9m")
# Level B in fp32 (engine) against fp64 (trainer): summation-order noise only (engine_match.py).
ABS_TOL, REL_TOL = 1e-4, 1e-4


def engine_has_dspark(dsv4):
    r = subprocess.run([dsv4, "logits", "--help"], capture_output=True, text=True)
    return "--dspark" in r.stdout + r.stderr


def passage(n):
    """The first n tokens of the validation split (held out from training)."""
    tok = bpe.Tokenizer.load(os.path.join(TRAIN, "tokenizer", "tokenizer.json"))
    _, val = corpus.split_texts()
    return tok.encode(val[:6 * n])[:n]


def random_drafter(seed=1):
    """A drafter with the trainer's init plus non-trivial sinks, norms, biases (tests)."""
    import dspark_common as C
    _, tcfg = DS.load_target(TARGET)
    cfg = DS.dspark_config(tcfg)
    dr = DS.DSpark(cfg)
    dr.init_weights(seed)
    C.perturb(dr, seed + 1)
    return cfg, {k: v.detach().numpy() for k, v in dr.state_dict().items()}


def compare(name, ref, got):
    ref = ref.astype(np.float64)
    ok = got.shape == ref.shape
    if not ok:
        print(f"{name}: shape {list(got.shape)}, expected {list(ref.shape)} -> FAIL")
        return False
    d = np.abs(got.astype(np.float64) - ref)
    ok = bool((d <= ABS_TOL + REL_TOL * np.abs(ref)).all())
    print(f"{name}: shape {list(got.shape)}, max |λ| {np.abs(ref).max():.3f}, max abs diff "
          f"{d.max():.3e}, argmax agree {np.mean(ref.argmax(-1) == got.argmax(-1)):.4f} -> "
          f"{'ok' if ok else 'FAIL'}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dsv4")
    ap.add_argument("workdir")
    ap.add_argument("--ckpt", help="a train_dspark.py checkpoint (default: a random drafter)")
    ap.add_argument("--model-dir", help="an exported DSpark directory to compare as it is")
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--gamma", type=int, default=5)
    ap.add_argument("--main-decisions-only", action="store_true")
    a = ap.parse_args()
    if not engine_has_dspark(a.dsv4):
        print(f"FAIL: `{a.dsv4} logits --help` does not list --dspark")
        return 1
    torch.set_num_threads(2)
    os.makedirs(a.workdir, exist_ok=True)
    if a.model_dir:
        dirs = [("as given", a.model_dir)]
    else:
        if a.ckpt:
            ck = torch.load(a.ckpt, map_location="cpu")
            cfg, state = ck["config"], {k: v.numpy() for k, v in ck["model"].items()}
        else:
            cfg, state = random_drafter()
        dirs = []
        for quant in ("none", "fp8"):
            d = os.path.join(a.workdir, f"dspark_{quant}")
            export_dspark.export_dspark(state, cfg, TARGET, d, quant)
            dirs.append(("BF16" if quant == "none" else "FP8", d))
    toks = passage(a.tokens)
    tokens_file = os.path.join(a.workdir, "tokens.txt")
    with open(tokens_file, "w") as f:
        f.write(",".join(map(str, toks)) + "\n")
    ok_all = True
    for name, d in dirs:
        target, drafter, _ = DS.load_drafter(d, dtype=torch.float64)
        decisions = []
        ref = DS.draft_logits(target, drafter, toks, a.gamma, decisions=decisions)
        if a.main_decisions_only:
            decisions = [e for e in decisions if e["block"] != "dspark"]
        dec_file = os.path.join(a.workdir, f"decisions_{name.replace(' ', '_')}.json")
        with open(dec_file, "w") as f:
            json.dump({"decisions": decisions}, f)
        out = os.path.join(a.workdir, f"lambda_{name.replace(' ', '_')}.npy")
        cmd = [a.dsv4, "logits", "--model", d, "--tokens", "@" + tokens_file, "--dspark",
               "--gamma", str(a.gamma), "--numerics", "float", "--decisions-in", dec_file,
               "--out", out, "--threads", "2"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout + r.stderr)
            print(f"FAIL: {' '.join(cmd)}")
            ok_all = False
            continue
        ok_all &= compare(f"{name} λ", ref["lambda"].numpy(), np.load(out))
        n_ds = sum(1 for e in decisions if e["block"] == "dspark")
        print(f"  {len(toks)} tokens, G {a.gamma}, {len(decisions)} forced decisions "
              f"({n_ds} of the drafter)")
    print("dspark_engine_match: " + ("PASS" if ok_all else "FAIL"))
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
