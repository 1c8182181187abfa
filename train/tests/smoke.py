"""train.py on a few steps (seconds): the loss decreases, and a run stopped and resumed from its
checkpoint ends with exactly the parameters of an uninterrupted run. A smaller configuration of
the same architecture (every layer kind, hash and score routing, MTP) keeps it fast.

Usage: smoke.py DSV4_BINARY(unused) WORKDIR      (exit 77 without torch)
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import torch
except ImportError as e:
    print(f"SKIP: {e} (install python3-torch: scripts/setup.sh --train)")
    sys.exit(77)

SMALL = {"hidden_size": 128, "q_lora_rank": 128, "o_lora_rank": 64, "head_dim": 96,
         "qk_rope_head_dim": 32, "index_head_dim": 64, "sliding_window": 16, "index_topk": 4,
         "compress_ratios": [0, 4, 8, 4, 0], "moe_intermediate_size": 64}
# One thread: threaded reductions may differ in the last bit from run to run, which would hide
# a resume bug behind noise.
ARGS = ["--threads", "1", "--batch", "4", "--seq", "64", "--lr", "3e-3", "--warmup", "2", "--log-every", "5",
        "--eval-every", "1000", "--save-every", "1000", "--data-chars", "200000",
        "--config", json.dumps(SMALL)]


def run(out, steps, extra=()):
    cmd = [sys.executable, os.path.join(os.path.dirname(HERE), "train.py"), "--out", out,
           "--steps", str(steps)] + ARGS + list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout[-1500:])
    if r.returncode != 0:
        print(r.stderr[-3000:])
        raise SystemExit(f"failed: {' '.join(cmd)}")


def main():
    work = sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    ok = True
    full, parts = os.path.join(work, "full"), os.path.join(work, "parts")
    os.makedirs(parts)
    # Share the encoded-data cache so the second run does not encode again.
    run(full, 16)
    for f in os.listdir(full):
        if f.startswith("data_"):
            shutil.copy(os.path.join(full, f), parts)
    run(parts, 16, ["--stop-after", "8"])
    run(parts, 16)
    a = torch.load(os.path.join(full, "ckpt.pt"))
    b = torch.load(os.path.join(parts, "ckpt.pt"))
    losses = [h["loss"] for h in a["history"] if h["kind"] == "train"]
    first, last = sum(losses[:4]) / 4, sum(losses[-4:]) / 4
    print(f"loss: first 4 steps {first:.3f}, last 4 steps {last:.3f}")
    if not last < first - 0.5:
        print("FAIL: the loss does not decrease")
        ok = False
    if a["step"] != 16 or b["step"] != 16:
        print(f"FAIL: steps {a['step']} and {b['step']}, expected 16")
        ok = False
    diff = max((a["model"][k].double() - b["model"][k].double()).abs().max().item()
               for k in a["model"])
    print(f"resume: max parameter difference to the uninterrupted run {diff:.3e}")
    if diff != 0.0:
        print("FAIL: the resumed run differs from the uninterrupted one")
        ok = False
    if not os.path.exists(os.path.join(full, "loss.png")):
        print("FAIL: no loss.png")
        ok = False
    print("smoke: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
