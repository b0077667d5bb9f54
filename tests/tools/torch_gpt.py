"""The GPT of ultrascope written in PyTorch: nanoGPT's module names and structure, RoPE (rotate-half, base 10000)
instead of a position table, the LM head tied to the token embedding. Used by make_golden.py (reference data) and
by tests/bench/bench_vs_pytorch.py (the throughput comparison)."""
import math

import numpy as np
import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(C, eps=1e-5)
        self.attn = torch.nn.Module()
        self.attn.c_attn = torch.nn.Linear(C, 3 * C)
        self.attn.c_proj = torch.nn.Linear(C, C)
        self.ln_2 = torch.nn.LayerNorm(C, eps=1e-5)
        self.mlp = torch.nn.Module()
        self.mlp.c_fc = torch.nn.Linear(C, 4 * C)
        self.mlp.c_proj = torch.nn.Linear(4 * C, C)
        self.NH = NH

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        NH, HD = self.NH, C // self.NH
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, NH, HD).transpose(1, 2) for t in (q, k, v))

        def rope(t):
            t1, t2 = t[..., :HD // 2], t[..., HD // 2:]
            return torch.cat([t1 * cos - t2 * sin, t2 * cos + t1 * sin], dim=-1)

        q, k = rope(q), rope(k)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HD))
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.attn.c_proj(y)
        x = x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))
        return x


class GPT(torch.nn.Module):
    def __init__(self, V, C, L, NH, T):
        super().__init__()
        self.transformer = torch.nn.Module()
        self.transformer.wte = torch.nn.Embedding(V, C)
        self.transformer.h = torch.nn.ModuleList([Block(C, NH) for _ in range(L)])
        self.transformer.ln_f = torch.nn.LayerNorm(C, eps=1e-5)
        HD = C // NH
        inv = 10000.0 ** (-2.0 * np.arange(HD // 2, dtype=np.float64) / HD)
        ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
        self.cos = torch.tensor(np.cos(ang), dtype=torch.float32)
        self.sin = torch.tensor(np.sin(ang), dtype=torch.float32)

    def forward(self, idx, targets):
        x = self.transformer.wte(idx)
        for block in self.transformer.h:
            x = block(x, self.cos, self.sin)
        x = self.transformer.ln_f(x)
        logits = F.linear(x, self.transformer.wte.weight)  # tied head
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


