"""Writes a trainer checkpoint in the released format (shared/spec/checkpoint.md):

  --quant fp8   FP8 e4m3 linears with ue8m0 128x128 block scales (§4.1), routed experts packed
                FP4 e2m1 with per-32 ue8m0 scales (§3.4, §4.2), config.json with
                quantization_config and expert_dtype "fp4" (§2, §5.7)
  --quant none  the BF16 variant (§5.7)

plus generation_config.json, tokenizer.json and tokenizer_config.json. BF16 everywhere else
(embed, head, norms, compressor and gate projections, weights_proj), F32 for the HC parameters,
attn_sink, ape and gate.bias, I64 tid2eid. Safetensors is written in plain Python (header JSON +
raw little-endian bytes). load_dequantized() reads such a directory back as fp64 arrays.

Usage: /usr/bin/python3 train/export.py --ckpt CKPT.pt --out DIR --quant fp8|none --tokenizer DIR
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

# Matrices stored FP8 in the released layout (the table's `matrix` entries, checkpoint.md §5);
# routed experts are FP4.
_FP8_SUFFIXES = ("attn.wq_a.weight", "attn.wq_b.weight", "attn.wkv.weight", "attn.wo_a.weight",
                 "attn.wo_b.weight", "attn.indexer.wq_b.weight", "e_proj.weight", "h_proj.weight",
                 "main_proj.weight")


def storage_of(name):
    """'fp8' | 'fp4' | 'bf16' | 'f32' | 'i64' for a tensor name in the quantized layout."""
    leaf = name.split(".")[-1]
    if name.endswith("tid2eid"):
        return "i64"
    if leaf.startswith("hc_") or leaf in ("attn_sink", "ape") or name.endswith("gate.bias"):
        return "f32"
    if ".ffn.experts." in name:
        return "fp4"
    if ".shared_experts." in name or name.endswith(_FP8_SUFFIXES):
        return "fp8"
    return "bf16"


# ------------------------------------------------------------------------------ encoders

def bf16_bits(x):
    """fp32 -> bf16 bits, round to nearest even (finite inputs)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_round(x):
    return (bf16_bits(x).astype(np.uint32) << 16).view(np.float32)


def _e4m3_values():
    c = np.arange(127)
    e, m = c >> 3, c & 7
    return np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7))


E4M3 = _e4m3_values()                      # codes 0..126, ascending
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float64)


def encode_rne(x, table):
    """Nearest code of |x| in an ascending table (ties to the even code), sign in bit
    (len(table) rounded up to a power of two); saturating."""
    x = np.asarray(x, dtype=np.float64)
    mag = np.minimum(np.abs(x), table[-1])
    hi = np.clip(np.searchsorted(table, mag), 1, len(table) - 1)
    lo = hi - 1
    dl, dh = mag - table[lo], table[hi] - mag
    code = np.where(dl < dh, lo, np.where(dh < dl, hi, np.where(lo % 2 == 0, lo, hi)))
    sign_bit = 0x80 if len(table) > 8 else 0x8
    return (code | np.where(np.signbit(x), sign_bit, 0)).astype(np.uint8)


def decode(codes, table):
    sign_bit = 0x80 if len(table) > 8 else 0x8
    mag = table[codes & (sign_bit - 1)]
    return np.where(codes & sign_bit, -mag, mag)


def scale_exponent(amax, qmax, floor):
    """k with 2^k = the block scale (model.md §0.4.3): t = fp32(amax·fp32(1/Q)), exponent of t
    plus one when its mantissa is non-zero."""
    t = np.float32(max(np.float32(amax), np.float32(floor))) * np.float32(1.0 / qmax)
    f, ex = np.frexp(np.float64(t))
    return int(ex - 1) if f == 0.5 else int(ex)


def quantize_fp8(w):
    """w [O, I] -> (codes uint8 [O, I], scale bytes uint8 [ceil(O/128), ceil(I/128)])."""
    O, I = w.shape
    nbo, nbi = -(-O // 128), -(-I // 128)
    codes = np.zeros((O, I), np.uint8)
    scale = np.zeros((nbo, nbi), np.uint8)
    for bo in range(nbo):
        for bi in range(nbi):
            blk = w[bo * 128:(bo + 1) * 128, bi * 128:(bi + 1) * 128]
            k = scale_exponent(np.abs(blk).max(), 448.0, 1e-4)
            scale[bo, bi] = k + 127
            codes[bo * 128:(bo + 1) * 128, bi * 128:(bi + 1) * 128] = \
                encode_rne(blk.astype(np.float64) * 2.0 ** -k, E4M3)
    assert (scale >= 27).all() and (scale <= 227).all(), "FP8 scale byte outside 27..227"
    return codes, scale


def dequant_fp8(codes, scale):
    O, I = codes.shape
    s = np.repeat(np.repeat(2.0 ** (scale.astype(np.float64) - 127), 128, 0), 128, 1)[:O, :I]
    return decode(codes, E4M3) * s


def quantize_fp4(w):
    """w [O, I] -> (packed uint8 [O, I/2], element 2c low nibble; scale bytes [O, I/32])."""
    O, I = w.shape
    assert I % 32 == 0
    g = w.reshape(O, I // 32, 32).astype(np.float64)
    amax = np.abs(g).max(-1)
    k = np.vectorize(lambda a: scale_exponent(a, 6.0, 6.0 * 2.0 ** -126))(amax)
    scale = (k + 127).astype(np.uint8)
    assert (scale >= 27).all() and (scale <= 227).all(), "FP4 scale byte outside 27..227"
    nib = encode_rne(g * 2.0 ** -k[..., None], E2M1).reshape(O, I)
    return (nib[:, 0::2] | (nib[:, 1::2] << 4)).astype(np.uint8), scale


def dequant_fp4(packed, scale):
    O = packed.shape[0]
    nib = np.stack([packed & 0xF, packed >> 4], -1).reshape(O, -1)
    s = np.repeat(2.0 ** (scale.astype(np.float64) - 127), 32, 1)
    return decode(nib, E2M1) * s


# --------------------------------------------------------------------------- safetensors

_DT = {"BF16": (np.uint16, 2), "F32": (np.float32, 4), "I64": (np.int64, 8),
       "F8_E4M3": (np.uint8, 1), "F8_E8M0": (np.uint8, 1), "I8": (np.uint8, 1)}


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, dtype string, numpy array of the raw element type)."""
    header, off, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = metadata
    for name, dt, arr in tensors:
        b = np.ascontiguousarray(arr).astype(_DT[dt][0], copy=False).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def read_safetensors(path):
    """{name: (dtype string, numpy array of the raw element type)}."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        out[name] = (e["dtype"], np.frombuffer(data[a:b], _DT[e["dtype"]][0]).reshape(e["shape"]))
    return out


def load_dequantized(model_dir):
    """{tensor name: fp64 array} of a checkpoint directory, scales folded in (checkpoint.md §4)."""
    raw = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    out = {}
    for name, (dt, a) in raw.items():
        if name.endswith(".scale"):
            continue
        if dt == "BF16":
            out[name] = (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        elif dt == "F32":
            out[name] = a.astype(np.float64)
        elif dt == "I64":
            out[name] = a.copy()
        elif dt == "F8_E4M3":
            out[name] = dequant_fp8(a, raw[name[:-len("weight")] + "scale"][1])
        elif dt == "I8":
            out[name] = dequant_fp4(a, raw[name[:-len("weight")] + "scale"][1])
        else:
            raise ValueError(f"{name}: dtype {dt}")
    return out


# -------------------------------------------------------------------------------- export

def quantized_config(cfg, quant):
    """cfg with quantization_config and expert_dtype set for --quant fp8, dropped for none."""
    cfg = dict(cfg)
    cfg.pop("quantization_config", None)
    cfg.pop("expert_dtype", None)
    if quant == "fp8":
        cfg["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3",
                                      "quant_method": "fp8", "scale_fmt": "ue8m0",
                                      "weight_block_size": [128, 128]}
        cfg["expert_dtype"] = "fp4"
    return cfg


def encode(name, a, quant):
    """One trainer tensor -> [(name, dtype string, raw array)], its .scale included."""
    a = np.asarray(a)
    form = storage_of(name)
    if quant == "none" and form in ("fp8", "fp4"):
        form = "bf16"
    if form == "i64":
        return [(name, "I64", a.astype(np.int64))]
    if form == "f32":
        return [(name, "F32", a.astype(np.float32))]
    if form == "bf16":
        return [(name, "BF16", bf16_bits(a.astype(np.float32)))]
    # Quantize the bf16-rounded weight (the trainer's bf16 master copy of the release).
    codes, scale = (quantize_fp8 if form == "fp8" else quantize_fp4)(bf16_round(a.astype(np.float32)))
    return [(name, "F8_E4M3" if form == "fp8" else "I8", codes),
            (name[:-len("weight")] + "scale", "F8_E8M0", scale)]


def write_config(cfg, out_dir):
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")


def export(state, cfg, out_dir, quant, tokenizer_dir, generator="dsv4 train/export.py"):
    """state: {name: numpy array (float or int64)} in checkpoint names; cfg: config dict."""
    assert quant in ("fp8", "none")
    os.makedirs(out_dir, exist_ok=True)
    cfg = quantized_config(cfg, quant)
    tensors = []
    for name in sorted(state):
        tensors += encode(name, state[name], quant)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors,
                      {"format": "pt", "dsv4_generator": generator})
    write_config(cfg, out_dir)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"],
                   "do_sample": True, "temperature": 1.0, "top_p": 1.0}, f, indent=2)
        f.write("\n")
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(tokenizer_dir, fn), os.path.join(out_dir, fn))


def model_state(model):
    return {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ckpt", required=True, help="a checkpoint written by train.py")
    ap.add_argument("--out", required=True)
    ap.add_argument("--quant", choices=("fp8", "none"), default="fp8")
    ap.add_argument("--tokenizer", required=True, help="directory with tokenizer.json")
    a = ap.parse_args()
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import model as M
    ck = torch.load(a.ckpt, map_location="cpu")
    m = M.Model(ck["config"])
    m.load_state_dict(ck["model"])
    export(model_state(m), ck["config"], a.out, a.quant, a.tokenizer,
           f"dsv4 train/export.py step={ck.get('step')}")
    print(f"export: {a.quant} -> {a.out} "
          f"({os.path.getsize(os.path.join(a.out, 'model.safetensors')) / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
