"""Text heads trained from scratch on frozen token states (paper Section 3.2.2, Tables 11 and 19).

Input: token states x [B, T, D] and mask [B, T] (True = real token, padding at the end, >= 1 real token per
row). Every head ignores padding exactly, so the same text padded to a longer batch gives the same output.
The SIZES tables give the arguments, chosen so the trainable counts at D=768 land on Tables 11 and 19.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from drift.models.blocks import Block, masked_max, masked_mean


class FFN(nn.Module):
    """Average the token states (order discarded), then a one-hidden-layer MLP."""

    def __init__(self, spec, n_outputs, hidden=128):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(spec.shape[0], hidden), nn.ReLU(), nn.Linear(hidden, n_outputs))

    def forward(self, x, mask):
        return self.net(masked_mean(x, mask))


class TextCNN(nn.Module):
    """Kim (2014): 1-D convolutions of several widths over the tokens, max-pooled over time, concatenated."""

    def __init__(self, spec, n_outputs, kernels=(3, 4, 5), filters=50):
        super().__init__()
        D = spec.shape[0]
        self.convs = nn.ModuleList([nn.Conv1d(D, filters, k) for k in kernels])
        self.head = nn.Linear(filters * len(kernels), n_outputs)

    def forward(self, x, mask):
        x = torch.where(mask.unsqueeze(-1), x, 0.0).transpose(1, 2)  # [B, D, T], padding zeroed
        feats = []
        for conv in self.convs:
            # 'same' zero padding: one output per token, and with padded tokens zeroed the outputs at real
            # positions do not depend on how much padding follows
            k = conv.kernel_size[0]
            h = torch.relu(conv(F.pad(x, ((k - 1) // 2, k // 2))))  # [B, filters, T]
            feats.append(masked_max(h.transpose(1, 2), mask))
        return self.head(torch.cat(feats, dim=1))


def _pack(x, mask):
    # packing feeds each row's real tokens only, so padding never enters the recurrence
    lengths = mask.sum(1).cpu()
    return pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)


class BiRNN(nn.Module):
    """Bidirectional GRU or LSTM; the final hidden states of both directions feed a linear head."""

    def __init__(self, spec, n_outputs, cell="gru", hidden=64):
        super().__init__()
        rnn = {"gru": nn.GRU, "lstm": nn.LSTM}[cell]
        self.rnn = rnn(spec.shape[0], hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, n_outputs)

    def forward(self, x, mask):
        _, h = self.rnn(_pack(x, mask))
        h = h[0] if isinstance(h, tuple) else h  # LSTM returns (h_n, c_n)
        return self.head(torch.cat([h[-2], h[-1]], dim=1))  # last layer: forward, backward


class BiLSTMAttention(nn.Module):
    """Stacked bidirectional LSTM; additive attention pooling over its outputs (real tokens only)."""

    def __init__(self, spec, n_outputs, hidden=128, layers=2):
        super().__init__()
        self.rnn = nn.LSTM(spec.shape[0], hidden, num_layers=layers, batch_first=True, bidirectional=True)
        self.attn = nn.Sequential(nn.Linear(2 * hidden, 2 * hidden), nn.Tanh(), nn.Linear(2 * hidden, 1))
        self.head = nn.Linear(2 * hidden, n_outputs)

    def forward(self, x, mask):
        out, _ = self.rnn(_pack(x, mask))
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])  # [B, T, 2H]
        scores = self.attn(out).squeeze(-1).masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=1).unsqueeze(-1)
        return self.head((weights * out).sum(1))


class TextTransformer(nn.Module):
    """Project token states to a narrow width, add learnable positions, Transformer blocks with a key
    padding mask, then the mean over real tokens."""

    def __init__(self, spec, n_outputs, dim=64, depth=1, heads=4, ff=128):
        super().__init__()
        self.max_tokens = spec.max_tokens
        self.proj = nn.Linear(spec.shape[0], dim)
        self.pos = nn.Parameter(torch.randn(spec.max_tokens, dim) * 0.02)
        self.blocks = nn.ModuleList([Block(dim, heads, ff) for _ in range(depth)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, n_outputs)

    def forward(self, x, mask):
        T = x.shape[1]
        if T > self.max_tokens:
            raise ValueError(f"{T} tokens exceed max_tokens={self.max_tokens} of this model's InputSpec")
        x = self.proj(x) + self.pos[:T]
        for block in self.blocks:
            x = block(x, mask)
        return self.head(masked_mean(self.ln(x), mask))


# name -> (class, paper family, display name, size, arguments); counts at D=768 with 1 output / 7 outputs
HEADS = {
    "ffn-s": (FFN, "FFN", "FFN-S", "S", dict(hidden=128)),                                # 99k / 99k
    "ffn-m": (FFN, "FFN", "FFN-M", "M", dict(hidden=512)),                                # 394k / 397k
    "ffn-l": (FFN, "FFN", "FFN-L", "L", dict(hidden=2048)),                               # 1.58M / 1.59M
    "textcnn-s": (TextCNN, "TextCNN", "TextCNN-S", "S", dict(kernels=(2, 3), filters=23)),  # 88k / 89k
    "textcnn-m": (TextCNN, "TextCNN", "TextCNN-M", "M", dict(kernels=(3, 4, 5), filters=50)),  # 461k / 462k
    "textcnn-l": (TextCNN, "TextCNN", "TextCNN-L", "L", dict(kernels=(2, 3, 4, 5), filters=176)),  # 1.89M / 1.90M
    "bigru-s": (BiRNN, "Recurrent", "BiGRU-S", "S", dict(cell="gru", hidden=21)),         # 100k / 100k
    "bilstm-m": (BiRNN, "Recurrent", "BiLSTM-M", "M", dict(cell="lstm", hidden=79)),      # 537k / 538k
    "bilstm-attn-l": (BiLSTMAttention, "Recurrent", "BiLSTM-Attn-L", "L", dict(hidden=176, layers=2)),  # 2.20M
    # counts include the position table, max_tokens x dim (512 at the reference setting)
    "tx-s": (TextTransformer, "Transformer", "TX-S", "S", dict(dim=48, depth=1, heads=4, ff=128)),   # 84k
    "tx-m": (TextTransformer, "Transformer", "TX-M", "M", dict(dim=100, depth=3, heads=5, ff=400)),  # 492k
    "tx-l": (TextTransformer, "Transformer", "TX-L", "L", dict(dim=168, depth=5, heads=6, ff=672)),  # 1.92M
}
