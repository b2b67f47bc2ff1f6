# The yardstick of scripts/bench-train.sh: the bundled GPT (docs/model.md) written in PyTorch and
# trained with DistributedDataParallel over gloo, as a torchrun user would, on the shapes, batch
# and optimizer of a dslaunch train.json. Launched by dslaunch with the same environment contract
# (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), one thread per rank, fp32.
#
#   dslaunch --nproc_per_node 2 benchmarks/torch/gpt_ddp.py CONFIG.json
#
# Rank 0 prints one line per steps_per_print steps in the worker's format, so that the same parser
# reads both: "step 10 | loss 5.1234 | 1234 tokens/s | 456.7 ms/step". Tokens are random: the
# speed of a step does not depend on their values.
import argparse
import json
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, n_head, block_size):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(c)
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c)
        self.c_fc = nn.Linear(c, 4 * c)
        self.mlp_proj = nn.Linear(4 * c, c)
        # A plain attribute, not a buffer: gloo cannot broadcast bool tensors, and it never changes.
        self.mask = torch.tril(torch.ones(block_size, block_size, dtype=torch.bool)).view(1, 1, block_size, block_size)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.mask[:, :, :t, :t], float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, m):
        super().__init__()
        c = m["n_embd"]
        self.wte = nn.Embedding(m["vocab_size"], c)
        self.wpe = nn.Embedding(m["block_size"], c)
        self.h = nn.ModuleList(Block(c, m["n_head"], m["block_size"]) for _ in range(m["n_layer"]))
        self.ln_f = nn.LayerNorm(c)
        for module in self.modules():  # GPT-2's initialisation, as the bundled model's
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear):
                nn.init.zeros_(module.bias)

    def forward(self, idx, targets):
        t = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # the head tied to the token embedding
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    args, _ = parser.parse_known_args()  # dslaunch adds --local_rank=N
    with open(args.config) as f:
        config = json.load(f)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    m = config["model"]
    micro = config["train_micro_batch_size_per_gpu"]
    steps = config["train"]["steps"]
    every = config.get("steps_per_print", 10)
    params = config["optimizer"]["params"]
    torch.manual_seed(config.get("seed", 1337))
    model = nn.parallel.DistributedDataParallel(Gpt(m))
    optimizer = torch.optim.AdamW(model.parameters(), lr=params["lr"], betas=tuple(params.get("betas", (0.9, 0.999))),
                                  weight_decay=params.get("weight_decay", 0.01))
    generator = torch.Generator().manual_seed(1000 + rank)
    t = m["block_size"]
    last = time.perf_counter()
    for step in range(1, steps + 1):
        tokens = torch.randint(m["vocab_size"], (micro, t + 1), generator=generator)
        loss = model(tokens[:, :-1], tokens[:, 1:])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % every == 0 or step == steps:
            now = time.perf_counter()
            n = every if step % every == 0 else step % every
            if rank == 0:
                print(f"step {step} | loss {loss.item():.4f} | {n * micro * t * world / (now - last):.0f} tokens/s | "
                      f"{1e3 * (now - last) / n:.1f} ms/step", flush=True)
            last = now
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
