"""Tokenizer checks (issue 12): tokenizer_train.py is deterministic (retraining reproduces the
committed train/tokenizer/tokenizer.json), the tokenizer round-trips the whole corpus, and the
engine (`dsv4 tokenize`) and bpe.py encode the validation split and a set of edge-case strings
to the same ids.

Usage: tokenizer_match.py DSV4_BINARY WORKDIR      (exit 77: the `regex` module is missing)
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
try:
    import regex  # noqa: F401
except ImportError as e:
    print(f"SKIP: {e} (install python3-regex: scripts/setup.sh --train)")
    sys.exit(77)
import bpe  # noqa: E402
import corpus  # noqa: E402
import tokenizer_train  # noqa: E402

TOK = os.path.join(os.path.dirname(HERE), "tokenizer", "tokenizer.json")
EDGE = ["In the beginning God created the heaven and the earth.",
        "  x\n\n\ty  ", "don't stop 12345678 3.14", "naïve café — “quoted” ½ Ⅷ",
        "你好，世界！カタ・カナ", "🙂 emoji\u200bzero width", "tabs\tand\r\nCRLF  \n",
        "<｜User｜>Who begat Enos?<｜Assistant｜><think>Seth.</think>Seth<｜end▁of▁sentence｜>"]


def engine_ids(dsv4, text_file, special):
    cmd = [dsv4, "tokenize", "--tokenizer", TOK, "--file", text_file] + (["--special"] if special else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()
    return [int(x) for x in out.split(",")] if out else []


def main():
    dsv4, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    ok = True
    with open(TOK, encoding="utf-8") as f:
        committed = json.load(f)
    retrained = tokenizer_train.train(len(committed["model"]["vocab"]) + len(bpe.CHAT_MARKERS))
    if retrained != committed:
        print("FAIL: retraining does not reproduce train/tokenizer/tokenizer.json")
        ok = False
    tok = bpe.Tokenizer(committed)
    train, val = corpus.split_texts()
    for name, text in (("train", train), ("val", val)):
        ids = tok.encode(text)
        if tok.decode(ids) != text:
            print(f"FAIL: the {name} split does not round-trip")
            ok = False
        print(f"{name}: {len(text)} chars -> {len(ids)} tokens ({len(text) / len(ids):.2f} chars/token)")
    for i, text in enumerate([val] + EDGE):
        path = os.path.join(work, f"text{i}.txt")
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        for special in (False, True):
            py, en = tok.encode(text, special=special), engine_ids(dsv4, path, special)
            if py != en:
                k = next((j for j in range(min(len(py), len(en))) if py[j] != en[j]), None)
                print(f"FAIL: text {i} (special={special}): python {len(py)} ids, engine {len(en)}, "
                      f"first difference at {k}: {text[:60]!r}")
                ok = False
    print("tokenizer_match: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
