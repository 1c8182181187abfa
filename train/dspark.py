"""DSpark speculative drafter (shared/spec/dspark.md), Level-B (plain fp32) math: the same
computation as the engine's drafter at --numerics float. Per anchor position a (context =
committed positions 0..a, anchor token x0 = the token at a+1) and block width G (γ):

  H(p)     = concat_{l in Lt, ascending} mean_k X_l(p)[k]        X_l = HC stack after block l (§2)
  main_x(p)= RMSNorm(mtp.0.main_proj · H(p); mtp.0.main_norm)                           (§3.2)
  c_s(p)   = RoPE(RMSNorm(mtp.s.attn.wkv · main_x(p); kv_norm), p)   main profile, no YaRN (§3.3)
  Z0_i     = [embed[u_i]] x N streams,  u_0 = x0, u_i = ν (i >= 1),  pos_i = a + 1 + i    (§3.4)
  Z^{s+1}  = V4 block of stage s (HcPre, attn_norm, attention, HcPost; HcPre, ffn_norm,
             score-routed MoE + shared expert, HcPost); its attention is NON-causal: every row
             attends to the n_c = min(W, a+1) context rows c_s(a+1-n_c .. a) and to all G block
             keys k_i (rows' own key path at pos_i), plus the sink                  (§3.5-§3.6)
  h_i      = HcHead(Z^NS_i; mtp.{NS-1}.hc_head_*),  U_i = head · RMSNorm(h_i; mtp.{NS-1}.norm) (§3.7)
  λ_i      = U_i + W2 · W1[prev_i],  prev_0 = x0, prev_{i+1} = d_{i+1} = argmax λ_i
             (exact ties -> lowest id)                                                 (§3.8)
  z_i      = proj · [h_i, W1[prev_i]]   confidence logit                               (§3.9)

The drafter reuses the target's embed.weight and head.weight; it holds only the mtp.{s}.*
tensors of dspark.md §1.4 (parameter names = checkpoint names). Functions take the target
model (model.Model without its MTP layer) as an argument. Shapes: B sequences, T positions,
A anchors per sequence, G block rows, N streams, D hidden, V vocabulary, Rm Markov rank.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import model as M

DSPARK_FIELDS = ("dspark_block_size", "dspark_noise_token_id", "dspark_target_layer_ids",
                 "dspark_markov_rank")


# ------------------------------------------------------------------------------ config

def dspark_config(target_cfg, n_stages=3, target_layer_ids=(1, 2, 3), block_size=5,
                  noise_token_id=190, markov_rank=64):
    """The DSpark checkpoint's config.json fields (dspark.md §1.2): the target's, with
    compress_ratios = main entries + NS zeros, num_nextn_predict_layers 1 (stale, as in the
    release) and the four dspark_* fields."""
    L = target_cfg["num_hidden_layers"]
    cfg = {k: v for k, v in target_cfg.items() if k not in DSPARK_FIELDS}
    cfg["compress_ratios"] = list(target_cfg["compress_ratios"][:L]) + [0] * n_stages
    cfg["num_nextn_predict_layers"] = 1
    cfg["dspark_block_size"] = int(block_size)
    cfg["dspark_noise_token_id"] = int(noise_token_id)
    cfg["dspark_target_layer_ids"] = [int(x) for x in target_layer_ids]
    cfg["dspark_markov_rank"] = int(markov_rank)
    check_config(cfg)
    return cfg


def n_stages_of(cfg):
    return len(cfg["compress_ratios"]) - cfg["num_hidden_layers"]


def check_config(cfg):
    """The constraints of dspark.md §5 that the trainer relies on; errors name the field."""
    L = cfg["num_hidden_layers"]
    for f in DSPARK_FIELDS:
        if f not in cfg:
            raise ValueError(f"{f} missing")
    ns = n_stages_of(cfg)
    if ns < 1 or any(r != 0 for r in cfg["compress_ratios"][L:]):
        raise ValueError(f"compress_ratios {cfg['compress_ratios']}: need {L} main entries "
                         "then NS >= 1 zeros")
    lt = cfg["dspark_target_layer_ids"]
    if not lt or any(b <= a for a, b in zip(lt, lt[1:])) or lt[0] < 0 or lt[-1] >= L:
        raise ValueError(f"dspark_target_layer_ids {lt}: non-empty, strictly ascending, in [0, {L})")
    if not 0 <= cfg["dspark_noise_token_id"] < cfg["vocab_size"]:
        raise ValueError(f"dspark_noise_token_id {cfg['dspark_noise_token_id']} not in "
                         f"[0, {cfg['vocab_size']})")
    if cfg["dspark_markov_rank"] < 1 or cfg["dspark_block_size"] < 1:
        raise ValueError("dspark_markov_rank and dspark_block_size must be >= 1")
    if cfg["num_hash_layers"] > L:
        raise ValueError("num_hash_layers > num_hidden_layers")


def target_config(cfg):
    """The main model's config for model.Model: no MTP layer, no dspark_* fields."""
    L = cfg["num_hidden_layers"]
    t = {k: v for k, v in cfg.items() if k not in DSPARK_FIELDS}
    t["compress_ratios"] = list(cfg["compress_ratios"][:L])
    t["num_nextn_predict_layers"] = 0
    return t


# ------------------------------------------------------------------------------ modules

class MarkovHead(nn.Module):
    """W1 = markov_w1.weight [V, Rm] (row t: the Markov embedding of token t),
    W2 = markov_w2.weight [V, Rm] (linear layout [out V, in Rm]): β(prev) = W2 · W1[prev]."""

    def __init__(self, V, Rm):
        super().__init__()
        self.markov_w1 = M.Embed(V, Rm)
        self.markov_w2 = M.lin(V, Rm)

    def embed(self, prev):
        return self.markov_w1.weight[prev]                                         # [..., Rm]

    def bias(self, m):
        return self.markov_w2(m)                                                    # [..., V]


class ConfidenceHead(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.proj = M.lin(1, width)                                                 # [1, D+Rm]


class Stage(M.Block):
    """mtp.{s}: a V4 block at layer index L+s (ratio 0, score routing); stage 0 also holds
    main_proj/main_norm, the last stage norm, hc_head_*, the Markov and confidence heads."""

    def __init__(self, cfg, s, n_stages):
        super().__init__(cfg, cfg.num_hidden_layers + s)
        D, eps = cfg.hidden_size, cfg.rms_norm_eps
        if s == 0:
            self.main_proj = M.lin(D, len(cfg.dspark_target_layer_ids) * D)
            self.main_norm = M.RMSNorm(D, eps)
        if s == n_stages - 1:
            self.norm = M.RMSNorm(D, eps)
            M.add_hc_head(self, cfg)
            self.markov_head = MarkovHead(cfg.vocab_size, cfg.dspark_markov_rank)
            self.confidence_head = ConfidenceHead(D + cfg.dspark_markov_rank)


def block_key_mask(G, device=None):
    """[G rows, G block keys]: which block keys a row sees. All of them (no causal mask,
    dspark.md §3.6); a test swaps in a causal mask to show that it would change the result."""
    return torch.ones(G, G, dtype=torch.bool, device=device)


def dspark_attention(cfg, attn, x, cos, sin, ring, ring_ok):
    """x [B,A,G,D] attention input of the block rows; cos/sin [B,A,G,Dr/2] at pos_i;
    ring [B,A,W,Dh] the stage's context rows of each anchor's window, ring_ok [B,A,W] (slot
    holds a committed position). -> [B,A,G,D]. K = V: one shared head (model.md §6)."""
    B, A, G, _ = x.shape
    H, Dh, Go = cfg.num_attention_heads, cfg.head_dim, cfg.o_groups
    c4, s4 = cos.unsqueeze(-2), sin.unsqueeze(-2)
    qr = attn.q_norm(attn.wq_a(x))                                                  # [B,A,G,Rq]
    q = M.rope(M.rms(attn.wq_b(qr).unflatten(-1, (H, Dh)), cfg.rms_norm_eps), c4, s4)
    k = M.rope(attn.kv_norm(attn.wkv(x)), cos, sin)                                 # [B,A,G,Dh]
    scale = 1.0 / math.sqrt(Dh)
    lc = torch.einsum("baghd,bawd->baghw", q, ring) * scale                         # context
    lc = lc.masked_fill(~ring_ok[:, :, None, None, :], -math.inf)
    lb = torch.einsum("baghd,bajd->baghj", q, k) * scale                            # block keys
    lb = lb.masked_fill(~block_key_mask(G, x.device)[:, None, :], -math.inf)
    sink = attn.attn_sink.view(1, 1, 1, H, 1).expand(B, A, G, H, 1)
    p = torch.softmax(torch.cat([lc, lb, sink], -1), -1)
    W = ring.shape[2]
    o = torch.einsum("baghw,bawd->baghd", p[..., :W], ring) + \
        torch.einsum("baghj,bajd->baghd", p[..., W:W + G], k)                       # [B,A,G,H,Dh]
    o = M.rope(o, c4, s4, inverse=True)
    wa = attn.wo_a.weight.unflatten(0, (Go, cfg.o_lora_rank))                       # [Go,Ro,H·Dh/Go]
    u = torch.einsum("bagci,coi->bagco", o.reshape(B, A, G, Go, H * Dh // Go), wa)
    return attn.wo_b(u.flatten(-2))


class DSpark(nn.Module):
    def __init__(self, cfg_dict):
        super().__init__()
        check_config(cfg_dict)
        self.cfg = M.Cfg(cfg_dict)
        ns = n_stages_of(cfg_dict)
        self.mtp = nn.ModuleList(Stage(self.cfg, s, ns) for s in range(ns))

    @property
    def layer_ids(self):
        return list(self.cfg.dspark_target_layer_ids)

    # ------------------------------------------------------------------ initialization
    def init_weights(self, seed):
        """The trainer's init (model.Model.init_weights conventions): linears N(0, 1/fan_in)
        (main_proj N(0, 1/(|Lt|·D))), wo_b and w2 scaled by 1/sqrt(2·NS); HC fn N(0, 1/(N·D)),
        scales 0.1, bases 0 with comb base +4 on the diagonal; norms 1; sinks 0; gate.bias 0;
        markov_w1 N(0, 1), markov_w2 N(0, 1/Rm)."""
        cfg = self.cfg
        g = torch.Generator().manual_seed(seed)
        out_scale = 1.0 / math.sqrt(2 * len(self.mtp))
        N, Mx = cfg.hc_mult, cfg.hc_mix
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("markov_w1.weight"):
                    p.copy_(torch.randn(p.shape, generator=g))
                else:
                    M.init_parameter(name, p, g, out_scale, N, Mx)
            for n, b in self.named_buffers():
                b.zero_()  # gate.bias

    # ------------------------------------------------------------------- the pieces
    def context_rows(self, H, cos, sin):
        """H [B,T,|Lt|·D] -> [c_s [B,T,Dh] for each stage], c_s(p) at positions 0..T-1."""
        first = self.mtp[0]
        T = H.shape[1]
        main_x = first.main_norm(first.main_proj(H))                                # [B,T,D]
        return [M.rope(st.attn.kv_norm(st.attn.wkv(main_x)), cos[:T], sin[:T]) for st in self.mtp]

    def rings(self, rows, anchors):
        """rows [B,T,Dh], anchors [B,A] -> (ring [B,A,W,Dh], ok [B,A,W]): slot j holds position
        a-W+1+j; a slot is used iff that position is >= 0 (n_c = min(W, a+1) slots)."""
        W = self.cfg.sliding_window
        pos = anchors[..., None] - W + 1 + torch.arange(W, device=anchors.device)
        ok = pos >= 0
        b = torch.arange(rows.shape[0], device=anchors.device)[:, None, None]
        return rows[b, pos.clamp_min(0)], ok

    def moe(self, s, x, u, forced=None, record=None):
        """Stage s's MoE on x [B,A,G,D] (score routing: top-K of s + gate.bias), token ids u.
        forced: expert ids [B,A,G,K] to use instead; record(s, sel) sees the selection."""
        st, cfg = self.mtp[s], self.cfg
        B, A, G, D = x.shape
        K = cfg.num_experts_per_tok
        score = torch.sqrt(F.softplus(x @ st.ffn.gate.weight.t()))
        sel = torch.topk((score + st.ffn.gate.bias).detach(), K, -1).indices        # [B,A,G,K]
        if forced is not None:
            sel = forced
        if record is not None:
            record(s, sel)
        ctx = {"forced_moe": {(True, s): sel.reshape(-1, K)}, "mtp": True, "layer": s,
               "decisions": None}
        return st.ffn(x.reshape(B * A, G, D), u.reshape(B * A, G), ctx).view(B, A, G, D)

    def stage(self, s, Z, u, cos, sin, ring, ring_ok, forced=None, record=None):
        """Z [B,A,G,N,D] -> Z [B,A,G,N,D] (dspark.md §3.5)."""
        st, cfg = self.mtp[s], self.cfg
        y, post, C = M.hc_pre(cfg, st.hc_attn_fn, st.hc_attn_base, st.hc_attn_scale, Z)
        a = dspark_attention(cfg, st.attn, st.attn_norm(y), cos, sin, ring, ring_ok)
        Z = M.hc_post(a, post, C, Z)
        y, post, C = M.hc_pre(cfg, st.hc_ffn_fn, st.hc_ffn_base, st.hc_ffn_scale, Z)
        return M.hc_post(self.moe(s, st.ffn_norm(y), u, forced, record), post, C, Z)

    def block(self, target, rows, anchors, x0, G, cos, sin, forced_moe=None, record=None):
        """The draft blocks: anchors [B,A], x0 [B,A] -> (h [B,A,G,D] pre-norm HcHead output,
        U [B,A,G,V] base logits). rows: context_rows(); cos/sin cover positions < max(a)+1+G."""
        cfg = self.cfg
        B, A = anchors.shape
        u = torch.full((B, A, G), cfg.dspark_noise_token_id, dtype=torch.long,
                       device=anchors.device)
        u[..., 0] = x0
        pos = anchors[..., None] + 1 + torch.arange(G, device=anchors.device)      # [B,A,G]
        cb, sb = cos[pos], sin[pos]
        Z = target.embed.weight[u].unsqueeze(-2).expand(B, A, G, cfg.hc_mult, cfg.hidden_size)
        for s in range(len(self.mtp)):
            ring, ok = self.rings(rows[s], anchors)
            Z = self.stage(s, Z, u, cb, sb, ring, ok,
                           None if forced_moe is None else forced_moe[s], record)
        last = self.mtp[-1]
        h = M.hc_head(cfg, last.hc_head_fn, last.hc_head_base, last.hc_head_scale, Z)
        return h, target.head(last.norm(h))

    def markov_embed(self, prev):
        return self.mtp[-1].markov_head.embed(prev)

    def markov_bias(self, m):
        return self.mtp[-1].markov_head.bias(m)

    def confidence(self, h, m):
        return self.mtp[-1].confidence_head.proj(torch.cat([h, m], -1)).squeeze(-1)

    def chain(self, U, x0, forced_drafts=None):
        """Markov chain on the drafter's own drafts (§3.8): U [B,A,G,V], x0 [B,A] ->
        (λ [B,A,G,V], drafts [B,A,G], Markov embeddings m [B,A,G,Rm]). forced_drafts [B,A,G]:
        a draft id to continue the chain with instead of the argmax (-1: not forced)."""
        prev, lams, drafts, ms = x0, [], [], []
        for i in range(U.shape[2]):
            m = self.markov_embed(prev)
            lam = U[:, :, i] + self.markov_bias(m)
            d = first_argmax(lam)
            if forced_drafts is not None:
                d = torch.where(forced_drafts[:, :, i] >= 0, forced_drafts[:, :, i], d)
            lams.append(lam)
            drafts.append(d)
            ms.append(m)
            prev = d
        return torch.stack(lams, 2), torch.stack(drafts, 2), torch.stack(ms, 2)


def first_argmax(x):
    """argmax over the last dim with exact ties to the lowest index."""
    idx = torch.arange(x.shape[-1], device=x.device)
    return torch.where(x == x.max(-1, keepdim=True).values, idx, x.shape[-1]).min(-1).values


def target_features(target, tok, layer_ids, decisions=None, forced=None):
    """One whole-sequence target forward: tok [B,T] -> (logits [B,T,V], H [B,T,|Lt|·D])."""
    stacks = []
    logits, _, _ = target(tok, mtp=False, decisions=decisions, forced=forced, stacks=stacks)
    return logits, torch.cat([stacks[l].mean(-2) for l in layer_ids], -1)


def rope_main(cfg, n_pos, dtype, device=None):
    """The main RoPE profile (rope_theta, no YaRN) for positions 0..n_pos-1."""
    cos, sin = M.rope_table(cfg, False, n_pos)
    return cos.to(device, dtype), sin.to(device, dtype)


# --------------------------------------------------------------------- the reference

def draft_logits(target, drafter, tokens, G, decisions=None, forced_main=None):
    """Teacher-forced reference, what `dsv4 logits --dspark --gamma G --numerics float` writes:
    tokens t_0..t_{n-1}; the target features from one whole-sequence target forward; for each
    anchor a = 0..n-2 (context = positions 0..a, x0 = t_{a+1}) one drafting round with the
    Markov chain on the drafter's own argmax drafts. -> dict with "lambda" [n-1, G, V],
    "drafts" [n-1, G], "z" [n-1, G] (confidence logits), "target_logits" [n, V].
    decisions: a list that receives the main model's decisions and the drafter's, in the
    engine's --decisions-in JSON (dspark.md §3.10): {"block": "dspark", "kind": "moe", "stage",
    "anchor", "row", "selected": K expert ids} and {"block": "dspark", "kind": "draft",
    "anchor", "row" i, "selected": [d_{i+1}]}."""
    cfg = drafter.cfg
    tok = torch.as_tensor(tokens, dtype=torch.long).view(1, -1)
    n = tok.shape[1]
    dt = target.embed.weight.dtype
    with torch.no_grad():
        logits, H = target_features(target, tok, drafter.layer_ids, decisions, forced_main)
        cos, sin = rope_main(cfg, n + G, dt)
        rows = drafter.context_rows(H, cos, sin)
        anchors = torch.arange(n - 1).view(1, -1)
        x0 = tok[:, 1:]
        record = None
        if decisions is not None:
            def record(s, sel):
                for a in range(n - 1):
                    for i in range(G):
                        decisions.append({"block": "dspark", "kind": "moe", "stage": s,
                                          "anchor": a, "row": i, "selected": sel[0, a, i].tolist()})
        h, U = drafter.block(target, rows, anchors, x0, G, cos, sin, record=record)
        lam, drafts, m = drafter.chain(U, x0)
        z = drafter.confidence(h, m)
    if decisions is not None:
        for a in range(n - 1):
            for i in range(G):
                decisions.append({"block": "dspark", "kind": "draft", "anchor": a, "row": i,
                                  "selected": [int(drafts[0, a, i])]})
    return {"lambda": lam[0], "drafts": drafts[0], "z": z[0], "target_logits": logits[0]}


# ---------------------------------------------------------------------- loading

def load_target(model_dir, keep_mtp=False, dtype=torch.float32, weights=None):
    """(target, config.json dict): the frozen target from an exported directory (models/kjv-9m
    or a DSpark checkpoint), weights dequantized (checkpoint.md §4); keep_mtp: with its MTP
    layer (plain-MTP files). weights: the directory's load_dequantized(), if already read."""
    import json
    import os

    import export
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    tcfg = target_config(cfg)
    if keep_mtp:
        tcfg["num_nextn_predict_layers"] = cfg["num_nextn_predict_layers"]
        tcfg["compress_ratios"] = list(cfg["compress_ratios"])
    model = M.Model(tcfg)
    if weights is None:
        weights = export.load_dequantized(model_dir)
    load_state(model, {k: v for k, v in weights.items() if keep_mtp or not k.startswith("mtp.")})
    model.to(dtype).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, cfg


def load_state(module, weights):
    """Copies {name: array} into module's state_dict; every name must match both ways."""
    import numpy as np
    sd = module.state_dict()
    if set(sd) != set(weights):
        raise ValueError(f"tensor names differ: missing {sorted(set(sd) - set(weights))[:5]}, "
                         f"unexpected {sorted(set(weights) - set(sd))[:5]}")
    for k in sd:
        w = torch.from_numpy(np.asarray(weights[k]))
        if tuple(w.shape) != tuple(sd[k].shape):
            raise ValueError(f"{k}: shape {list(w.shape)}, expected {list(sd[k].shape)}")
        sd[k] = w.to(sd[k].dtype)
    module.load_state_dict(sd)


def load_drafter(model_dir, dtype=torch.float32):
    """(target, drafter, config.json dict) from an exported DSpark checkpoint directory."""
    import export
    weights = export.load_dequantized(model_dir)
    target, cfg = load_target(model_dir, dtype=dtype, weights=weights)
    drafter = DSpark(cfg)
    load_state(drafter, {k: v for k, v in weights.items() if k.startswith("mtp.")})
    drafter.to(dtype).eval()
    for p in drafter.parameters():
        p.requires_grad_(False)
    return target, drafter, cfg
