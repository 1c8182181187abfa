"""DeepSeek-V4 architecture at small size, Level-B (plain float) math of shared/spec/model.md,
the same computation as the engine's src/oracle/float_forward.cc:

  X = embed[t] on every one of N hyper-connection streams                       (§3.1)
  per block: HcPre -> RMSNorm -> Attention -> HcPost; HcPre -> RMSNorm -> MoE -> HcPost (§2.2, §5)
  Attention: low-rank q + per-head RMS + RoPE, one shared K=V head, a sliding window of W keys,
    plus compressed entries: none (SWA, ratio 0), all visible (HCA), or the lightning indexer's
    top-k (CSA, ratio 4, overlapping compressor); attention sink; de-rotation; grouped wo_a, wo_b
  MoE: sqrtsoftplus router, hash-routed (tid2eid) or score-routed (top-k of s + bias), shared
    expert, SwiGLU with clamp                                                   (§9)
  logits = head(RMSNorm(HcHead(X)))                                             (§5.3, §10)
  MTP (§11): Z_k = e_proj(RMSNorm(embed[t_{p+1}])) + h_proj(RMSNorm(Xfinal_p[k])), one SWA block,
    its own HcHead and norm, the shared head: row p predicts t_{p+2}.

Parameter names are the checkpoint's tensor names (checkpoint.md §5), so state_dict() is the
export table. Shapes: B batch, T tokens, N hc_mult, D hidden, H heads, Dh head_dim, E experts.
The indexer's top-k is not differentiable: the indexer is trained by a KL loss toward the main
attention's distribution over the visible compressed entries (detached inputs), see README.md.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CSA_RATIO = 4


# ------------------------------------------------------------------------------ config

def default_config(vocab_size=4096):
    """The built-in model's config.json fields (checkpoint.md §2)."""
    return {
        "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
        "attention_bias": False, "attention_dropout": 0.0, "initializer_range": 0.02,
        "transformers_version": "4.57.1", "use_cache": True,
        "vocab_size": vocab_size, "hidden_size": 256, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 128,
        "qk_rope_head_dim": 64, "q_lora_rank": 256, "o_lora_rank": 128, "o_groups": 2,
        "sliding_window": 64, "moe_intermediate_size": 128, "n_routed_experts": 8,
        "n_shared_experts": 1, "num_experts_per_tok": 2, "num_hash_layers": 1,
        "routed_scaling_factor": 1.5, "scoring_func": "sqrtsoftplus", "norm_topk_prob": True,
        "topk_method": "noaux_tc", "swiglu_limit": 10.0, "hc_mult": 4, "hc_sinkhorn_iters": 20,
        "hc_eps": 1e-6, "rms_norm_eps": 1e-6, "index_n_heads": 2, "index_head_dim": 128,
        "index_topk": 16, "rope_theta": 10000, "compress_rope_theta": 160000,
        "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536,
                         "beta_fast": 32, "beta_slow": 1},
        "compress_ratios": [0, 4, 16, 4, 0], "max_position_embeddings": 4096,
        "num_nextn_predict_layers": 1, "bos_token_id": 0, "eos_token_id": 1,
        "tie_word_embeddings": False, "hidden_act": "silu", "torch_dtype": "bfloat16",
    }


class Cfg:
    def __init__(self, d):
        self.d = dict(d)
        for k, v in d.items():
            setattr(self, k, v)
        self.hc_mix = (2 + self.hc_mult) * self.hc_mult
        self.n_layers_total = self.num_hidden_layers + self.num_nextn_predict_layers

    def is_hash_layer(self, l):
        return l < self.num_hash_layers


# -------------------------------------------------------------------------------- RoPE

def rope_table(cfg, compress, n_pos):
    """cos, sin [n_pos, Dr/2] exactly as float_forward.cc's make_rope_table (model.md §4.1):
    inv[i] formed in double and rounded to fp32, angle = fp32(p)·inv[i] in fp32."""
    dr = cfg.qk_rope_head_dim
    half = dr // 2
    theta = float(cfg.compress_rope_theta if compress else cfg.rope_theta)
    inv = []
    if compress:
        ys = cfg.rope_scaling

        def c(beta):
            return dr * math.log(ys["original_max_position_embeddings"] / (2 * math.pi * beta)) / \
                (2 * math.log(theta))
        lo = max(math.floor(c(ys["beta_fast"])), 0.0)
        hi = min(math.ceil(c(ys["beta_slow"])), dr - 1.0)
        if lo == hi:
            hi += 0.001
    for i in range(half):
        f = 1.0 / math.pow(theta, 2.0 * i / dr)
        if compress:
            ramp = min(max((i - lo) / (hi - lo), 0.0), 1.0)
            f = f / ys["factor"] * ramp + f * (1.0 - ramp)
        inv.append(f)
    inv = np.array(inv, dtype=np.float32)
    ang = np.arange(n_pos, dtype=np.float32)[:, None] * inv[None, :]  # fp32 product
    cos = np.cos(ang.astype(np.float64)).astype(np.float32)
    sin = np.sin(ang.astype(np.float64)).astype(np.float32)
    return torch.from_numpy(cos), torch.from_numpy(sin)


def rope(x, cos, sin, inverse=False):
    """Rotates adjacent pairs of the last Dr dims of x (model.md §4.2); cos/sin broadcast
    against x[..., :Dr/2]."""
    dr = cos.shape[-1] * 2
    r = x[..., -dr:]
    a, b = r[..., 0::2], r[..., 1::2]
    if inverse:
        sin = -sin
    rot = torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)
    return torch.cat([x[..., :-dr], rot], -1)


def rms(x, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return self.weight * rms(x, self.eps)


def lin(o, i):
    return nn.Linear(i, o, bias=False)


# -------------------------------------------------------------------- hyper-connections

def hc_pre(cfg, fn, base, scale, X):
    """HcPre (§5.1). X [B,T,N,D] -> y [B,T,D], post [B,T,N], comb [B,T,N,N] (source j, dest k)."""
    N = cfg.hc_mult
    heps = cfg.hc_eps
    xf = X.flatten(-2)
    m = (xf @ fn.t()) * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + cfg.rms_norm_eps)
    pre = torch.sigmoid(m[..., :N] * scale[0] + base[:N]) + heps
    post = 2.0 * torch.sigmoid(m[..., N:2 * N] * scale[1] + base[N:2 * N])
    C = (m[..., 2 * N:] * scale[2] + base[2 * N:]).unflatten(-1, (N, N))
    C = torch.softmax(C, -1) + heps
    C = C / (C.sum(-2, keepdim=True) + heps)
    for _ in range(1, cfg.hc_sinkhorn_iters):
        C = C / (C.sum(-1, keepdim=True) + heps)
        C = C / (C.sum(-2, keepdim=True) + heps)
    y = (pre.unsqueeze(-1) * X).sum(-2)
    return y, post, C


def hc_post(f, post, C, X):
    """HcPost (§5.2): X'_k = post_k·f + Σ_j C[j][k]·X_j."""
    # Broadcast multiply-add: a batched 4x4 matmul is far slower on CPU.
    return post.unsqueeze(-1) * f.unsqueeze(-2) + (C.unsqueeze(-1) * X.unsqueeze(-2)).sum(-3)


def hc_head(cfg, fn, base, scale, X):
    """HcHead (§5.3): y = Σ_k pre_k·X_k."""
    xf = X.flatten(-2)
    m = (xf @ fn.t()) * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + cfg.rms_norm_eps)
    pre = torch.sigmoid(m * scale[0] + base) + cfg.hc_eps
    return (pre.unsqueeze(-1) * X).sum(-2)


class HcParams(nn.Module):
    pass


# ---------------------------------------------------------------------------- attention

class Compressor(nn.Module):
    """Compressed entries (§7): per channel a softmax over the block's gate logits pools the
    values; ratio 4 overlaps with the previous block's first-half columns."""

    def __init__(self, cfg, ratio, dim):
        super().__init__()
        self.ratio, self.dim = ratio, dim
        width = (2 if ratio == CSA_RATIO else 1) * dim
        self.wkv = lin(width, cfg.hidden_size)
        self.wgate = lin(width, cfg.hidden_size)
        self.ape = nn.Parameter(torch.zeros(ratio, width))
        self.norm = RMSNorm(dim, cfg.rms_norm_eps)

    def forward(self, a, cos, sin):
        """a [B,T,D] -> [B, T//r, dim] (rotated at position i·r)."""
        B, T, _ = a.shape
        r, dim = self.ratio, self.dim
        nb = T // r
        if nb == 0:  # fewer than r positions: no complete block yet
            return a.new_zeros(B, 0, dim)
        A = self.wkv(a[:, :nb * r]).unflatten(1, (nb, r))            # [B,nb,r,width]
        G = self.wgate(a[:, :nb * r]).unflatten(1, (nb, r)) + self.ape
        if r == CSA_RATIO:
            pv = F.pad(A[:, :-1, :, :dim], (0, 0, 0, 0, 1, 0))
            pl = F.pad(G[:, :-1, :, :dim], (0, 0, 0, 0, 1, 0), value=-math.inf)
            A = torch.cat([pv, A[..., dim:]], 2)                       # [B,nb,2r,dim]
            G = torch.cat([pl, G[..., dim:]], 2)
        P = (torch.softmax(G, 2) * A).sum(2)                          # [B,nb,dim]
        E = self.norm(P)
        return rope(E, cos[0:nb * r:r], sin[0:nb * r:r])


class Indexer(nn.Module):
    """Lightning indexer (§8): score_i = Σ_h σi·ω_h·relu(qi_h·J_i) over visible entries."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wq_b = lin(cfg.index_n_heads * cfg.index_head_dim, cfg.q_lora_rank)
        self.weights_proj = lin(cfg.index_n_heads, cfg.hidden_size)
        self.compressor = Compressor(cfg, CSA_RATIO, cfg.index_head_dim)

    def forward(self, a, qr, cos, sin):
        """-> scores [B,T,Nc] with invisible entries at -inf."""
        cfg = self.cfg
        Hi, Di = cfg.index_n_heads, cfg.index_head_dim
        B, T, _ = a.shape
        J = self.compressor(a, cos, sin)                                          # [B,Nc,Di]
        qi = rope(self.wq_b(qr).unflatten(-1, (Hi, Di)), cos[:T, None], sin[:T, None])
        omega = self.weights_proj(a)                                              # [B,T,Hi]
        sigma = 1.0 / math.sqrt(Di) / math.sqrt(Hi)
        d = torch.relu(torch.einsum("bthd,bcd->bthc", qi, J))
        s = torch.einsum("bth,bthc->btc", omega * sigma, d)
        return s.masked_fill(~visible_mask(T, J.shape[1], CSA_RATIO, a.device), -math.inf)


def visible_mask(T, Nc, r, device):
    """[T, Nc]: entry i is visible at p when i < (p+1)//r."""
    p = torch.arange(T, device=device)[:, None]
    return torch.arange(Nc, device=device)[None, :] < (p + 1) // r


class Attention(nn.Module):
    def __init__(self, cfg, ratio):
        super().__init__()
        self.cfg, self.ratio = cfg, ratio
        D, H, Dh = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim
        self.attn_sink = nn.Parameter(torch.zeros(H))
        self.wq_a = lin(cfg.q_lora_rank, D)
        self.q_norm = RMSNorm(cfg.q_lora_rank, cfg.rms_norm_eps)
        self.wq_b = lin(H * Dh, cfg.q_lora_rank)
        self.wkv = lin(Dh, D)
        self.kv_norm = RMSNorm(Dh, cfg.rms_norm_eps)
        G = cfg.o_groups
        self.wo_a = lin(G * cfg.o_lora_rank, H * Dh // G)
        self.wo_b = lin(D, G * cfg.o_lora_rank)
        if ratio:
            self.compressor = Compressor(cfg, ratio, Dh)
        if ratio == CSA_RATIO:
            self.indexer = Indexer(cfg)

    def forward(self, a, cos, sin, ctx):
        cfg = self.cfg
        B, T, _ = a.shape
        H, Dh, W, G = cfg.num_attention_heads, cfg.head_dim, cfg.sliding_window, cfg.o_groups
        eps = cfg.rms_norm_eps
        cT, sT = cos[:T], sin[:T]
        qr = self.q_norm(self.wq_a(a))                                            # [B,T,Rq]
        q = rope(rms(self.wq_b(qr).unflatten(-1, (H, Dh)), eps), cT[:, None], sT[:, None])
        kv = rope(self.kv_norm(self.wkv(a)), cT, sT)                              # [B,T,Dh]
        scale = 1.0 / math.sqrt(Dh)
        t = torch.arange(T, device=a.device)
        win = (t[None, :] <= t[:, None]) & (t[None, :] > t[:, None] - W)          # [T,T]
        logits = torch.einsum("bthd,bsd->bhts", q, kv) * scale
        logits = logits.masked_fill(~win, -math.inf)
        keys = kv
        if self.ratio:
            cmp = self.compressor(a, cos, sin)                                    # [B,Nc,Dh]
            Nc = cmp.shape[1]
            lc = torch.einsum("bthd,bcd->bhtc", q, cmp) * scale
            vis = visible_mask(T, Nc, self.ratio, a.device)
            if self.ratio == CSA_RATIO:
                sel = self.select(a, qr, cos, sin, lc, vis, ctx)                  # [B,T,Nc]
                lc = lc.masked_fill(~sel[:, None], -math.inf)
            else:
                lc = lc.masked_fill(~vis, -math.inf)
            logits = torch.cat([logits, lc], -1)
            keys = torch.cat([kv, cmp], 1)
        sink = self.attn_sink.view(1, H, 1, 1).expand(B, H, T, 1)
        p = torch.softmax(torch.cat([logits, sink], -1), -1)[..., :-1]
        o = torch.einsum("bhts,bsd->bthd", p, keys)
        o = rope(o, cT[:, None], sT[:, None], inverse=True)                       # [B,T,H,Dh]
        wa = self.wo_a.weight.unflatten(0, (G, cfg.o_lora_rank))                  # [G,Ro,H·Dh/G]
        u = torch.einsum("btgi,goi->btgo", o.reshape(B, T, G, H * Dh // G), wa)
        return self.wo_b(u.flatten(-2))

    def select(self, a, qr, cos, sin, lc, vis, ctx):
        """Indexer top-k (§8) as a mask [B,T,Nc]; records decisions and the indexer loss."""
        cfg = self.cfg
        B, T, Nc = lc.shape[0], lc.shape[2], lc.shape[3]
        score = self.indexer(a.detach(), qr.detach(), cos, sin)                   # [B,T,Nc]
        k = min(cfg.index_topk, Nc)
        sel = torch.zeros(B, T, Nc, dtype=torch.bool, device=a.device)
        if k > 0:
            top = torch.topk(score.detach(), k, -1).indices                       # descending
            forced = ctx.get("forced_idx")
            if forced is not None:
                top = forced[(ctx["mtp"], ctx["layer"])]
            sel.scatter_(-1, top, True)
            sel &= vis
            if ctx.get("decisions") is not None:
                n_vis = vis.sum(-1)
                for b in range(B):
                    for p in range(T):
                        ctx["decisions"].append({
                            "block": "mtp" if ctx["mtp"] else "main", "kind": "idx",
                            "layer": ctx["layer"], "pos": p,
                            "selected": top[b, p, :min(k, int(n_vis[p]))].tolist()})
        if self.training and Nc > 0:
            # Distillation target: the main heads' attention over all visible entries, averaged
            # over heads (detached); the indexer's distribution: softmax of its scores.
            rows = vis.any(-1)                                                    # [T]
            tgt = torch.softmax(lc.detach().masked_fill(~vis, -math.inf)[:, :, rows], -1).mean(1)
            logq = torch.log_softmax(score[:, rows], -1)
            kl = (tgt * (torch.log(tgt.clamp_min(1e-30)) - logq.masked_fill(~vis[rows], 0))).sum(-1)
            ctx["indexer_losses"].append(kl.mean())
        return sel


# ---------------------------------------------------------------------------------- MoE

class Expert(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.w1 = lin(cfg.moe_intermediate_size, cfg.hidden_size)
        self.w2 = lin(cfg.hidden_size, cfg.moe_intermediate_size)
        self.w3 = lin(cfg.moe_intermediate_size, cfg.hidden_size)
        self.limit = cfg.swiglu_limit

    def forward(self, x, weight=None):
        g, u = self.w1(x), self.w3(x)
        if self.limit > 0:
            g = g.clamp(max=self.limit)
            u = u.clamp(-self.limit, self.limit)
        h = F.silu(g) * u
        if weight is not None:
            h = h * weight.unsqueeze(-1)
        return self.w2(h)


class Gate(nn.Module):
    def __init__(self, cfg, hash_layer):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(cfg.n_routed_experts, cfg.hidden_size))
        if hash_layer:
            self.register_buffer("tid2eid", torch.zeros(cfg.vocab_size, cfg.num_experts_per_tok,
                                                        dtype=torch.int64))
        else:
            self.register_buffer("bias", torch.zeros(cfg.n_routed_experts))


class MoE(nn.Module):
    def __init__(self, cfg, hash_layer):
        super().__init__()
        self.cfg, self.hash = cfg, hash_layer
        self.gate = Gate(cfg, hash_layer)
        self.experts = nn.ModuleList(Expert(cfg) for _ in range(cfg.n_routed_experts))
        self.shared_experts = Expert(cfg)
        self.load = None  # expert load of the last training forward (bias balancing)

    def forward(self, f, tok, ctx):
        cfg = self.cfg
        B, T, D = f.shape
        E, K = cfg.n_routed_experts, cfg.num_experts_per_tok
        x = f.reshape(-1, D)
        s = torch.sqrt(F.softplus(x @ self.gate.weight.t()))                     # [R,E]
        if self.hash:
            sel = self.gate.tid2eid[tok.reshape(-1)]
        else:
            sel = torch.topk((s + self.gate.bias).detach(), K, -1).indices
            forced = ctx.get("forced_moe")
            if forced is not None:
                sel = forced[(ctx["mtp"], ctx["layer"])].reshape(-1, K)
            if ctx.get("decisions") is not None:
                for r in range(sel.shape[0]):
                    ctx["decisions"].append({"block": "mtp" if ctx["mtp"] else "main",
                                             "kind": "moe", "layer": ctx["layer"],
                                             "pos": r % T, "selected": sel[r].tolist()})
            if self.training:
                self.load = torch.bincount(sel.reshape(-1), minlength=E).float()
        denom = torch.gather(s, 1, sel).sum(-1, keepdim=True)
        wgt = s / denom * cfg.routed_scaling_factor                               # [R,E]
        chosen = torch.zeros_like(s, dtype=torch.bool).scatter_(1, sel, True)
        y = torch.zeros_like(x)
        for e in range(E):
            rows = chosen[:, e].nonzero().squeeze(-1)
            if rows.numel():
                y = y.index_add(0, rows, self.experts[e](x[rows], wgt[rows, e]))
        y = y + self.shared_experts(x)
        return y.view(B, T, D)


# ------------------------------------------------------------------------------- blocks

class Block(nn.Module):
    def __init__(self, cfg, l):
        super().__init__()
        self.cfg, self.ratio = cfg, cfg.compress_ratios[l]
        mtp = l >= cfg.num_hidden_layers
        M, ND = cfg.hc_mix, cfg.hc_mult * cfg.hidden_size
        self.attn_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.ffn_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        for w in ("attn", "ffn"):
            setattr(self, f"hc_{w}_fn", nn.Parameter(torch.zeros(M, ND)))
            setattr(self, f"hc_{w}_base", nn.Parameter(torch.zeros(M)))
            setattr(self, f"hc_{w}_scale", nn.Parameter(torch.zeros(3)))
        self.attn = Attention(cfg, self.ratio)
        self.ffn = MoE(cfg, (not mtp) and cfg.is_hash_layer(l))

    def forward(self, X, tok, ropes, ctx):
        cos, sin = ropes[self.ratio != 0]
        y, post, C = hc_pre(self.cfg, self.hc_attn_fn, self.hc_attn_base, self.hc_attn_scale, X)
        X = hc_post(self.attn(self.attn_norm(y), cos, sin, ctx), post, C, X)
        y, post, C = hc_pre(self.cfg, self.hc_ffn_fn, self.hc_ffn_base, self.hc_ffn_scale, X)
        return hc_post(self.ffn(self.ffn_norm(y), tok, ctx), post, C, X)


def add_hc_head(mod, cfg):
    mod.hc_head_fn = nn.Parameter(torch.zeros(cfg.hc_mult, cfg.hc_mult * cfg.hidden_size))
    mod.hc_head_base = nn.Parameter(torch.zeros(cfg.hc_mult))
    mod.hc_head_scale = nn.Parameter(torch.zeros(1))


class MtpBlock(Block):
    def __init__(self, cfg, l):
        super().__init__(cfg, l)
        D = cfg.hidden_size
        self.e_proj = lin(D, D)
        self.h_proj = lin(D, D)
        self.enorm = RMSNorm(D, cfg.rms_norm_eps)
        self.hnorm = RMSNorm(D, cfg.rms_norm_eps)
        self.norm = RMSNorm(D, cfg.rms_norm_eps)
        add_hc_head(self, cfg)


class Embed(nn.Module):
    def __init__(self, V, D):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(V, D))


def init_parameter(name, p, g, out_scale, N, M):
    """One parameter of a block or head, in place (under torch.no_grad): linears N(0, 1/fan_in),
    wo_b and w2 scaled by out_scale; HC fn N(0, 1/(N·D)), scales 0.1, bases 0 with the comb base
    (M rows) +4 on the diagonal; norms 1; everything else (sinks, ape) 0. Draws from g."""
    leaf = name.split(".")[-1]
    if p.dim() == 2 and leaf == "weight":
        std = 1.0 / math.sqrt(p.shape[1])
        if ".wo_b." in name or ".w2." in name:
            std *= out_scale
        p.copy_(torch.randn(p.shape, generator=g) * std)
    elif leaf.endswith("_fn"):
        p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))
    elif leaf.endswith("_scale"):
        p.fill_(0.1)
    elif leaf.endswith("_base"):
        p.zero_()
        if p.shape[0] == M:
            p[2 * N:].view(N, N).diagonal().fill_(4.0)
    elif leaf == "weight":  # norms
        p.fill_(1.0)
    else:  # attn_sink, ape
        p.zero_()


class Model(nn.Module):
    def __init__(self, cfg_dict):
        super().__init__()
        cfg = self.cfg = Cfg(cfg_dict)
        self.embed = Embed(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Block(cfg, l) for l in range(cfg.num_hidden_layers))
        self.mtp = nn.ModuleList(MtpBlock(cfg, cfg.num_hidden_layers + i)
                                 for i in range(cfg.num_nextn_predict_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.head = lin(cfg.vocab_size, cfg.hidden_size)
        add_hc_head(self, cfg)
        self._ropes = {}

    # ------------------------------------------------------------------ initialization
    def init_weights(self, seed):
        """Deterministic init: linears N(0, 1/fan_in), output projections (wo_b, w2) scaled by
        1/sqrt(2·blocks); embed N(0, 1); HC: fn N(0, 1/(N·D)), scales 0.1, pre/post bases 0,
        comb base +4 on the diagonal (near-identity stream mixing); tid2eid random, distinct."""
        cfg = self.cfg
        g = torch.Generator().manual_seed(seed)
        out_scale = 1.0 / math.sqrt(2 * cfg.n_layers_total)
        N, M = cfg.hc_mult, cfg.hc_mix
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name == "embed.weight":
                    p.copy_(torch.randn(p.shape, generator=g))
                else:
                    init_parameter(name, p, g, out_scale, N, M)
            for m in self.modules():
                if isinstance(m, Gate) and hasattr(m, "tid2eid"):
                    V, K = m.tid2eid.shape
                    m.tid2eid.copy_(torch.stack([torch.randperm(cfg.n_routed_experts,
                                                                generator=g)[:K]
                                                 for _ in range(V)]))

    # ------------------------------------------------------------------------- forward
    def ropes(self, T, device, dtype):
        key = (T, str(device), dtype)
        if key not in self._ropes:
            self._ropes[key] = {c: tuple(t.to(device, dtype) for t in rope_table(self.cfg, c, T))
                                for c in (False, True)}
        return self._ropes[key]

    def logits_of(self, hc, norm, X):
        y = norm(hc_head(self.cfg, hc.hc_head_fn, hc.hc_head_base, hc.hc_head_scale, X))
        return self.head(y)

    def forward(self, tok, mtp=True, decisions=None, forced=None, stacks=None):
        """tok [B,T] -> (logits [B,T,V], mtp_logits [B,T-1,V] or None, indexer loss).
        decisions: a list to append the engine's decision JSON entries to (B must be 1);
        forced: {"idx"|"moe": {(mtp, layer): LongTensor}} to replay decisions;
        stacks: a list that receives the HC stack X_l [B,T,N,D] after every main block
        l = 0..L-1 (X_{L-1} = Xfinal), the DSpark drafter's target features (dspark.md §2)."""
        cfg = self.cfg
        B, T = tok.shape
        dt = self.embed.weight.dtype
        ropes = self.ropes(T, tok.device, dt)
        ctx = {"decisions": decisions, "indexer_losses": [], "mtp": False,
               "forced_idx": None if forced is None else forced.get("idx"),
               "forced_moe": None if forced is None else forced.get("moe")}
        X = self.embed.weight[tok].unsqueeze(2).expand(B, T, cfg.hc_mult, cfg.hidden_size)
        for l, blk in enumerate(self.layers):
            ctx["layer"] = l
            X = blk(X, tok, ropes, ctx)
            if stacks is not None:
                stacks.append(X)
        logits = self.logits_of(self, self.norm, X)
        mtp_logits = None
        if mtp and len(self.mtp) and T > 1:
            m = self.mtp[0]
            nxt = tok[:, 1:]
            e = m.e_proj(m.enorm(self.embed.weight[nxt]))                         # [B,T-1,D]
            Z = e.unsqueeze(2) + m.h_proj(m.hnorm(X[:, :-1]))                     # [B,T-1,N,D]
            ctx["layer"], ctx["mtp"] = 0, True
            Z = m(Z, nxt, self.ropes(T - 1, tok.device, dt), ctx)
            mtp_logits = self.logits_of(m, m.norm, Z)
        il = torch.stack(ctx["indexer_losses"]).mean() if ctx["indexer_losses"] else None
        return logits, mtp_logits, il

    def balance_experts(self, gamma):
        """Aux-loss-free balancing (DeepSeek-V3): bias_e += γ·sign(mean load − load_e)."""
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, MoE) and not m.hash and m.load is not None:
                    m.gate.bias += gamma * torch.sign(m.load.mean() - m.load)
                    m.load = None


def n_params(model):
    """(total, active per token) counted as stored weights (tid2eid excluded)."""
    cfg = model.cfg
    total = sum(p.numel() for p in model.parameters())
    expert = sum(p.numel() for p in model.layers[0].ffn.experts[0].parameters())
    n_blocks = cfg.num_hidden_layers + len(model.mtp)
    active = total - n_blocks * (cfg.n_routed_experts - cfg.num_experts_per_tok) * expert
    return total, active
