"""Shared pieces of the DSpark tests: a small random target and drafter with non-trivial values
(model.md §14.2, dspark.md §5: sinks, routing biases, norms 1 + N(0, 0.1), HC bases), in fp64."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import torch  # noqa: E402

import dspark as DS  # noqa: E402
import model as M  # noqa: E402

# A small configuration of the architecture with every main layer kind (SWA, CSA, HCA, CSA)
# and a short window, so that rings wrap within a few dozen tokens.
SMALL = {"vocab_size": 512, "hidden_size": 128, "q_lora_rank": 128, "o_lora_rank": 64,
         "head_dim": 96, "qk_rope_head_dim": 32, "index_head_dim": 64, "sliding_window": 8,
         "index_topk": 4, "compress_ratios": [0, 4, 8, 4], "moe_intermediate_size": 64,
         "num_nextn_predict_layers": 0}


def small_target_cfg(**over):
    cfg = M.default_config(512)
    cfg.update(SMALL)
    cfg.update(over)
    return cfg


def perturb(module, seed):
    """Non-trivial values for the parameters that the trainer's init leaves at 0 or 1."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in module.named_parameters():
            leaf = n.split(".")[-1]
            if leaf == "attn_sink":
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64))
            elif leaf == "ape":
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.03)
            elif leaf == "weight" and p.dim() == 1:  # norms
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g, dtype=torch.float64))
            elif leaf.endswith("_base"):
                p.add_(0.5 * torch.randn(p.shape, generator=g, dtype=torch.float64))
        for n, b in module.named_buffers():
            if n.endswith("gate.bias"):
                b.copy_(torch.randn(b.shape, generator=g, dtype=torch.float64) * 0.1)


def make_pair(seed=1, n_stages=3, layer_ids=(1, 2, 3), G=5, noise=511, rank=48, **over):
    """(target, drafter) in fp64, eval mode, random weights."""
    tcfg = small_target_cfg(**over)
    target = M.Model(tcfg)
    target.init_weights(seed)
    target.double()
    perturb(target, seed + 100)
    target.eval()
    cfg = DS.dspark_config(tcfg, n_stages, layer_ids, G, noise, rank)
    drafter = DS.DSpark(cfg)
    drafter.init_weights(seed + 1)
    drafter.double()
    perturb(drafter, seed + 200)
    drafter.eval()
    return target, drafter


def random_tokens(n, V, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (n,), generator=g).tolist()


def rel_err(a, b):
    return (a - b).abs().max().item() / max(1.0, b.abs().max().item())
