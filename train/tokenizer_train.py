"""Trains the byte-level BPE tokenizer on the KJV training split (deterministic) and writes
tokenizer.json + tokenizer_config.json (text.md §1, §2; id layout like §5.1 scaled to the vocab):

  0, 1, 2          BOS, EOS, pad (added tokens, special, also in model.vocab)
  3 .. 258         the 256 byte symbols in the §1.6 order
  259 .. V-13      merges; the merge of rank r creates id 259 + r
  V-12 .. V-1      the chat markers of §5.1 (added tokens, not special, normalized)

Merges: count identical pre-tokenized pieces once (word frequencies), then repeatedly merge the
most frequent adjacent pair weighted by piece counts, ties to the smaller (id(left), id(right));
a pair whose concatenation already is a token is never merged. Incremental pair counts with a
lazy max-heap keep it to seconds.

Usage: /usr/bin/python3 train/tokenizer_train.py --out DIR [--vocab 4096]
"""
import argparse
import collections
import heapq
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import corpus  # noqa: E402


def train_merges(piece_counts, n_merges, symbol_of):
    """piece_counts: {piece string: count}; symbol_of: list id -> symbol (ids 0..258)."""
    sid = {s: i for i, s in enumerate(symbol_of)}
    words = [[sid[c] for c in p] for p in sorted(piece_counts)]
    counts = [piece_counts[p] for p in sorted(piece_counts)]
    pair_count = collections.defaultdict(int)
    where = collections.defaultdict(set)
    for w, (ids, c) in enumerate(zip(words, counts)):
        for a, b in zip(ids, ids[1:]):
            pair_count[(a, b)] += c
            where[(a, b)].add(w)
    heap = [(-c, a, b) for (a, b), c in pair_count.items()]
    heapq.heapify(heap)
    strings = set(symbol_of)
    merges, banned = [], set()
    while len(merges) < n_merges:
        if not heap:
            raise SystemExit(f"tokenizer: the corpus yields only {len(merges)} merges")
        negc, a, b = heapq.heappop(heap)
        if pair_count.get((a, b), 0) != -negc or (a, b) in banned:
            continue
        if -negc < 2:
            raise SystemExit(f"tokenizer: the corpus yields only {len(merges)} merges")
        merged = symbol_of[a] + symbol_of[b]
        if merged in strings:
            banned.add((a, b))
            continue
        new_id = len(symbol_of)
        symbol_of.append(merged)
        strings.add(merged)
        merges.append((symbol_of[a], symbol_of[b]))
        changed = set()
        for w in sorted(where.pop((a, b), ())):
            ids, c = words[w], counts[w]
            for x, y in zip(ids, ids[1:]):
                pair_count[(x, y)] -= c
                changed.add((x, y))
            out, k = [], 0
            while k < len(ids):
                if k + 1 < len(ids) and ids[k] == a and ids[k + 1] == b:
                    out.append(new_id)
                    k += 2
                else:
                    out.append(ids[k])
                    k += 1
            words[w] = out
            for x, y in zip(out, out[1:]):
                pair_count[(x, y)] += c
                where[(x, y)].add(w)
                changed.add((x, y))
        pair_count.pop((a, b), None)
        for p in changed:
            c = pair_count.get(p, 0)
            if c > 0:
                heapq.heappush(heap, (-c, p[0], p[1]))
            else:
                pair_count.pop(p, None)
    return merges


def tokenizer_json(symbol_of, merges, vocab_size):
    n_base = len(symbol_of)
    added = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True}
             for i, c in enumerate([bpe.BOS, bpe.EOS, bpe.PAD])]
    for k, c in enumerate(bpe.CHAT_MARKERS):
        added.append({"id": vocab_size - len(bpe.CHAT_MARKERS) + k, "content": c,
                      "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": True, "special": False})
    assert n_base == vocab_size - len(bpe.CHAT_MARKERS)
    j = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added}
    j.update(bpe.pipeline_blocks())
    j["model"] = {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False,
                  "vocab": {s: i for i, s in enumerate(symbol_of)},
                  "merges": [f"{l} {r}" for l, r in merges]}
    return j


def tokenizer_config(max_len):
    def tok(c):
        return {"__type": "AddedToken", "content": c, "lstrip": False, "normalized": True,
                "rstrip": False, "single_word": False}
    return {"add_bos_token": False, "add_eos_token": False, "bos_token": tok(bpe.BOS),
            "clean_up_tokenization_spaces": False, "eos_token": tok(bpe.EOS), "legacy": True,
            "model_max_length": max_len, "pad_token": tok(bpe.EOS), "sp_model_kwargs": {},
            "unk_token": None, "tokenizer_class": "PreTrainedTokenizerFast"}


def train(vocab_size=4096, text=None):
    if text is None:
        text, _ = corpus.split_texts()
    symbol_of = [bpe.BOS, bpe.EOS, bpe.PAD] + [bpe.BYTE2CHAR[b] for b in bpe.BYTE_ORDER]
    piece_counts = collections.Counter(bpe.pre_tokenize(text))
    n_merges = vocab_size - len(symbol_of) - len(bpe.CHAT_MARKERS)
    merges = train_merges(piece_counts, n_merges, symbol_of)
    return tokenizer_json(symbol_of, merges, vocab_size)


def write(out_dir, tj, max_len):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(max_len), f, ensure_ascii=False, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--max-len", type=int, default=4096, help="model_max_length")
    a = ap.parse_args()
    t0 = time.time()
    tj = train(a.vocab)
    write(a.out, tj, a.max_len)
    print(f"tokenizer: {a.vocab} ids, {len(tj['model']['merges'])} merges -> {a.out} "
          f"({time.time() - t0:.1f} s)")


if __name__ == "__main__":
    main()
