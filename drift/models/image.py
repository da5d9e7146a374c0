"""Image models trained from scratch (paper Section 3.2.1, Table 3): MLP, CNN, ResNet, ViT.

Each class's size arguments are those of its family in drift/core/model_registry.py (FAMILIES, by the same
names and defaults: drift/models refuses to import otherwise); its BUILT_IN declarations give the authors'
three sizes, whose trainable counts for a 3x32x32 input and 2 classes are the paper's Table 3. Every model
reads its input shape from the spec, so other resolutions and channel counts work too. Inputs are used as
given (no normalisation inside).
"""

import torch
import torch.nn as nn

from drift.models.blocks import Dropout, block_stack


class MLP(nn.Module):
    """Flatten the image, then fully connected layers: no spatial prior at all."""

    def __init__(self, spec, n_outputs, hidden=(32,)):
        super().__init__()
        C, H, W = spec.shape
        layers: list[nn.Module] = [nn.Flatten()]
        d = C * H * W
        for h in hidden:
            layers += [nn.Linear(d, h), nn.ReLU()]
            d = h
        layers.append(nn.Linear(d, n_outputs))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    """A conv3x3 -> batch norm -> ReLU -> 2x2 max-pool stage per width, global average pool, one linear layer
    (the authors' ImageCNN with pool_every=1, global_pool=avg and no MLP head). Their convolutions carry a
    bias, which the batch norm subtracts again: left out here (docs/decisions.md, "The authors'
    architectures"), kept with `authors` (their parameter count, and their initial weights from the same
    generator state)."""

    def __init__(self, spec, n_outputs, channels=(32, 64, 128), authors=False):
        super().__init__()
        layers, c = [], spec.shape[0]
        for w in channels:
            # ceil: odd or tiny sizes never shrink to 0 (at the paper's 32x32 the same as floor)
            layers += [
                nn.Conv2d(c, w, 3, padding=1, bias=authors),
                nn.BatchNorm2d(w),
                nn.ReLU(),
                nn.MaxPool2d(2, ceil_mode=True),
            ]
            c = w
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(c, n_outputs)

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3)))


class BasicBlock(nn.Module):
    """Two 3x3 convs with a skip connection (He et al.); a 1x1 conv on the skip when the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.skip: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.skip(x))


class ResNet(nn.Module):
    """CIFAR-style ResNet: a 3x3 stem at the first width, then one stage per width of `channels` of
    `blocks[s]` basic blocks (stride 2 into every stage after the first), global average pool, one linear
    layer."""

    def __init__(self, spec, n_outputs, channels=(16, 32, 64), blocks=(1, 1, 1)):
        super().__init__()
        C, width = spec.shape[0], channels[0]
        self.stem = nn.Sequential(
            nn.Conv2d(C, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()
        )
        layers, c = [], width
        for s, (w, n) in enumerate(zip(channels, blocks, strict=True)):
            for b in range(n):
                layers.append(BasicBlock(c, w, stride=2 if (s > 0 and b == 0) else 1))
                c = w
        self.stages = nn.Sequential(*layers)
        self.head = nn.Linear(c, n_outputs)

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.head(x.mean((2, 3)))


class ViT(nn.Module):
    """Vision Transformer: small patches (4x4 for 32x32 inputs), a CLS token, learnable position embeddings
    (truncated normal, std 0.02), dropout after adding them, post-norm blocks, a final LayerNorm on the CLS.
    `authors`: built as theirs (one block deep-copied `layers` times, the CLS token and positions drawn last),
    so the same generator state gives their initial weights."""

    def __init__(
        self, spec, n_outputs, width=64, layers=2, heads=4, mlp_ratio=2, patch=4, dropout=0.0, authors=False
    ):
        super().__init__()
        dim = width
        C, H, W = spec.shape
        patch = min(patch, H, W)
        self.patch_embed = nn.Conv2d(C, dim, patch, stride=patch)
        n_patches = (H // patch) * (W // patch)
        draw = (lambda t: t) if authors else (lambda t: nn.init.trunc_normal_(t, std=0.02))
        self.cls = nn.Parameter(draw(torch.zeros(1, 1, dim)))
        self.pos = nn.Parameter(draw(torch.zeros(1, n_patches + 1, dim)))
        self.drop = Dropout(dropout)
        self.blocks = block_stack(dim, heads, int(dim * mlp_ratio), layers, dropout, cloned=authors)
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, n_outputs)
        if authors:
            nn.init.trunc_normal_(self.cls, std=0.02)
            nn.init.trunc_normal_(self.pos, std=0.02)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # [B, N, dim]
        x = self.drop(torch.cat([self.cls.expand(len(x), -1, -1), x], dim=1) + self.pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x[:, 0]))


# drift/core/model_registry.py FAMILIES key -> class
FAMILIES: dict[str, type[nn.Module]] = {"mlp": MLP, "cnn": CNN, "resnet": ResNet, "vit": ViT}
