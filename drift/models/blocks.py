"""Pieces shared by the model families: masked pooling, dropout that a stack can feed its own masks, and a
post-norm Transformer encoder block (as torch's nn.TransformerEncoderLayer, which the authors' ViT and text
Transformer use)."""

import copy
import math

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


class Dropout(nn.Module):
    """Inverted dropout with probability p, identity in eval mode or at p = 0 (no random draw at all). Alone
    it draws its mask from torch's global generator, as nn.Dropout; the batched engine instead sets the
    `noise` buffer (uniform [0, 1) of the input's shape, drawn from each stacked model's own generator), and
    an element is dropped where noise < p."""

    noise: torch.Tensor | None  # a buffer

    def __init__(self, p: float = 0.0):
        super().__init__()
        self.p = float(p)
        self.register_buffer("noise", None, persistent=False)

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        if self.noise is None:
            return F.dropout(x, self.p, training=True)
        return torch.where(self.noise >= self.p, x / (1 - self.p), 0.0)

    def extra_repr(self):
        return f"p={self.p}"


class SelfAttention(nn.Module):
    """Multi-head self-attention with a key padding mask; dropout p on the attention weights (training only).
    Initialised as nn.MultiheadAttention: Xavier-uniform input projection, zero biases. `mha_order`: draw the
    initial weights in nn.MultiheadAttention's order too (the output projection's default init, then the input
    projection's Xavier draw), so the same generator state gives its weights."""

    def __init__(self, dim, heads, dropout=0.0, mha_order=False):
        super().__init__()
        assert dim % heads == 0, f"width {dim} is not divisible by {heads} heads"
        self.heads = heads
        self.qkv = nn.utils.skip_init(nn.Linear, dim, 3 * dim) if mha_order else nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.drop = Dropout(dropout)
        nn.init.xavier_uniform_(self.qkv.weight)
        nn.init.zeros_(self.qkv.bias)
        nn.init.zeros_(self.proj.bias)

    def forward(self, x, mask=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        # key padding mask: no query attends to a padded key; padded queries still see the real keys, so no
        # NaN
        attn_mask = None if mask is None else mask[:, None, None, :]
        if self.training and self.drop.p > 0:  # the weights themselves, so their dropout can be fed its masks
            scores = q @ k.transpose(-2, -1) / math.sqrt(C // self.heads)
            if attn_mask is not None:
                scores = scores.masked_fill(~attn_mask, float("-inf"))
            y = self.drop(torch.softmax(scores, dim=-1)) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    """Post-norm Transformer encoder block, the layout of nn.TransformerEncoderLayer (norm_first=False, GELU):
    x = ln1(x + drop(attn(x))), then x = ln2(x + drop(mlp(x))) with dropout after the MLP's activation too.
    `mha_order`: the initial weights drawn in nn.TransformerEncoderLayer's order (SelfAttention's mha_order).
    """

    def __init__(self, dim, heads, ff, dropout=0.0, mha_order=False):
        super().__init__()
        self.attn = SelfAttention(dim, heads, dropout, mha_order)
        self.drop1 = Dropout(dropout)
        self.ln1 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, ff), nn.GELU(), Dropout(dropout), nn.Linear(ff, dim))
        self.drop2 = Dropout(dropout)
        self.ln2 = nn.LayerNorm(dim)

    def forward(self, x, mask=None):
        x = self.ln1(x + self.drop1(self.attn(x, mask)))
        return self.ln2(x + self.drop2(self.mlp(x)))


def block_stack(dim, heads, ff, depth, dropout=0.0, cloned=False):
    """`depth` blocks, each drawing its own initial weights; cloned: one block in nn.TransformerEncoderLayer's
    draw order, deep-copied `depth` times as nn.TransformerEncoder builds its layers (every layer starts
    equal)."""
    if not cloned:
        return nn.ModuleList([Block(dim, heads, ff, dropout) for _ in range(depth)])
    block = Block(dim, heads, ff, dropout, mha_order=True)
    return nn.ModuleList([copy.deepcopy(block) for _ in range(depth)])
