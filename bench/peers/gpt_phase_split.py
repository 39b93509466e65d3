#!/usr/bin/env python3
"""Where a GPT step's time goes in PyTorch, for docs/BENCHMARKS.md
"train-gpt": median forward, backward and optimizer milliseconds of
gpt_pytorch.py's model (nanoGPT) on a fixed batch, then the same model with
topspin's op order (QKV viewed as [B, T, 3, H, hd] and permuted, the head as
a matmul with the transposed embedding, the loss as a sum over tokens).

usage: gpt_phase_split.py [--threads 2] [--steps 8]
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_pytorch  # noqa: E402


def topspin_attn(self, x):
    b, t, d = x.size()
    s = self.c_attn(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
    y = F.scaled_dot_product_attention(s[0], s[1], s[2], is_causal=True)
    return self.c_proj(y.transpose(1, 2).reshape(b, t, d))


def topspin_forward(self, idx, targets):
    h = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
    for block in self.h:
        h = block(h)
    logits = torch.matmul(self.ln_f(h), self.wte.weight.t())
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
                           reduction="sum") / targets.numel()


def split(steps):
    torch.manual_seed(0)
    m = gpt_pytorch.GPT(257, 256, 6, 384, 6)
    x = torch.randint(257, (8, 257))
    xi, yi = x[:, :-1].contiguous(), x[:, 1:].contiguous()
    opt = torch.optim.AdamW(m.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.0,
                            fused=True)
    f, b, o = [], [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        loss = m(xi, yi)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        f.append(t1 - t0), b.append(t2 - t1), o.append(t3 - t2)
    return tuple(1000 * statistics.median(v[2:]) for v in (f, b, o))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print("nanoGPT:          forward %.1f ms, backward %.1f ms, optimizer %.1f ms" % split(a.steps))
    gpt_pytorch.Block.attn = topspin_attn
    gpt_pytorch.GPT.forward = topspin_forward
    print("topspin op order: forward %.1f ms, backward %.1f ms, optimizer %.1f ms" % split(a.steps))


if __name__ == "__main__":
    main()
