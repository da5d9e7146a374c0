"""The frozen vision encoders of the Yearbook preset read out as the authors' do, checked on random weights:
their model (Hugging Face's CLIPVisionModel and SiglipVisionModel, torchvision's ConvNeXt-S, as their
model/dataset/image/transfer_learning/{clip,siglip,convnext}.py build them) and ours (the timm architecture
the embed stage builds) holding the same weights, the 0-255 portrait upsampled to 224 bilinearly, no
normalisation. The weights are renamed from their layout to timm's here, key by key; nothing is downloaded."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from drift.encoders.vision import VisionEncoder

pytestmark = pytest.mark.compute  # its lane (tests/conftest.py): out of `make test-fast`


def portraits() -> tuple[np.ndarray, torch.Tensor]:
    """Two 3x32x32 uint8 portraits, and the 0-255 values upsampled to 224 as their forward_only_backend does."""
    images = np.random.default_rng(1).integers(0, 256, (2, 3, 32, 32), dtype=np.uint8)
    x = torch.nn.functional.interpolate(
        torch.from_numpy(images).float(), size=(224, 224), mode="bilinear", align_corners=False
    )
    return images, x


def hf_blocks(sd: dict, n: int) -> dict:
    """A Hugging Face CLIP/SigLIP encoder's layers under timm's VisionTransformer names (q, k, v stacked)."""
    out = {}
    for i in range(n):
        p, t = f"encoder.layers.{i}.", f"blocks.{i}."
        for w in ("weight", "bias"):
            out[f"{t}attn.qkv.{w}"] = torch.cat([sd[f"{p}self_attn.{x}_proj.{w}"] for x in "qkv"])
            for ours, theirs in (
                ("attn.proj", "self_attn.out_proj"),
                ("norm1", "layer_norm1"),
                ("norm2", "layer_norm2"),
                ("mlp.fc1", "mlp.fc1"),
                ("mlp.fc2", "mlp.fc2"),
            ):
                out[f"{t}{ours}.{w}"] = sd[f"{p}{theirs}.{w}"]
    return out


def encode(name: str, state: dict, tmp_path, images, activation=None) -> np.ndarray:
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / f"{name}.safetensors"))
    encoder = VisionEncoder(
        name,
        weights=str(tmp_path / f"{name}.safetensors"),
        device="cpu",
        image_input="raw",
        activation=activation,
    )
    return encoder.encode_batch(images)


def test_clip_is_their_pooler_output_with_quick_gelu(tmp_path):
    """CLIP-B/32: theirs CLIPVisionModel(pixel_values).pooler_output, the CLS token after post_layernorm, with
    OpenAI's QuickGELU (the config's hidden_act). timm's CLS-token pooling is the same read-out, but timm
    builds vit_base_patch32_clip_224 with exact GELU: with activation quick_gelu ours equal theirs, without
    they differ."""
    from transformers import CLIPVisionConfig, CLIPVisionModel

    torch.manual_seed(0)
    config = CLIPVisionConfig()  # ViT-B/32 at 224, as openai/clip-vit-base-patch32
    assert config.hidden_act == "quick_gelu" and (config.patch_size, config.image_size) == (32, 224)
    theirs_model = CLIPVisionModel(config).eval()
    sd = {k.removeprefix("vision_model."): v for k, v in theirs_model.state_dict().items()}
    state = hf_blocks(sd, config.num_hidden_layers) | {
        "cls_token": sd["embeddings.class_embedding"].view(1, 1, -1),
        "pos_embed": sd["embeddings.position_embedding.weight"][None],
        "patch_embed.proj.weight": sd["embeddings.patch_embedding.weight"],
        "norm_pre.weight": sd["pre_layrnorm.weight"],
        "norm_pre.bias": sd["pre_layrnorm.bias"],
        "norm.weight": sd["post_layernorm.weight"],
        "norm.bias": sd["post_layernorm.bias"],
    }
    images, x = portraits()
    with torch.no_grad():
        theirs = theirs_model(pixel_values=x).pooler_output.numpy()
    np.testing.assert_allclose(
        encode("clip-b32", state, tmp_path, images, "quick_gelu"), theirs, rtol=1e-4, atol=1e-4
    )
    assert np.abs(encode("clip-b32", state, tmp_path, images) - theirs).max() > 1e-3


def test_siglip_is_their_attention_pool_with_tanh_gelu(tmp_path):
    """SigLIP-B/16: theirs SiglipVisionModel(pixel_values).pooler_output, the multi-head attention pooling
    head over the post_layernorm'd patch tokens (no CLS token), with the tanh GELU (gelu_pytorch_tanh). timm's
    map pooling is that head; timm builds its blocks with exact GELU: with activation gelu_tanh ours equal
    theirs."""
    from transformers import SiglipVisionConfig, SiglipVisionModel

    torch.manual_seed(0)
    config = SiglipVisionConfig()  # ViT-B/16 at 224, as google/siglip-base-patch16-224
    assert config.hidden_act == "gelu_pytorch_tanh" and (config.patch_size, config.image_size) == (16, 224)
    theirs_model = SiglipVisionModel(config).eval()
    sd = {k.removeprefix("vision_model."): v for k, v in theirs_model.state_dict().items()}
    d = config.hidden_size
    state = hf_blocks(sd, config.num_hidden_layers) | {
        "pos_embed": sd["embeddings.position_embedding.weight"][None],
        "patch_embed.proj.weight": sd["embeddings.patch_embedding.weight"],
        "patch_embed.proj.bias": sd["embeddings.patch_embedding.bias"],
        "norm.weight": sd["post_layernorm.weight"],
        "norm.bias": sd["post_layernorm.bias"],
        "attn_pool.latent": sd["head.probe"],
        "attn_pool.q.weight": sd["head.attention.in_proj_weight"][:d],
        "attn_pool.q.bias": sd["head.attention.in_proj_bias"][:d],
        "attn_pool.kv.weight": sd["head.attention.in_proj_weight"][d:],
        "attn_pool.kv.bias": sd["head.attention.in_proj_bias"][d:],
    }
    for ours, theirs in (
        ("proj", "attention.out_proj"),
        ("norm", "layernorm"),
        ("mlp.fc1", "mlp.fc1"),
        ("mlp.fc2", "mlp.fc2"),
    ):
        state |= {f"attn_pool.{ours}.{w}": sd[f"head.{theirs}.{w}"] for w in ("weight", "bias")}
    images, x = portraits()
    with torch.no_grad():
        theirs = theirs_model(pixel_values=x).pooler_output.numpy()
    np.testing.assert_allclose(
        encode("siglip-b", state, tmp_path, images, "gelu_tanh"), theirs, rtol=1e-4, atol=1e-4
    )
    assert np.abs(encode("siglip-b", state, tmp_path, images) - theirs).max() > 1e-5


def test_convnext_is_their_avgpool_then_layernorm(tmp_path):
    """ConvNeXt-S: theirs torchvision's convnext_small, features, avgpool, classifier[0] (LayerNorm2d) and
    classifier[1] (flatten): the channel mean, then normalised. timm's convnext_small with num_classes=0 pools
    the same (head: avg, norm, flatten); holding the same weights (layer scales drawn, not 1e-6, so every
    block counts) the pooled vectors agree with the default activation."""
    import torchvision

    torch.manual_seed(0)
    tv = torchvision.models.convnext_small(weights=None).eval()
    with torch.no_grad():
        for name, p in tv.named_parameters():
            if name.endswith("layer_scale"):
                p.uniform_(0.2, 1.0)
    sd = tv.state_dict()
    state = {
        "stem.0.weight": sd["features.0.0.weight"],
        "stem.0.bias": sd["features.0.0.bias"],
        "stem.1.weight": sd["features.0.1.weight"],
        "stem.1.bias": sd["features.0.1.bias"],
        "head.norm.weight": sd["classifier.0.weight"],
        "head.norm.bias": sd["classifier.0.bias"],
    }
    for s in range(4):
        f = 1 + 2 * s  # torchvision: features[1, 3, 5, 7] the stages, features[2, 4, 6] the downsampling
        if s:
            state |= {
                f"stages.{s}.downsample.{j}.{w}": sd[f"features.{f - 1}.{j}.{w}"]
                for j in (0, 1)
                for w in ("weight", "bias")
            }
        j = 0
        while f"features.{f}.{j}.layer_scale" in sd:
            p, q = f"features.{f}.{j}.", f"stages.{s}.blocks.{j}."
            state[q + "gamma"] = sd[p + "layer_scale"].flatten()
            for ours, theirs in (
                ("conv_dw", "block.0"),
                ("norm", "block.2"),
                ("mlp.fc1", "block.3"),
                ("mlp.fc2", "block.5"),
            ):
                state |= {f"{q}{ours}.{w}": sd[f"{p}{theirs}.{w}"] for w in ("weight", "bias")}
            j += 1
    images, x = portraits()
    with torch.no_grad():
        theirs = tv.classifier[1](tv.classifier[0](tv.avgpool(tv.features(x)))).numpy()
    np.testing.assert_allclose(encode("convnext-s", state, tmp_path, images), theirs, rtol=1e-4, atol=1e-4)


def test_unknown_activation_is_one_line(tmp_path):
    from drift.core.errors import DriftError

    with pytest.raises(DriftError, match="quick_gelu"):
        VisionEncoder("clip-b32", weights=str(tmp_path), device="cpu", activation="swish")
