"""Text heads trained from scratch on frozen token states (paper Section 3.2.2, Tables 11 and 19).

Input: token states x [B, T, D] and mask [B, T] (True = real token, padding at the end, >= 1 real token per
row). Every head ignores padding exactly, so the same text padded to a longer batch gives the same output.
Each class's size arguments are those of its family in drift/core/model_registry.py (FAMILIES, by the same
names and defaults: drift/models refuses to import otherwise); its BUILT_IN declarations give the authors'
sizes, whose trainable counts at D=768 are Tables 11 and 19; `dropout` is their p (0.1 in their runs,
train.dropout here). No head has positions: the Transformer sees the token states as the encoder gives them,
as the authors'.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from drift.models.blocks import Dropout, block_stack, masked_max, masked_mean


class FFN(nn.Module):
    """Average the token states (order discarded), then a one-hidden-layer MLP with dropout after the ReLU."""

    def __init__(self, spec, n_outputs, hidden=128, dropout=0.0):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(spec.shape[0], hidden), nn.ReLU(), Dropout(dropout), nn.Linear(hidden, n_outputs)
        )

    def forward(self, x, mask):
        return self.net(masked_mean(x, mask))


class TextCNN(nn.Module):
    """Kim (2014): 1-D convolutions of several widths over the tokens, each max-pooled over time,
    concatenated, then a ReLU projection, dropout and the linear head. The max is over the windows that start
    at a real token; `authors`: over every window of the rows zero-padded to spec.max_tokens, those over
    padding alone included (the ReLU of the bias), as their heads read token states padded to max_length. That
    is another function of the same weights, so its convolutions go by another name (`padded_convs`): a
    checkpoint says which it is."""

    def __init__(
        self, spec, n_outputs, kernels=(3, 4, 5), filters=48, projection=128, dropout=0.0, authors=False
    ):
        super().__init__()
        D = spec.shape[0]
        self.kernels = tuple(kernels)  # each convolution's width, in order
        convs = nn.ModuleList([nn.Conv1d(D, filters, k) for k in self.kernels])
        self.pad_to = spec.max_tokens if authors else None
        if authors:
            self.padded_convs = convs
        else:
            self.convs = convs
        self.projection = nn.Sequential(nn.Linear(filters * len(kernels), projection), nn.ReLU())
        self.drop = Dropout(dropout)
        self.head = nn.Linear(projection, n_outputs)

    def forward(self, x, mask):
        x = torch.where(mask.unsqueeze(-1), x, 0.0).transpose(1, 2)  # [B, D, T], padding zeroed
        if self.pad_to is not None:
            x = F.pad(x, (0, max(0, self.pad_to - x.shape[2])))
            feats = [torch.relu(conv(x)).amax(2) for conv in self.padded_convs]
            return self.head(self.drop(self.projection(torch.cat(feats, dim=1))))
        feats = []
        for width, conv in zip(self.kernels, self.convs):
            # one window starting at each token, zeros past the end: the max over the windows that start at a
            # real token does not depend on how much padding follows
            h = torch.relu(conv(F.pad(x, (0, width - 1))))  # [B, filters, T]
            feats.append(masked_max(h.transpose(1, 2), mask))
        return self.head(self.drop(self.projection(torch.cat(feats, dim=1))))


class RNNHead(nn.Module):
    """A ReLU projection of the token states, a bidirectional GRU or LSTM over the real tokens (dropout
    between stacked layers), pooled by the mean of its outputs or by attention (one linear score per token,
    softmax over the real ones), then dropout and the linear head."""

    def __init__(
        self, spec, n_outputs, cell="gru", projection=64, hidden=64, layers=1, attention=False, dropout=0.0
    ):
        super().__init__()
        self.projection = nn.Sequential(nn.Linear(spec.shape[0], projection), nn.ReLU())
        rnn = {"gru": nn.GRU, "lstm": nn.LSTM}[cell]
        self.rnn = rnn(
            projection,
            hidden,
            num_layers=layers,
            batch_first=True,
            bidirectional=True,
            dropout=dropout if layers > 1 else 0.0,
        )
        self.attn = nn.Linear(2 * hidden, 1) if attention else None
        self.drop = Dropout(dropout)
        self.head = nn.Linear(2 * hidden, n_outputs)

    def forward(self, x, mask):
        # packing feeds each row's real tokens only, so padding never enters the recurrence
        lengths = mask.sum(1).cpu()
        packed = pack_padded_sequence(self.projection(x), lengths, batch_first=True, enforce_sorted=False)
        out, _ = pad_packed_sequence(
            self.rnn(packed)[0], batch_first=True, total_length=x.shape[1]
        )  # [B, T, 2H]
        if self.attn is None:
            pooled = masked_mean(out, mask)
        else:
            scores = self.attn(out).squeeze(-1).masked_fill(~mask, float("-inf"))
            pooled = (torch.softmax(scores, dim=1).unsqueeze(-1) * out).sum(1)
        return self.head(self.drop(pooled))


class TextTransformer(nn.Module):
    """Project token states to a narrow width, post-norm Transformer blocks with a key padding mask (no
    position embedding), the mean over real tokens, dropout and the linear head. `authors`: one block
    deep-copied `layers` times in nn.TransformerEncoderLayer's draw order, as theirs (their initial weights
    from the same generator state)."""

    def __init__(self, spec, n_outputs, width=64, layers=1, heads=4, ffn=128, dropout=0.0, authors=False):
        super().__init__()
        self.proj = nn.Linear(spec.shape[0], width)
        self.blocks = block_stack(width, heads, ffn, layers, dropout, cloned=authors)
        self.drop = Dropout(dropout)
        self.head = nn.Linear(width, n_outputs)

    def forward(self, x, mask):
        x = self.proj(x)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.drop(masked_mean(x, mask)))


# drift/core/model_registry.py FAMILIES key -> class
FAMILIES: dict[str, type[nn.Module]] = {
    "ffn": FFN,
    "textcnn": TextCNN,
    "recurrent": RNNHead,
    "transformer": TextTransformer,
}
