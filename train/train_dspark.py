"""Trains a DSpark drafter (dspark.py) against a FROZEN target on the KJV training split: one
command, fixed seed, resumable.

  /usr/bin/python3 train/train_dspark.py --out runs/dspark       # 600 steps, ~25 min on 2 cores

Target: an exported checkpoint directory (default models/kjv-9m, the built-in model), read back
with its FP8/FP4 weights dequantized; its MTP layer is not used. Each step takes --batch
windows of --seq tokens (positions from a generator seeded by (seed, step), as train.py) and
--anchors random anchor positions a per window (a <= seq-G-2, seeded by (seed, step, 1)). The
target runs once per window without gradients (its logits and the features H(p) of every
position); each anchor gets a draft block of G = dspark_block_size rows: row 0 the true token
t_{a+1}, rows 1.. the noise token, at positions a+1..a+G, context = the ring of the last W
positions <= a. Loss:
  mean_i CE(λ_i, t_{a+2+i}),  λ_i = U_i + W2·W1[t_{a+1+i}]   (Markov chain teacher-forced on
                                                              the TRUE previous tokens)
  + conf_weight · BCE(z_i, [argmax λ_i = the target's argmax at a+1+i])   (confidence head; its
                                                              inputs h_i, m_i detached)
AdamW (β 0.9/0.95, weight decay 0.1 on matrices), warm-up, cosine to 10 %, clip 1, fp32; the
stages' routing biases move by ±gamma toward balanced load (as train.py). Writes OUT/ckpt.pt
(drafter + optimizer + step; resumes from it), OUT/log.jsonl, OUT/loss.png; evaluates the
teacher-forced loss and top-1 per row on held-out windows, and at the end (or --eval-only) the
greedy acceptance (evaluate_acceptance).
"""
import argparse
import hashlib
import json
import math
import os
import sys
import time

import numpy as np

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see train.py
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dspark as DS  # noqa: E402
import model as M  # noqa: E402
import train as T  # noqa: E402

DEFAULT_TARGET = os.path.join(os.path.dirname(HERE), "models", "kjv-9m")


# ------------------------------------------------------------------------------- loss

def anchors_for(seed, step, bsz, seq, n_anchors, G):
    """[bsz, A] sorted distinct anchors in [0, seq-G-2] (every target t_{a+2+i} in the window)."""
    g = np.random.default_rng([seed, step, 1])
    hi = seq - G - 1
    A = min(n_anchors, hi)
    return torch.from_numpy(np.stack([np.sort(g.choice(hi, A, replace=False)) for _ in range(bsz)]))


def teacher_forced(target, drafter, tok, anchors, G):
    """tok [B,T], anchors [B,A] -> dict of per-row CE [B,A,G], λ, z, the hit labels."""
    cfg = drafter.cfg
    B, Tn = tok.shape
    dt = target.embed.weight.dtype
    with torch.no_grad():
        logits, H = DS.target_features(target, tok, drafter.layer_ids)
    cos, sin = DS.rope_main(cfg, Tn + G, dt)
    rows = drafter.context_rows(H, cos, sin)
    x0 = tok.gather(1, anchors + 1)
    h, U = drafter.block(target, rows, anchors, x0, G, cos, sin)                  # [B,A,G,V]
    at = (anchors[..., None] + 1 + torch.arange(G)).flatten(1)                     # a+1+i
    prev = tok.gather(1, at).view_as(h[..., 0])
    nxt = tok.gather(1, at + 1).view_as(prev)
    m = drafter.markov_embed(prev)
    lam = U + drafter.markov_bias(m)
    V = lam.shape[-1]
    ce = F.cross_entropy(lam.reshape(-1, V), nxt.reshape(-1), reduction="none").view_as(prev)
    greedy = logits.argmax(-1).gather(1, at).view_as(prev)  # the target's token for a+2+i
    hit = (lam.detach().argmax(-1) == greedy).float()
    z = drafter.confidence(h.detach(), m.detach())
    conf = F.binary_cross_entropy_with_logits(z, hit)
    return {"ce": ce, "conf": conf, "lam": lam, "nxt": nxt, "greedy": greedy, "hit": hit}


@torch.no_grad()
def evaluate(target, drafter, val, seq, G, n_windows=8, bsz=4, n_anchors=64):
    """Teacher-forced held-out loss per row, top-1 = true token, top-1 = target's greedy token
    (the proxy for acceptance at each row given the earlier rows accepted), on fixed windows."""
    drafter.eval()
    starts = np.linspace(0, len(val) - seq - 1, n_windows).astype(np.int64)
    acc = {"ce": torch.zeros(G), "top1": torch.zeros(G), "agree": torch.zeros(G)}
    for i in range(0, n_windows, bsz):
        tok = torch.from_numpy(np.stack([val[s:s + seq] for s in starts[i:i + bsz]]))
        anchors = anchors_for(12345, i, tok.shape[0], seq, n_anchors, G)
        r = teacher_forced(target, drafter, tok, anchors, G)
        w = tok.shape[0] / n_windows
        acc["ce"] += r["ce"].mean((0, 1)) * w
        am = r["lam"].argmax(-1)
        acc["top1"] += (am == r["nxt"]).float().mean((0, 1)) * w
        acc["agree"] += r["hit"].mean((0, 1)) * w
    drafter.train()
    return {k: v.tolist() for k, v in acc.items()}


# ------------------------------------------------------------------ greedy acceptance

@torch.no_grad()
def greedy_generate(target, prompts, n_new):
    """prompts [B, P] -> [B, P + n_new], the target's greedy continuation (Level B, fp32)."""
    tok = prompts
    for _ in range(n_new):
        logits, _, _ = target(tok, mtp=False)
        tok = torch.cat([tok, DS.first_argmax(logits[:, -1])[:, None]], 1)
    return tok


@torch.no_grad()
def draft_all(target, drafter, tok, G, anchors):
    """The drafter's own chain (inference) at the given anchors of tok [B,T]: drafts [B,A,G]."""
    cfg = drafter.cfg
    logits, H = DS.target_features(target, tok, drafter.layer_ids)
    cos, sin = DS.rope_main(cfg, tok.shape[1] + G, target.embed.weight.dtype)
    rows = drafter.context_rows(H, cos, sin)
    x0 = tok.gather(1, anchors + 1)
    _, U = drafter.block(target, rows, anchors, x0, G, cos, sin)
    _, drafts, _ = drafter.chain(U, x0)
    return drafts, logits


@torch.no_grad()
def evaluate_acceptance(target, drafter, val, G, n_prompts=16, prompt_len=32, n_new=96,
                        mtp_target=None, parts=("generated", "text")):
    """Greedy acceptance on held-out text, two ways; per row k = 1..G the fraction of drafts d_k
    equal to the target's greedy token for that position, and the mean accepted length of a
    round (drafts accepted up to the first miss; exact verification at T = 0).

    generated: the target decodes greedily from n_prompts held-out prompts of prompt_len tokens
      for n_new tokens; the drafter runs on that committed sequence at every anchor
      a = prompt_len-1 .. (a round after every possible commit), x0 = the greedy token at a+1,
      and d_k is compared with the greedy token at a+1+k. This is what a greedy
      `dsv4 generate --dspark` run sees (the same prompts and sequence).
    text: the committed prefix is held-out text itself (anchors at every position of the
      windows), and the target's greedy continuation of each prefix t_0..t_{a+1} is computed
      for G tokens (right-padded batched forwards; the model is causal).
    mtp_target: the target with its MTP layer: its one draft per anchor is scored the same way
      (row 1 only) for comparison."""
    out = {}
    if "generated" in parts:
        out["generated"] = acceptance_generated(target, drafter, val, G, n_prompts, prompt_len,
                                                n_new, mtp_target)
    if "text" in parts:
        out["text"] = acceptance_text(target, drafter, val, G, mtp_target)
    return out


def acceptance_generated(target, drafter, val, G, n_prompts, prompt_len, n_new, mtp_target):
    starts = np.linspace(0, len(val) - prompt_len - n_new - 1, n_prompts).astype(np.int64)
    prompts = torch.from_numpy(np.stack([val[s:s + prompt_len] for s in starts]))
    seqs = []
    for i in range(0, n_prompts, 8):
        seqs.append(greedy_generate(target, prompts[i:i + 8], n_new))
    seqs = torch.cat(seqs)
    Tn = seqs.shape[1]
    a = torch.arange(prompt_len - 1, Tn - G - 1).repeat(seqs.shape[0], 1)         # [B,A]
    drafts, logits = draft_all(target, drafter, seqs, G, a)
    greedy = DS.first_argmax(logits)                                               # [B,T]
    # The generated tokens are the target's greedy tokens (a consistency check of the forward).
    agree = (greedy[:, prompt_len - 1:-1] == seqs[:, prompt_len:]).float().mean().item()
    truth = torch.stack([seqs.gather(1, a + 1 + k) for k in range(1, G + 1)], -1)  # [B,A,G]
    out = score(drafts, truth)
    out["greedy_consistency"] = agree
    if mtp_target is not None:
        _, mtp_logits, _ = mtp_target(seqs, mtp=True)
        d1 = DS.first_argmax(mtp_logits).gather(1, a)                               # row p -> p+2
        out["mtp_row1"] = (d1 == truth[..., 0]).float().mean().item()
    return out


def acceptance_text(target, drafter, val, G, mtp_target, n_win=4, wl=128):
    """Prefixes of held-out windows, anchors at every position."""
    wst = np.linspace(7, len(val) - wl - 1, n_win).astype(np.int64)
    texts = torch.from_numpy(np.stack([val[s:s + wl] for s in wst]))
    a = torch.arange(0, wl - 1).repeat(n_win, 1)
    drafts, _ = draft_all(target, drafter, texts, G, a)
    truth = greedy_continuations(target, texts, G)                                 # [B,wl-1,G]
    out = score(drafts, truth)
    if mtp_target is not None:
        _, mtp_logits, _ = mtp_target(texts, mtp=True)
        d1 = DS.first_argmax(mtp_logits)                                            # [B,wl-1]
        out["mtp_row1"] = (d1 == truth[..., 0]).float().mean().item()
    return out


def greedy_continuations(target, texts, G):
    """texts [B,T] -> [B,T-1,G]: for each anchor a, the target's greedy tokens for positions
    a+2..a+1+G after the prefix t_0..t_{a+1}."""
    B, Tn = texts.shape
    out = torch.zeros(B, Tn - 1, G, dtype=torch.long)
    for b in range(B):
        # one row per anchor: prefix t_0..t_{a+1}, greedy tokens appended, right-padded
        seq = texts[b].repeat(Tn - 1, 1)                                           # [A,T]
        seq = torch.cat([seq, torch.zeros(Tn - 1, G, dtype=torch.long)], 1)
        lens = torch.arange(2, Tn + 1)                                             # a+2
        rows = torch.arange(Tn - 1)
        for k in range(G):
            logits, _, _ = target(seq[:, :Tn + k], mtp=False)
            g = DS.first_argmax(logits[rows, lens + k - 1])
            seq[rows, lens + k] = g
            out[b, :, k] = g
    return out


def score(drafts, truth):
    """drafts, truth [B,A,G] -> per-row match rate, conditional acceptance, mean accepted length."""
    hit = (drafts == truth)
    G = hit.shape[-1]
    run = torch.cumprod(hit.long(), -1)                                             # prefix hits
    per_row = hit.float().mean((0, 1)).tolist()
    accepted = run.sum(-1).float()
    cond = [(run[..., k].sum() / max(1, int(run[..., k - 1].sum()))).item() if k else
            run[..., 0].float().mean().item() for k in range(G)]
    return {"per_row": per_row, "conditional": cond, "mean_accepted": accepted.mean().item(),
            "n_rounds": int(hit.shape[0] * hit.shape[1])}


# -------------------------------------------------------------------------------- loop

def balance(drafter, gamma):
    with torch.no_grad():
        for m in drafter.modules():
            if isinstance(m, M.MoE) and m.load is not None:
                m.gate.bias += gamma * torch.sign(m.load.mean() - m.load)
                m.load = None


def file_sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def plot(out, history, G):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("train_dspark: matplotlib missing, no loss.png")
        return
    tr = [h for h in history if h["kind"] == "train"]
    va = [h for h in history if h["kind"] == "val"]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    if tr:
        x = np.array([h["step"] for h in tr])
        y = np.array([h["loss"] for h in tr])
        k = max(1, len(y) // 40)
        ax.plot(x, y, color="#bbb", lw=0.6, label="train (mean over rows, per step)")
        ax.plot(x[k - 1:], np.convolve(y, np.ones(k) / k, mode="valid"), color="C0",
                label=f"train (mean of {k} steps)")
    for i in range(G):
        if va:
            ax.plot([h["step"] for h in va], [h["ce"][i] for h in va], "o-", ms=3,
                    color=f"C{i + 1}", label=f"validation row {i} (t+{i + 2})")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats)")
    ax.set_title("DSpark drafter on the KJV (frozen kjv-9m target)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "loss.png"), dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--target", default=DEFAULT_TARGET, help="exported target directory")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--anchors", type=int, default=32, help="anchors per window")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--conf-weight", type=float, default=0.1)
    ap.add_argument("--gamma", type=float, default=1e-3, help="routing-bias step")
    ap.add_argument("--stages", type=int, default=3)
    ap.add_argument("--target-layers", default="1,2,3")
    ap.add_argument("--block-size", type=int, default=5)
    ap.add_argument("--markov-rank", type=int, default=64)
    ap.add_argument("--noise-id", type=int, default=190,
                    help="190 = the byte token 0xFF, which no UTF-8 text contains")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--save-every", type=int, default=50)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--stop-after", type=int, default=0,
                    help="stop (and save) after this many steps of this invocation")
    ap.add_argument("--data-chars", type=int, default=0, help="use a prefix of the corpus (tests)")
    ap.add_argument("--no-final-eval", action="store_true", help="skip the acceptance eval")
    ap.add_argument("--eval-only", action="store_true", help="only the acceptance eval of OUT/ckpt.pt")
    ap.add_argument("--eval-dir", help="only the acceptance eval of an exported DSpark directory "
                    "(its own target and drafter, dequantized); writes OUT/acceptance_DIRNAME.json")
    ap.add_argument("--eval-parts", default="generated,text")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    ck_path = os.path.join(a.out, "ckpt.pt")
    train, val = T.load_data(a.out, a.data_chars)

    if a.eval_dir:
        target, drafter, cfg = DS.load_drafter(a.eval_dir)
        a.target = a.eval_dir
        return final_eval(a, target, drafter, val, cfg["dspark_block_size"], [],
                          f"acceptance_{os.path.basename(os.path.normpath(a.eval_dir))}.json")
    target, tcfg = DS.load_target(a.target)
    target_sha = file_sha(os.path.join(a.target, "model.safetensors"))
    cfg = DS.dspark_config(tcfg, a.stages, [int(x) for x in a.target_layers.split(",")],
                           a.block_size, a.noise_id, a.markov_rank)
    G = cfg["dspark_block_size"]
    torch.manual_seed(a.seed)
    drafter = DS.DSpark(cfg)
    drafter.init_weights(a.seed)
    with torch.no_grad():  # the Markov bias starts at 0: the base logits decide at first
        drafter.mtp[-1].markov_head.markov_w2.weight.zero_()
    opt = T.make_optimizer(drafter, a)
    step, history = 0, []
    if os.path.exists(ck_path):
        ck = torch.load(ck_path, map_location="cpu")
        if ck["config"] != cfg or ck["target_sha256"] != target_sha:
            raise SystemExit(f"{ck_path}: written with another config or target; use a fresh --out")
        drafter.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step, history = ck["step"], ck["history"]
        print(f"train_dspark: resumed from {ck_path} at step {step}")
    n_par = sum(p.numel() for p in drafter.parameters())
    print(f"train_dspark: drafter {n_par / 1e6:.2f} M parameters (NS {len(drafter.mtp)}, Lt "
          f"{drafter.layer_ids}, G {G}, Rm {cfg['dspark_markov_rank']}, noise id "
          f"{cfg['dspark_noise_token_id']}); target {a.target}; {a.steps} steps of "
          f"{a.batch}x{a.seq} tokens, {a.anchors} anchors per window; threads {a.threads}")
    if a.eval_only:
        return final_eval(a, target, drafter, val, G, history)
    drafter.train()
    log = open(os.path.join(a.out, "log.jsonl"), "a")
    t_run, cpu_run, rows_run, tok_run, start_step = time.time(), time.process_time(), 0, 0, step
    while step < a.steps:
        t0 = time.time()
        for g in opt.param_groups:
            g["lr"] = T.lr_at(step, a)
        tok = T.batch(train, a.seed, step, a.batch, a.seq)
        anchors = anchors_for(a.seed, step, a.batch, a.seq, a.anchors, G)
        r = teacher_forced(target, drafter, tok, anchors, G)
        per_row = r["ce"].mean((0, 1))
        loss = per_row.mean() + a.conf_weight * r["conf"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        balance(drafter, a.gamma)
        step += 1
        rows_run += r["ce"].numel()
        tok_run += tok.numel()
        dt = time.time() - t0
        rec = {"kind": "train", "step": step, "loss": per_row.mean().item(),
               "rows": per_row.tolist(), "conf": r["conf"].item(),
               "agree": r["hit"].mean((0, 1)).tolist(), "grad_norm": gn.item(),
               "lr": T.lr_at(step - 1, a), "s": dt}
        history.append(rec)
        log.write(json.dumps(rec) + "\n")
        if step % a.log_every == 0 or step == a.steps:
            el = time.time() - t_run
            print(f"step {step:5d}  loss {rec['loss']:.4f}  rows "
                  f"{' '.join(f'{x:.2f}' for x in rec['rows'])}  conf {rec['conf']:.3f}  "
                  f"lr {rec['lr']:.2e}  |g| {gn.item():.2f}  {tok_run / el:.0f} target tok/s, "
                  f"{rows_run / el:.0f} block rows/s", flush=True)
        done = step == a.steps or (a.stop_after and step - start_step >= a.stop_after)
        if step % a.eval_every == 0 or step == a.steps:
            ev = evaluate(target, drafter, val, a.seq, G)
            rec = {"kind": "val", "step": step, **ev}
            history.append(rec)
            log.write(json.dumps(rec) + "\n")
            print(f"eval {step:5d}  val CE per row {' '.join(f'{x:.3f}' for x in ev['ce'])}  "
                  f"top-1 {' '.join(f'{x:.3f}' for x in ev['top1'])}  = target greedy "
                  f"{' '.join(f'{x:.3f}' for x in ev['agree'])}", flush=True)
        if step % a.save_every == 0 or done:
            tmp = ck_path + ".tmp"
            torch.save({"model": drafter.state_dict(), "opt": opt.state_dict(), "step": step,
                        "config": cfg, "target": os.path.abspath(a.target),
                        "target_sha256": target_sha, "args": vars(a), "history": history}, tmp)
            os.replace(tmp, ck_path)
            plot(a.out, history, G)
        if done:
            break
    log.close()
    el, cpu = time.time() - t_run, time.process_time() - cpu_run
    print(f"train_dspark: step {step}, {tok_run} target tokens, {rows_run} block rows in "
          f"{el:.1f} s ({tok_run / max(el, 1e-9):.0f} target tok/s, "
          f"{rows_run / max(el, 1e-9):.0f} block rows/s; {cpu:.1f} CPU-s)")
    if step == a.steps and not a.no_final_eval:
        final_eval(a, target, drafter, val, G, history)
    return history


def final_eval(a, target, drafter, val, G, history, name="acceptance.json"):
    drafter.eval()
    t0 = time.time()
    mtp_target, _ = DS.load_target(a.target, keep_mtp=True) \
        if "mtp.0.e_proj.weight" in _names(a.target) else (None, None)
    acc = evaluate_acceptance(target, drafter, val, G, mtp_target=mtp_target,
                              parts=a.eval_parts.split(","))
    print(f"acceptance ({time.time() - t0:.0f} s):")
    for k, v in acc.items():
        print(f"  {k}: d_k = greedy per row {' '.join(f'{x:.3f}' for x in v['per_row'])}; "
              f"conditional {' '.join(f'{x:.3f}' for x in v['conditional'])}; mean accepted "
              f"{v['mean_accepted']:.3f} of {G} ({v['n_rounds']} rounds)"
              + (f"; MTP row 1 {v['mtp_row1']:.3f}" if "mtp_row1" in v else ""))
    with open(os.path.join(a.out, name), "w") as f:
        json.dump(acc, f, indent=1)
    return history


def _names(model_dir):
    """Tensor names of a directory's model.safetensors (header only)."""
    import struct
    with open(os.path.join(model_dir, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return set(json.loads(f.read(n))) - {"__metadata__"}


if __name__ == "__main__":
    main()
