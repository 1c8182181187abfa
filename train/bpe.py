"""Byte-level BPE in the tokenizer.json format of shared/spec/text.md §1: the pre-tokenizer
(three Split regexes, DeepSeek's, §1.2/§1.5), the GPT-2 byte alphabet (§1.6), BPE by merge rank
(§1.7) and the added-token split (§1.4). Plain Python plus the Debian `regex` module (for \\p{..}).
"""
import json

import regex

R1 = "\\p{N}{1,3}"
R2 = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
R3 = ("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
      " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+")
# Unicode White_Space, as the spec's \s (§1.5).
_WS = "\t\n\x0b\x0c\r\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_R3_PY = R3.replace("\\s", "[" + _WS + "]").replace("\\S", "[^" + _WS + "]")
_SPLITS = [regex.compile(R1), regex.compile(R2), regex.compile(_R3_PY)]

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
PAD = "<｜▁pad▁｜>"
# Chat markers of text.md §5.1 (ids 500..511 there; here the last 12 ids of the vocabulary).
CHAT_MARKERS = ["<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "｜DSML｜",
                "<｜latest_reminder｜>", "<｜action｜>", "<｜query｜>", "<｜authority｜>",
                "<｜domain｜>", "<｜title｜>", "<｜read_url｜>"]


def _printable(b):
    return 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF


def byte_alphabet():
    """BYTE2CHAR (list of 256 one-char strings) and the byte order of ids 3..258."""
    b2c, n = [None] * 256, 0
    for b in range(256):
        if _printable(b):
            b2c[b] = chr(b)
        else:
            b2c[b] = chr(0x100 + n)
            n += 1
    order = [b for b in range(256) if _printable(b)] + [b for b in range(256) if not _printable(b)]
    return b2c, order


BYTE2CHAR, BYTE_ORDER = byte_alphabet()
CHAR2BYTE = {c: b for b, c in enumerate(BYTE2CHAR)}


def split_isolated(pieces, rx):
    out = []
    for p in pieces:
        pos = 0
        for m in rx.finditer(p):
            if m.start() > pos:
                out.append(p[pos:m.start()])
            out.append(m.group(0))
            pos = m.end()
        if pos < len(p):
            out.append(p[pos:])
    return out


def pre_tokenize(text):
    """Pieces of a text without added tokens (§1.5), as strings of the byte alphabet."""
    pieces = [text] if text else []
    for rx in _SPLITS:
        pieces = split_isolated(pieces, rx)
    return ["".join(BYTE2CHAR[b] for b in p.encode("utf-8")) for p in pieces]


def pipeline_blocks():
    splits = [{"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": False}
              for r in (R1, R2, R3)]
    splits.append({"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                   "use_regex": False})
    return {
        "normalizer": {"type": "Sequence", "normalizers": []},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": splits},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
    }


class Tokenizer:
    """Encoder/decoder over a tokenizer.json dict written by tokenizer_train.py."""

    def __init__(self, tj):
        self.vocab = dict(tj["model"]["vocab"])
        self.merges = {}
        for r, m in enumerate(tj["model"]["merges"]):
            a, b = m.split(" ") if isinstance(m, str) else m
            self.merges[(a, b)] = r
        self.added = [(t["content"], t["id"], t["normalized"]) for t in tj["added_tokens"]]
        self.id_to_str = {i: s for s, i in self.vocab.items()}
        for c, i, _ in self.added:
            self.id_to_str[i] = c
        self.special = {t["id"] for t in tj["added_tokens"] if t["special"]}
        self._cache = {}

    @staticmethod
    def load(path):
        with open(path, encoding="utf-8") as f:
            return Tokenizer(json.load(f))

    def bpe(self, piece):
        ids = self._cache.get(piece)
        if ids is not None:
            return ids
        sym = list(piece)
        while len(sym) > 1:
            best, bi = None, -1
            for i in range(len(sym) - 1):
                r = self.merges.get((sym[i], sym[i + 1]))
                if r is not None and (best is None or r < best):
                    best, bi = r, i
            if best is None:
                break
            sym[bi:bi + 2] = [sym[bi] + sym[bi + 1]]
        ids = [self.vocab[s] for s in sym]
        self._cache[piece] = ids
        return ids

    def _split_added(self, text, tokens):
        """Leftmost-longest matches of `tokens` [(content, id)]: list of str | int."""
        out, pos, start = [], 0, 0
        while pos < len(text):
            best = None
            for c, i in tokens:
                if text.startswith(c, pos) and (best is None or len(c) > len(best[0])):
                    best = (c, i)
            if best is None:
                pos += 1
                continue
            if pos > start:
                out.append(text[start:pos])
            out.append(best[1])
            pos += len(best[0])
            start = pos
        if start < len(text):
            out.append(text[start:])
        return out

    def encode(self, text, special=True):
        segs = [text]
        if special:  # two passes (§1.4): normalized false, then true
            for norm in (False, True):
                toks = [(c, i) for c, i, n in self.added if n == norm]
                nxt = []
                for s in segs:
                    nxt.extend(self._split_added(s, toks) if isinstance(s, str) else [s])
                segs = nxt
        ids = []
        for s in segs:
            if isinstance(s, int):
                ids.append(s)
            else:
                for p in pre_tokenize(s):
                    ids.extend(self.bpe(p))
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            t = self.id_to_str[i]
            if all(c in CHAR2BYTE for c in t):
                out.extend(CHAR2BYTE[c] for c in t)
            else:
                out.extend(t.encode("utf-8"))
        return out.decode("utf-8", errors="replace")
