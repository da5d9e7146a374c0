"""Pieces shared by the model families: masked pooling and a pre-norm Transformer block."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def masked_mean(x, mask):
    """Mean over real tokens. x [B, T, D], mask [B, T] bool (True = real) -> [B, D]."""
    # torch.where, not x * mask: padding may hold anything (even inf), and 0 * inf = nan
    x = torch.where(mask.unsqueeze(-1), x, 0.0)
    return x.sum(1) / mask.sum(1, keepdim=True).clamp(min=1).to(x.dtype)


def masked_max(x, mask):
    """Max over real tokens. x [B, T, D], mask [B, T] bool -> [B, D]. Every row needs a real token."""
    return torch.where(mask.unsqueeze(-1), x, float("-inf")).amax(1)


class SelfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        assert dim % heads == 0, f"width {dim} is not divisible by {heads} heads"
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, mask=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        # key padding mask: no query attends to a padded key; padded queries still see the real keys, so no NaN
        attn_mask = None if mask is None else mask[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    """Pre-norm Transformer encoder block (as in ViT): x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, dim, heads, ff):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, ff), nn.GELU(), nn.Linear(ff, dim))

    def forward(self, x, mask=None):
        x = x + self.attn(self.ln1(x), mask)
        return x + self.mlp(self.ln2(x))
