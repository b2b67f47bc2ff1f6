#!/usr/bin/python3
"""Golden logits and loss of a tiny GPT-2 for tests/runtime/models/gpt_golden_test.cc.

An implementation of GPT-2's forward pass written from the architecture (Radford et al. 2019 and
the released model: token + learned position embeddings, pre-LN blocks x + attn(ln_1(x)) and
x + mlp(ln_2(x)), causal multi-head self-attention, a 4C MLP with GELU's tanh approximation,
final layer norm, language-model head tied to the token embedding, mean cross-entropy), in
float64 PyTorch. It shares no code with the C++ runtime (runtime/models/gpt.cc, runtime/ops/cpu/ops.h):
the constants come from torch (layer_norm's eps=1e-5 as GPT-2 sets it, gelu(approximate="tanh")).
Torch is a reference only: the test reads the file this script writes, never torch.

Re-run (from the repository root; Debian's python3-torch: `apt-get install -y python3-torch`):

    /usr/bin/python3 tests/runtime/models/golden/make_golden.py

It rewrites tests/runtime/models/golden/tiny_gpt2.safetensors (deterministic: the same bytes every run)
and prints the largest difference between a float32 and the float64 run of the same model, the
scale of the fp32 rounding error that the test's tolerance is set against.

The file (safetensors, docs/safetensors.md), all little-endian:
  __metadata__     n_layer, n_head, n_embd, block_size, vocab_size, batch, seq_len (decimal strings)
  <parameter>      F32, every parameter under the runtime's names (runtime/models/gpt.h, Hugging
                   Face GPT-2 names) and shapes: linear weights are [out][in] (nn.Linear), NOT the
                   [in][out] of Hugging Face's Conv1D
  tokens, targets  I32 [batch][seq_len]
  logits           F64 [batch * seq_len][vocab_size], the float64 reference
  loss             F64 [] (0-d), mean cross-entropy of logits against targets
Parameter values come from splitmix64 (below), scaled so that activations are O(1): GELU's cubic
term and layer norm's statistics then matter to the logits, which GPT-2's own initialisation
(std 0.02) would hide.
"""

import json
import math
import os
import struct

import torch
import torch.nn.functional as F

CONFIG = dict(n_layer=2, n_head=2, n_embd=8, block_size=6, vocab_size=11)
BATCH, SEQ_LEN = 2, 5  # seq_len < block_size: only the first rows of wpe are used
TOKENS = [[1, 5, 2, 9, 10], [0, 3, 3, 7, 4]]
TARGETS = [[5, 2, 9, 10, 6], [3, 3, 7, 4, 8]]
SEED = 2024
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_gpt2.safetensors")


class SplitMix64:
    """Steele, Lea, Flood 2014: the same numbers on every platform and torch version."""

    MASK = (1 << 64) - 1

    def __init__(self, seed):
        self.state = seed & self.MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & self.MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & self.MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & self.MASK
        return z ^ (z >> 31)

    def uniform(self, lo, hi):
        # 24 random bits: lo + (hi - lo) * u, rounded to float32 when stored.
        u = (self.next() >> 40) / 16777216.0
        return lo + (hi - lo) * u


def parameters():
    """(name, shape, values) in the runtime's layout order, values float32-representable."""
    c, v, t, n_layer = CONFIG["n_embd"], CONFIG["vocab_size"], CONFIG["block_size"], CONFIG["n_layer"]
    rng = SplitMix64(SEED)

    def tensor(shape, lo, hi):
        n = math.prod(shape)
        return torch.tensor([rng.uniform(lo, hi) for _ in range(n)], dtype=torch.float32).reshape(shape)

    def linear(out_dim, in_dim):
        bound = 1.5 / math.sqrt(in_dim)  # keeps each layer's outputs O(1) for O(1) inputs
        return tensor([out_dim, in_dim], -bound, bound), tensor([out_dim], -0.2, 0.2)

    out = [("wte.weight", tensor([v, c], -1.0, 1.0)), ("wpe.weight", tensor([t, c], -0.5, 0.5))]
    for layer in range(n_layer):
        p = f"h.{layer}."
        out.append((p + "ln_1.weight", tensor([c], 0.5, 1.5)))
        out.append((p + "ln_1.bias", tensor([c], -0.3, 0.3)))
        w, b = linear(3 * c, c)
        out += [(p + "attn.c_attn.weight", w), (p + "attn.c_attn.bias", b)]
        w, b = linear(c, c)
        out += [(p + "attn.c_proj.weight", w), (p + "attn.c_proj.bias", b)]
        out.append((p + "ln_2.weight", tensor([c], 0.5, 1.5)))
        out.append((p + "ln_2.bias", tensor([c], -0.3, 0.3)))
        w, b = linear(4 * c, c)
        out += [(p + "mlp.c_fc.weight", w), (p + "mlp.c_fc.bias", b)]
        w, b = linear(c, 4 * c)
        out += [(p + "mlp.c_proj.weight", w), (p + "mlp.c_proj.bias", b)]
    out.append(("ln_f.weight", tensor([c], 0.5, 1.5)))
    out.append(("ln_f.bias", tensor([c], -0.3, 0.3)))
    return out


def gpt2_forward(params, tokens, targets, dtype):
    """Logits [B*T][V] and mean cross-entropy of GPT-2 with the given parameters, in `dtype`."""
    p = {name: value.to(dtype) for name, value in params}
    c, nh = CONFIG["n_embd"], CONFIG["n_head"]
    hs = c // nh
    b, t = tokens.shape
    x = p["wte.weight"][tokens] + p["wpe.weight"][:t]  # [B][T][C]
    causal = torch.tril(torch.ones(t, t, dtype=torch.bool))
    for layer in range(CONFIG["n_layer"]):
        q = f"h.{layer}."
        h = F.layer_norm(x, (c,), p[q + "ln_1.weight"], p[q + "ln_1.bias"], eps=1e-5)
        qkv = F.linear(h, p[q + "attn.c_attn.weight"], p[q + "attn.c_attn.bias"])
        query, key, value = qkv.split(c, dim=2)
        # [B][T][C] -> [B][NH][T][hs]: head k holds channels k*hs .. (k+1)*hs of q, k and v.
        query, key, value = (z.view(b, t, nh, hs).transpose(1, 2) for z in (query, key, value))
        scores = (query @ key.transpose(-2, -1)) / math.sqrt(hs)
        scores = scores.masked_fill(~causal, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ value
        y = y.transpose(1, 2).reshape(b, t, c)
        x = x + F.linear(y, p[q + "attn.c_proj.weight"], p[q + "attn.c_proj.bias"])
        h = F.layer_norm(x, (c,), p[q + "ln_2.weight"], p[q + "ln_2.bias"], eps=1e-5)
        h = F.gelu(F.linear(h, p[q + "mlp.c_fc.weight"], p[q + "mlp.c_fc.bias"]), approximate="tanh")
        x = x + F.linear(h, p[q + "mlp.c_proj.weight"], p[q + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (c,), p["ln_f.weight"], p["ln_f.bias"], eps=1e-5)
    logits = (x @ p["wte.weight"].T).reshape(b * t, -1)  # tied head, no bias
    loss = F.cross_entropy(logits, targets.reshape(-1))
    return logits, loss


def write_safetensors(path, tensors, metadata):
    """tensors: (name, dtype name, shape, bytes). Header padded with spaces to a multiple of 8."""
    header = {"__metadata__": metadata}
    offset = 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, data in tensors:
            f.write(data)


def main():
    params = parameters()
    tokens = torch.tensor(TOKENS, dtype=torch.long)
    targets = torch.tensor(TARGETS, dtype=torch.long)
    assert tokens.shape == (BATCH, SEQ_LEN) and SEQ_LEN <= CONFIG["block_size"]
    logits, loss = gpt2_forward(params, tokens, targets, torch.float64)
    logits32, loss32 = gpt2_forward(params, tokens, targets, torch.float32)

    def le(values, fmt):
        return struct.pack("<%d%s" % (len(values), fmt), *values)

    tensors = [(name, "F32", value.shape, le(value.reshape(-1).tolist(), "f")) for name, value in params]
    tensors.append(("tokens", "I32", tokens.shape, le(tokens.reshape(-1).tolist(), "i")))
    tensors.append(("targets", "I32", targets.shape, le(targets.reshape(-1).tolist(), "i")))
    tensors.append(("logits", "F64", logits.shape, le(logits.reshape(-1).tolist(), "d")))
    tensors.append(("loss", "F64", (), le([loss.item()], "d")))
    metadata = {k: str(v) for k, v in CONFIG.items()}
    metadata.update(batch=str(BATCH), seq_len=str(SEQ_LEN))
    write_safetensors(OUT, tensors, metadata)

    print(f"wrote {OUT}: {sum(v.numel() for _, v in params)} parameters, loss {loss.item():.17g}")
    print(f"logits in [{logits.min().item():.3f}, {logits.max().item():.3f}]")
    print(f"float32 vs float64: max |logit diff| {(logits32.double() - logits).abs().max().item():.3g}, "
          f"|loss diff| {abs(loss32.item() - loss.item()):.3g}")


if __name__ == "__main__":
    main()
