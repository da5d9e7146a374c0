"""Frozen encoders of the study (paper Tables 4, 12, 20), by registry name.

`source` says which library loads the weights: "sentence-transformers" and "hf" (transformers AutoModel) for
text, "timm" for vision; weights come from a local directory or the Hugging Face cache, never a download at
run time. `pooling` makes the pooled vector: "mean" of the last hidden states over real tokens (every text
encoder; TextEncoder(pooling="cls") overrides it), "cls" the first token, "timm" the model's own head pooling
taken before the classifier. The encoders stay frozen, never fine-tuned. `dim` and `image_size` are checked
against timm in tests/test_encoders.py."""

from __future__ import annotations

from dataclasses import dataclass

from drift.core.errors import DriftError, close_matches

POOLINGS = ("mean", "cls", "pooler")  # embed.pooling: token mean, first token, the model's own pooler output
DTYPES = ("float32", "bfloat16", "float16")  # embed.dtype: bfloat16 / float16 use autocast on a GPU


def autocast_dtype(dtype: str, compute_dtype: str | None, device: str) -> str | None:
    """The dtype an encoder's forward pass autocasts to, or None for plain float32: `compute_dtype` when set,
    else the stored `dtype` (embed.compute_dtype null); never on the CPU, which computes in float32."""
    compute = compute_dtype or dtype
    return None if compute == "float32" or device == "cpu" else compute


@dataclass(frozen=True)
class EncoderSpec:
    name: str  # registry name, e.g. "minilm-l6"
    display: str  # as the paper writes it, e.g. "MiniLM-L6"
    modality: str  # "text" | "image"
    source: str  # "sentence-transformers" | "hf" | "timm"
    hub_id: str  # Hugging Face / timm id
    dim: int  # width of the pooled vector (and of token states, for text)
    pooling: str  # "mean" | "cls" | "timm"
    image_size: int = 0  # vision: input resolution the 32x32 portraits are resized to
    positions: int = 512  # text: the most tokens its position table holds (embed.max_length's bound)
    # vision: the same network in torchvision, "<builder>:<weights enum>.<member>" (embed.image_source torchvision)
    torchvision: str = ""


# The frozen encoders' own parameter counts (paper Tables 4, 12, 20: total minus the trainable head), for
# `drift models` without loading any weights.
ENCODER_PARAMS = {
    "dinov3-s": 21_600_000,
    "vit-s16-in21k": 21_700_000,
    "dinov2-s": 22_100_000,
    "resnet50-in": 23_500_000,
    "convnext-s": 49_500_000,
    "eva02-b": 85_800_000,
    "mae-b": 85_800_000,
    "clip-b32": 87_500_000,
    "siglip-b": 92_900_000,
    "minilm-l6": 22_700_000,
    "distilbert": 66_400_000,
    "electra": 108_900_000,
    "bert": 109_500_000,
    "mpnet": 109_500_000,
    "roberta": 124_600_000,
    "modernbert": 149_000_000,
    "deberta-v3": 183_800_000,
}


ENCODERS: dict[str, EncoderSpec] = {
    e.name: e
    for e in [
        # vision (Table 4): linear probe on the pooled features
        EncoderSpec(
            "dinov2-s", "DINOv2-S", "image", "timm", "vit_small_patch14_dinov2.lvd142m", 384, "timm", 224
        ),
        EncoderSpec(
            "dinov3-s", "DINOv3-S", "image", "timm", "vit_small_patch16_dinov3.lvd1689m", 384, "timm", 224
        ),
        EncoderSpec(
            "clip-b32", "CLIP-B32", "image", "timm", "vit_base_patch32_clip_224.openai", 768, "timm", 224
        ),
        EncoderSpec(
            "siglip-b", "SigLIP-B", "image", "timm", "vit_base_patch16_siglip_224.webli", 768, "timm", 224
        ),
        # ImageNet-1k weights, as the paper: timm's fb_in1k is the ConvNeXt authors' own IN-1k run; the authors of
        # the study load torchvision's IMAGENET1K_V1, another training of the same network (embed.image_source)
        EncoderSpec(
            "convnext-s",
            "ConvNeXt-S",
            "image",
            "timm",
            "convnext_small.fb_in1k",
            768,
            "timm",
            224,
            torchvision="convnext_small:ConvNeXt_Small_Weights.IMAGENET1K_V1",
        ),
        EncoderSpec("resnet50-in", "ResNet50-IN", "image", "timm", "resnet50.a1_in1k", 2048, "timm", 224),
        EncoderSpec(
            "vit-s16-in21k",
            "ViT-S16-IN21k",
            "image",
            "timm",
            "vit_small_patch16_224.augreg_in21k",
            384,
            "timm",
            224,
        ),
        EncoderSpec("mae-b", "MAE-B", "image", "timm", "vit_base_patch16_224.mae", 768, "timm", 224),
        EncoderSpec(
            "eva02-b", "EVA02-B", "image", "timm", "eva02_base_patch14_224.mim_in22k", 768, "timm", 224
        ),
        # text (Tables 12, 20): linear probe on the pooled vector; token states feed the text heads
        EncoderSpec("bert", "BERT", "text", "hf", "bert-base-uncased", 768, "mean"),
        EncoderSpec("roberta", "RoBERTa", "text", "hf", "roberta-base", 768, "mean"),
        EncoderSpec("deberta-v3", "DeBERTa-v3", "text", "hf", "microsoft/deberta-v3-base", 768, "mean"),
        EncoderSpec("electra", "ELECTRA", "text", "hf", "google/electra-base-discriminator", 768, "mean"),
        EncoderSpec("mpnet", "MPNet", "text", "hf", "microsoft/mpnet-base", 768, "mean"),
        EncoderSpec(
            "modernbert",
            "ModernBERT",
            "text",
            "hf",
            "answerdotai/ModernBERT-base",
            768,
            "mean",
            positions=8192,
        ),
        EncoderSpec("distilbert", "DistilBERT", "text", "hf", "distilbert-base-uncased", 768, "mean"),
        EncoderSpec(
            "minilm-l6",
            "MiniLM-L6",
            "text",
            "sentence-transformers",
            "sentence-transformers/all-MiniLM-L6-v2",
            384,
            "mean",
        ),
    ]
}


def get_encoder_spec(name: str) -> EncoderSpec:
    if name not in ENCODERS:
        raise DriftError(f"unknown encoder {name!r}: {close_matches(name, ENCODERS)}")
    return ENCODERS[name]


def declare_encoders(declarations: dict) -> None:
    """Register the encoders params.yaml declares (`encoders:` name -> {library, id, ...}) beside the built-in
    ones, replacing those an earlier call declared; a bad declaration is a one-line DriftError."""
    if declarations:
        raise DriftError("params.yaml `encoders:`: declared encoders are not supported yet")
