"""Image models trained from scratch (paper Section 3.2.1, Table 3): MLP, CNN, ResNet, ViT.

Each family at three sizes; the SIZES tables give the arguments, chosen so the trainable parameter counts
for a 3x32x32 input and 2 classes land on the paper's Table 3. Every model reads its input shape from the
spec, so other resolutions and channel counts work too. Inputs are used as given (no normalisation inside).
"""
import math

import torch
import torch.nn as nn

from drift.models.blocks import Block


class MLP(nn.Module):
    """Flatten the image, then fully connected layers: no spatial prior at all."""

    def __init__(self, spec, n_outputs, hidden=(32,)):
        super().__init__()
        C, H, W = spec.shape
        layers, d = [nn.Flatten()], C * H * W
        for h in hidden:
            layers += [nn.Linear(d, h), nn.ReLU()]
            d = h
        layers.append(nn.Linear(d, n_outputs))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    """Stages of (conv3x3 -> batch norm -> ReLU) x convs, each stage ending in a 2x2 max-pool; then an MLP head."""

    def __init__(self, spec, n_outputs, widths=(16, 32, 64), convs=1, hidden=64):
        super().__init__()
        C, H, W = spec.shape
        layers, c = [], C
        for w in widths:
            for _ in range(convs):
                layers += [nn.Conv2d(c, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU()]
                c = w
            layers.append(nn.MaxPool2d(2, ceil_mode=True))  # ceil: odd or tiny sizes never shrink to 0
            H, W = math.ceil(H / 2), math.ceil(W / 2)
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(c * H * W, hidden), nn.ReLU(), nn.Linear(hidden, n_outputs))

    def forward(self, x):
        return self.head(self.features(x))


class BasicBlock(nn.Module):
    """Two 3x3 convs with a skip connection (He et al.); a 1x1 conv on the skip when the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.skip = nn.Identity()
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.skip(x))


class ResNet(nn.Module):
    """CIFAR-style ResNet: a 3x3 stem, three stages (width, 2x, 4x; stride 2 between), global average pool."""

    def __init__(self, spec, n_outputs, width=16, blocks=1, stages=3):
        super().__init__()
        C = spec.shape[0]
        self.stem = nn.Sequential(nn.Conv2d(C, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        layers, c = [], width
        for s in range(stages):
            w = width * 2**s
            for b in range(blocks):
                layers.append(BasicBlock(c, w, stride=2 if (s > 0 and b == 0) else 1))
                c = w
        self.stages = nn.Sequential(*layers)
        self.head = nn.Linear(c, n_outputs)

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.head(x.mean((2, 3)))


class ViT(nn.Module):
    """Vision Transformer: small patches (4x4 for 32x32 inputs), a CLS token, learnable position embeddings."""

    def __init__(self, spec, n_outputs, dim=64, depth=2, heads=4, mlp_ratio=2, patch=4):
        super().__init__()
        C, H, W = spec.shape
        patch = min(patch, H, W)
        self.patch_embed = nn.Conv2d(C, dim, patch, stride=patch)
        n_patches = (H // patch) * (W // patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, n_patches + 1, dim) * 0.02)
        self.blocks = nn.ModuleList([Block(dim, heads, int(dim * mlp_ratio)) for _ in range(depth)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, n_outputs)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # [B, N, dim]
        x = torch.cat([self.cls.expand(len(x), -1, -1), x], dim=1) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x[:, 0]))


# family -> (class, paper family name, {size: arguments}); counts at 3x32x32 / 2 classes in the comments
SIZES = {
    "mlp": (MLP, "MLP", {
        "s": dict(hidden=(32,)),                      # 98k
        "m": dict(hidden=(128, 128)),                 # 410k
        "l": dict(hidden=(512, 512, 512)),            # 2.10M
    }),
    "cnn": (CNN, "CNN", {
        "s": dict(widths=(16, 32, 64), convs=1, hidden=68),      # 94k
        "m": dict(widths=(32, 64, 128), convs=2, hidden=124),    # 542k
        "l": dict(widths=(64, 128, 256), convs=2, hidden=224),   # 2.06M
    }),
    "resnet": (ResNet, "ResNet", {
        "s": dict(width=18, blocks=1),               # 98k
        "m": dict(width=24, blocks=2),               # 392k
        "l": dict(width=38, blocks=4),               # 2.07M
    }),
    "vit": (ViT, "ViT", {
        "s": dict(dim=64, depth=2, heads=4, mlp_ratio=2),     # 75k
        "m": dict(dim=128, depth=4, heads=4, mlp_ratio=2),    # 545k
        "l": dict(dim=160, depth=7, heads=5, mlp_ratio=4),    # 2.18M
    }),
}
