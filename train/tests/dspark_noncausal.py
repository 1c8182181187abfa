"""γ dependence (shared/spec/dspark.md §3.6, §6): the draft block has no causal mask, so the
corrected logits λ of rows 0..4 at G = 7 differ from those at G = 5 for every anchor (the two
extra noise rows' keys are visible to every row), and for some anchor the drafts differ too.
As a control, the same comparison with a causal mask inside the block (block_key_mask swapped
for a lower-triangular one) gives identical rows: the test would catch that mutation.
Random small target and drafter in fp64.
Usage: dspark_noncausal.py [DSV4_BINARY(unused) WORKDIR(unused)]     (exit 77 without torch)
"""
import sys

try:
    import torch
except ImportError as e:
    print(f"SKIP: {e} (install python3-torch: scripts/setup.sh --train)")
    sys.exit(77)

import dspark_common as C  # noqa: E402
import dspark as DS  # noqa: E402

MIN_DIFF = 1e-6   # per anchor, max |Δλ| over rows 0..4 must exceed this (fp64 noise ~1e-14)


def compare(target, drafter, tokens):
    r5 = DS.draft_logits(target, drafter, tokens, 5)
    r7 = DS.draft_logits(target, drafter, tokens, 7)
    d = (r7["lambda"][:, :5] - r5["lambda"]).abs().amax((1, 2))                    # [n-1]
    drafts_differ = (r7["drafts"][:, :5] != r5["drafts"]).any(1)
    return d, drafts_differ


def main():
    torch.set_num_threads(1)
    target, drafter = C.make_pair(seed=9)
    tokens = C.random_tokens(3 * drafter.cfg.sliding_window + 6, drafter.cfg.vocab_size, 10)
    ok = True
    d, dd = compare(target, drafter, tokens)
    print(f"non-causal: max |λ(G=7) - λ(G=5)| over rows 0..4 per anchor: min {d.min():.3e}, "
          f"max {d.max():.3e}; drafts differ at {int(dd.sum())} of {len(d)} anchors")
    if not bool((d > MIN_DIFF).all()):
        print(f"FAIL: λ rows 0..4 equal at G = 5 and 7 for anchors {(d <= MIN_DIFF).nonzero().flatten().tolist()}")
        ok = False
    if not bool(dd.any()):
        print("FAIL: the drafts never differ between G = 5 and G = 7")
        ok = False
    real = DS.block_key_mask
    DS.block_key_mask = lambda G, device=None: torch.tril(torch.ones(G, G, dtype=torch.bool, device=device))
    try:
        dc, ddc = compare(target, drafter, tokens)
    finally:
        DS.block_key_mask = real
    print(f"control (causal mask in the block): max |Δλ| {dc.max():.3e}, drafts differ at "
          f"{int(ddc.sum())} anchors")
    if not (dc.max() < 1e-12 and not bool(ddc.any())):
        print("FAIL: with a causal mask rows 0..4 should not depend on G")
        ok = False
    print("dspark_noncausal: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
