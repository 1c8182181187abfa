"""Trains the built-in model on the KJV training split: one command, fixed seed, resumable.

  /usr/bin/python3 train/train.py --out runs/kjv --steps 2000

Each step takes a batch of random windows (positions drawn from a generator seeded by
(seed, step), so a resumed run sees exactly the batches of an uninterrupted one), computes
  loss = CE(main head, t+1) + mtp_weight·CE(MTP head, t+2) + indexer_weight·KL(indexer)
and takes an AdamW step (warm-up, cosine decay to 10%, gradient clip 1); then the routing
biases of the score-routed layers move by ±gamma toward balanced load (DeepSeek-V3's
auxiliary-loss-free balancing). Writes OUT/ckpt.pt (model + optimizer + step, atomically, every
--save-every steps and at the end; the run resumes from it when it exists), OUT/log.jsonl,
OUT/loss.png, and reports validation perplexity on the held-out chapters (corpus.py), the MTP
head's top-1 accuracy on t+2, and how often its argmax equals the main head's argmax one
position later (the greedy draft-acceptance proxy).
"""
import argparse
import hashlib
import json
import math
import os
import sys
import time

import numpy as np

# Idle OpenMP threads sleep instead of spinning: torch's OpenMP pool and OpenBLAS's pthreads
# take turns, and spinning threads cost 4-8x in wall time on a loaded 2-core machine.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bpe  # noqa: E402
import corpus  # noqa: E402
import model as M  # noqa: E402

TOKENIZER = os.path.join(HERE, "tokenizer", "tokenizer.json")


def load_data(out, data_chars):
    """(train ids, val ids) as int64 arrays, cached in OUT keyed by the tokenizer's hash."""
    with open(TOKENIZER, "rb") as f:
        h = hashlib.sha256(f.read()).hexdigest()[:16]
    path = os.path.join(out, f"data_{h}_{data_chars}.npz")
    if os.path.exists(path):
        d = np.load(path)
        return d["train"], d["val"]
    tok = bpe.Tokenizer.load(TOKENIZER)
    tr, va = corpus.split_texts()
    if data_chars:
        tr, va = tr[:data_chars], va[:max(data_chars // 10, 20000)]
    train, val = (np.array(tok.encode(t), dtype=np.int64) for t in (tr, va))
    np.savez(path + ".tmp.npz", train=train, val=val)
    os.replace(path + ".tmp.npz", path)
    return train, val


def batch(data, seed, step, bsz, seq):
    g = np.random.default_rng([seed, step])
    starts = g.integers(0, len(data) - seq, bsz)
    return torch.from_numpy(np.stack([data[s:s + seq] for s in starts]))


def losses(model, tok, mtp_weight):
    logits, mtp_logits, idx_loss = model(tok, mtp=mtp_weight > 0)
    model.last_logits = logits.detach()
    V = logits.shape[-1]
    main = F.cross_entropy(logits[:, :-1].reshape(-1, V), tok[:, 1:].reshape(-1))
    mtp = F.cross_entropy(mtp_logits[:, :-1].reshape(-1, V), tok[:, 2:].reshape(-1)) \
        if mtp_logits is not None else torch.zeros(())
    return main, mtp, idx_loss if idx_loss is not None else torch.zeros(()), mtp_logits


@torch.no_grad()
def evaluate(model, val, seq, n_windows=16, bsz=4):
    """Validation loss / perplexity of the main head, MTP loss and MTP top-1 agreement with
    t+2, on n_windows fixed windows spread over the held-out split."""
    model.eval()
    starts = np.linspace(0, len(val) - seq - 1, n_windows).astype(np.int64)
    tot = {"main": 0.0, "mtp": 0.0, "mtp_acc": 0.0, "mtp_agree": 0.0}
    for i in range(0, n_windows, bsz):
        tok = torch.from_numpy(np.stack([val[s:s + seq] for s in starts[i:i + bsz]]))
        main, mtp, _, mtp_logits = losses(model, tok, 1.0)
        n = tok.shape[0] / n_windows
        tot["main"] += main.item() * n
        tot["mtp"] += mtp.item() * n
        draft = mtp_logits[:, :-1].argmax(-1)
        tot["mtp_acc"] += (draft == tok[:, 2:]).float().mean().item() * n
        # Greedy acceptance proxy: the draft for p+2 equals the main head's argmax there.
        tot["mtp_agree"] += (draft == model.last_logits[:, 1:-1].argmax(-1)).float().mean().item() * n
    model.train()
    tot["ppl"] = math.exp(tot["main"])
    return tot


def lr_at(step, a):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    t = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))


def make_optimizer(model, a):
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and not n.endswith("_fn")]
    rest = [p for n, p in model.named_parameters() if not (p.dim() == 2 and not n.endswith("_fn"))]
    return torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                              {"params": rest, "weight_decay": 0.0}],
                             lr=a.lr, betas=(0.9, 0.95), eps=1e-8)


def save(path, model, opt, step, cfg, args, history):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                "config": cfg, "args": vars(args), "history": history}, tmp)
    os.replace(tmp, path)


def plot(out, history):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("train: matplotlib missing, no loss.png")
        return
    tr = [h for h in history if h["kind"] == "train"]
    va = [h for h in history if h["kind"] == "val"]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    if tr:
        x = np.array([h["tokens"] for h in tr]) / 1e6
        y = np.array([h["loss"] for h in tr])
        k = max(1, len(y) // 50)
        ys = np.convolve(y, np.ones(k) / k, mode="valid")
        ax.plot(x, y, color="#bbb", lw=0.6, label="train (per step)")
        ax.plot(x[k - 1:], ys, color="C0", label=f"train (mean of {k})")
        mt = np.array([h["mtp"] for h in tr])
        ax.plot(x[k - 1:], np.convolve(mt, np.ones(k) / k, mode="valid"), color="C2",
                label="train MTP (t+2)")
    if va:
        ax.plot([h["tokens"] / 1e6 for h in va], [h["main"] for h in va], "o-", color="C1",
                label="validation")
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("cross-entropy (nats)")
    ax.set_title("dsv4 built-in model on the KJV")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "loss.png"), dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--indexer-weight", type=float, default=1.0)
    ap.add_argument("--gamma", type=float, default=1e-3, help="routing-bias step")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--save-every", type=int, default=200)
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--stop-after", type=int, default=0,
                    help="stop (and save) after this many steps of this invocation (tests)")
    ap.add_argument("--data-chars", type=int, default=0, help="use a prefix of the corpus (tests)")
    ap.add_argument("--config", default="", help="JSON object overriding config fields (tests)")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    ck_path = os.path.join(a.out, "ckpt.pt")
    train, val = load_data(a.out, a.data_chars)

    with open(TOKENIZER, encoding="utf-8") as f:
        V = len(json.load(f)["model"]["vocab"]) + len(bpe.CHAT_MARKERS)
    cfg = M.default_config(V)
    cfg.update(json.loads(a.config) if a.config else {})
    torch.manual_seed(a.seed)
    model = M.Model(cfg)
    model.init_weights(a.seed)
    opt = make_optimizer(model, a)
    step, history = 0, []
    if os.path.exists(ck_path):
        ck = torch.load(ck_path, map_location="cpu")
        if ck["config"] != cfg:
            raise SystemExit(f"{ck_path}: written with another config; use a fresh --out")
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step, history = ck["step"], ck["history"]
        print(f"train: resumed from {ck_path} at step {step}")
    total, active = M.n_params(model)
    print(f"train: {total / 1e6:.2f} M parameters ({active / 1e6:.2f} M active per token), "
          f"train {len(train)} tokens, val {len(val)} tokens, {a.steps} steps of "
          f"{a.batch}x{a.seq} tokens, threads {a.threads}")
    model.train()
    log = open(os.path.join(a.out, "log.jsonl"), "a")
    t_run, cpu_run, tokens_run, start_step = time.time(), time.process_time(), 0, step
    while step < a.steps:
        t0 = time.time()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a)
        tok = batch(train, a.seed, step, a.batch, a.seq)
        main, mtp, idx, _ = losses(model, tok, a.mtp_weight)
        loss = main + a.mtp_weight * mtp + a.indexer_weight * idx
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        model.balance_experts(a.gamma)
        step += 1
        tokens_run += tok.numel()
        dt = time.time() - t0
        rec = {"kind": "train", "step": step, "tokens": step * a.batch * a.seq,
               "loss": main.item(), "mtp": mtp.item(), "indexer": idx.item(),
               "grad_norm": gn.item(), "lr": lr_at(step - 1, a), "tok_s": tok.numel() / dt}
        history.append(rec)
        log.write(json.dumps(rec) + "\n")
        if step % a.log_every == 0 or step == a.steps:
            print(f"step {step:5d}  loss {main.item():.4f}  mtp {mtp.item():.4f}  "
                  f"idx {idx.item():.4f}  lr {rec['lr']:.2e}  |g| {gn.item():.2f}  "
                  f"{tokens_run / (time.time() - t_run):.0f} tok/s "
                  f"({tokens_run / (time.process_time() - cpu_run):.0f} per CPU-s)", flush=True)
        done = step == a.steps or (a.stop_after and step - start_step >= a.stop_after)
        if step % a.eval_every == 0 or step == a.steps:
            ev = evaluate(model, val, a.seq)
            rec = {"kind": "val", "step": step, "tokens": step * a.batch * a.seq, **ev}
            history.append(rec)
            log.write(json.dumps(rec) + "\n")
            print(f"eval {step:5d}  val loss {ev['main']:.4f}  ppl {ev['ppl']:.2f}  "
                  f"mtp loss {ev['mtp']:.4f}  mtp top-1 {ev['mtp_acc']:.3f}  "
                  f"mtp = main argmax {ev['mtp_agree']:.3f}", flush=True)
        if step % a.save_every == 0 or done:
            save(ck_path, model, opt, step, cfg, a, history)
            plot(a.out, history)
        if done:
            break
    log.close()
    el, cpu = time.time() - t_run, time.process_time() - cpu_run
    print(f"train: step {step}, {tokens_run} tokens in {el:.1f} s "
          f"({tokens_run / max(el, 1e-9):.0f} tok/s; {cpu:.1f} CPU-s, "
          f"{tokens_run / max(cpu, 1e-9):.0f} tok per CPU-s)")
    return history


if __name__ == "__main__":
    main()
