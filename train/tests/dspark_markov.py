"""The programmed Markov chain of shared/spec/dspark.md §6 at Level B: dspark_markov_rank = V
(512), W1 = identity, W2[v][t] = 1 iff f(t) = v for a chosen map f (so β(t) is 1 at f(t) and 0
elsewhere), confidence_head.proj of shape [1, D + V], and mtp.{NS-1}.norm.weight = 0 (so y = 0
and U = 0 exactly). For every anchor of a random sequence the drafts must be f(x0), f(f(x0)),
… and λ_i exactly the one-hot row of f(prev). A second table with two equal maxima per column
(f(t) and g(t)) must pick the lower id. Random target and drafter otherwise (fp64; the
drafter runs in full, only its result is forced by the zero norm).
Usage: dspark_markov.py [DSV4_BINARY(unused) WORKDIR(unused)]     (exit 77 without torch)
"""
import sys

try:
    import torch
except ImportError as e:
    print(f"SKIP: {e} (install python3-torch: scripts/setup.sh --train)")
    sys.exit(77)

import dspark_common as C  # noqa: E402
import dspark as DS  # noqa: E402


def program(drafter, maps):
    """W1 = I, W2[v][t] = 1 for every map f in maps with f(t) = v; final norm 0."""
    last = drafter.mtp[-1]
    V = drafter.cfg.vocab_size
    with torch.no_grad():
        last.markov_head.markov_w1.weight.copy_(torch.eye(V, dtype=torch.float64))
        w2 = torch.zeros(V, V, dtype=torch.float64)
        for f in maps:
            w2[f, torch.arange(V)] = 1.0
        last.markov_head.markov_w2.weight.copy_(w2)
        last.norm.weight.zero_()


def expect_chain(x0, step, G):
    out, prev = [], x0
    for _ in range(G):
        prev = step(prev)
        out.append(prev)
    return out


def run(target, drafter, tokens, G, step, name):
    r = DS.draft_logits(target, drafter, tokens, G)
    V = drafter.cfg.vocab_size
    ok = True
    n_bad = 0
    for a in range(len(tokens) - 1):
        want = expect_chain(tokens[a + 1], step, G)
        got = r["drafts"][a].tolist()
        prevs = [tokens[a + 1]] + want[:-1]
        lam_ok = True
        for i in range(G):
            row = r["lambda"][a, i]
            # λ_i = U_i + β_i with U = 0: exactly the column prev of W2
            lam_ok &= bool((row == drafter.mtp[-1].markov_head.markov_w2.weight[:, prevs[i]]).all())
        if got != want or not lam_ok:
            n_bad += 1
            if n_bad <= 3:
                print(f"FAIL {name} a={a}: drafts {got}, expected {want}, λ exact {lam_ok}")
            ok = False
    assert r["lambda"].shape == (len(tokens) - 1, G, V)
    print(f"{name}: G={G}, {len(tokens) - 1} anchors -> {'ok' if ok else f'FAIL ({n_bad})'}")
    return ok


def main():
    torch.set_num_threads(1)
    V = 512
    target, drafter = C.make_pair(seed=5, rank=V)
    assert tuple(drafter.mtp[-1].confidence_head.proj.weight.shape) == (1, drafter.cfg.hidden_size + V)
    g = torch.Generator().manual_seed(6)
    f = torch.randint(0, V, (V,), generator=g)
    tokens = C.random_tokens(3 * drafter.cfg.sliding_window + 6, V, 7)
    ok = True
    program(drafter, [f])
    for G in (1, 5, 7):
        ok &= run(target, drafter, tokens, G, lambda t: int(f[t]), "one map")
    # two equal maxima per column: f(t) and g(t) != f(t); the lower id must win
    g2 = (f + 1 + torch.randint(0, V - 1, (V,), generator=g)) % V
    program(drafter, [f, g2])
    ok &= run(target, drafter, tokens, 5, lambda t: min(int(f[t]), int(g2[t])), "tie -> lower id")
    print("dspark_markov: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
