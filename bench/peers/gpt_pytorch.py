#!/usr/bin/env python3
"""The PyTorch peer of `topspin bench train-gpt`: GPT-2 training as nanoGPT
writes it (model.py and train.py), on the same torch as topspin's LibTorch.

Model: token + learned position embeddings, pre-LayerNorm blocks with biases
(fused QKV Linear, F.scaled_dot_product_attention with is_causal=True, GELU
MLP of 4 x width), final LayerNorm, head tied to the token embedding;
GPT-2 initialisation (normal 0.02, residual projections 0.02 / sqrt(2 L)).
Optimizer: AdamW (fused=True where this torch has it on the device), weight
decay on the matrices only, gradient clipping at 1. Data: nanoGPT's
get_batch: random windows of T + 1 tokens of a uint8 token file (byte
tokens), drawn by a seeded generator. bf16: torch.autocast over forward and
loss, as nanoGPT's ctx.

--compile wraps the model in torch.compile (default mode); the compile
happens in the warm-up steps, which are never timed.

Prints one JSON object: {"tokens_per_s", "seconds", "steps", "params",
"first_loss", "last_loss", "mean_loss" (over the timed steps), "compiled",
"dtype", "fused_adamw"}.
usage: gpt_pytorch.py TOKENS_FILE [--layers 6] [--d-model 384] [--heads 6]
       [--context 256] [--vocab 257] [--batch 8] [--steps 20] [--warmup 3]
       [--lr 6e-4] [--threads 2] [--seed 1] [--bf16] [--compile] [--device cpu]
"""
import argparse
import inspect
import json
import math
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def attn(self, x):
        b, t, d = x.size()
        q, k, v = self.c_attn(x).split(d, dim=2)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, context, layers, d, heads):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(context, d)
        self.h = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.wte.weight = self.lm_head.weight  # tied
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight") or name.endswith("mlp_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * layers))

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        t = idx.size(1)
        pos = torch.arange(t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tokens")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--d-model", type=int, default=384)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=257)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    device = torch.device(a.device)
    data = np.fromfile(a.tokens, dtype=np.uint8)
    gen = torch.Generator().manual_seed(a.seed)

    def get_batch():
        ix = torch.randint(len(data) - a.context - 1, (a.batch,), generator=gen)
        x = torch.stack([torch.from_numpy(data[i:i + a.context].astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + a.context].astype(np.int64)) for i in ix])
        return x.to(device), y.to(device)

    model = GPT(a.vocab, a.context, a.layers, a.d_model, a.heads).to(device)
    params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    fused = "fused" in inspect.signature(torch.optim.AdamW).parameters
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), **({"fused": True} if fused else {}))
    step_model = torch.compile(model) if a.compile else model
    dtype = torch.bfloat16 if a.bf16 else torch.float32
    ctx = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=a.bf16)

    def step():
        x, y = get_batch()
        with ctx:
            loss = step_model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    first = None
    for _ in range(a.warmup):
        loss = step()
        first = loss if first is None else first
    start = time.perf_counter()
    timed = []
    for _ in range(a.steps):
        loss = step()
        first = loss if first is None else first
        timed.append(loss)
    seconds = time.perf_counter() - start
    print(json.dumps({"tokens_per_s": a.steps * a.batch * a.context / seconds,
                      "seconds": seconds, "steps": a.steps, "params": params,
                      "first_loss": first, "last_loss": loss,
                      "mean_loss": sum(timed) / len(timed), "compiled": a.compile,
                      "dtype": str(dtype).replace("torch.", ""), "fused_adamw": fused}))


if __name__ == "__main__":
    main()
