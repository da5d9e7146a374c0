"""Text encoders on another runtime (embed.backend): ONNX Runtime or OpenVINO on the CPU, in float32 or with
int8 weights (embed.quantize). The libraries do the work: torch.onnx.export (the dynamo exporter) or
openvino.convert_model export the transformer, onnxruntime.quantization.quantize_dynamic or NNCF's weight
compression quantise it, and the export is built once per encoder fingerprint into <cache_dir>/exports/ (never
into the weights' folder). TextEncoder tokenises, pools and stores exactly as with torch: only the forward
pass runs on the runtime. A module apart from text.py so that the torch encoder's fingerprint (text.py's
import closure) never records these runtimes' versions; this module's encoders record them."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import warnings
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from drift.core.errors import DriftError
from drift.encoders.text import TextEncoder

RUNTIMES = ("onnx", "openvino")  # embed.backend's choices besides torch
QUANTIZE = ("int8",)  # embed.quantize's choices besides null
# the distributions that build and run each backend's model: recorded in its fingerprint (another version,
# another table), whatever the library lists of the cache keys hold
BUILT_BY = {
    "onnx": ("onnx", "onnxscript", "onnx-ir", "onnxruntime"),
    "openvino": ("openvino",),
    "openvino-int8": ("openvino", "nncf"),
}
EXTRA = "pip install 'drift[backends]'"  # pyproject.toml's extra that installs them


def runtime_versions(backend: str, quantize: str | None) -> dict[str, str | None]:
    """{distribution: installed version or None} of the libraries that export and run `backend`."""
    names = BUILT_BY.get(f"{backend}-{quantize}", BUILT_BY[backend])
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


class _Forward(torch.nn.Module):
    """The transformer's forward pass on the tokenizer's tensors, returning its last hidden states (and its
    pooler output when `pooler`): the graph the exporters trace."""

    def __init__(self, model: torch.nn.Module, pooler: bool):
        super().__init__()
        self.model, self.pooler = model, pooler

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, **extra)
        return (out.last_hidden_state, out.pooler_output) if self.pooler else out.last_hidden_state


def export_onnx(forward: _Forward, example: dict, folder: Path, quantize: str | None) -> None:
    """folder/model.onnx: torch.onnx.export's dynamo export of `forward` (batch and sequence dynamic); int8:
    onnxruntime's dynamic quantisation of it with Optimum's avx2 preset (unsigned int8 weights, symmetric, per
    channel; activations quantised per batch at run time), as sentence-transformers' model_quint8_avx2.onnx.
    """
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    outputs = ["last_hidden_state", "pooler_output"] if forward.pooler else ["last_hidden_state"]
    target = folder / ("float32.onnx" if quantize else "model.onnx")
    with torch.no_grad():
        torch.onnx.export(
            forward,
            (),
            str(target),
            kwargs=example,
            output_names=outputs,
            dynamic_shapes={name: {0: batch, 1: sequence} for name in example},
            dynamo=True,
            verbose=False,
        )
    if quantize:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(
            target,
            folder / "model.onnx",
            per_channel=True,
            reduce_range=False,
            weight_type=QuantType.QUInt8,
            extra_options={"WeightSymmetric": True},
        )
        for leftover in folder.glob("float32.onnx*"):
            leftover.unlink()


def export_openvino(forward: _Forward, example: dict, folder: Path, quantize: str | None) -> None:
    """folder/model.xml (+ .bin): openvino.convert_model of `forward` (its PyTorch frontend; shapes dynamic),
    weights kept float32; int8: NNCF's INT8_ASYM weight compression (optimum-intel's load_in_8bit), the CPU
    plugin quantising activations at run time where it does so."""
    import openvino as ov

    with torch.no_grad():
        model = ov.convert_model(forward, example_input=example)
    if quantize:
        import nncf

        model = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT8_ASYM)
    ov.save_model(model, folder / "model.xml", compress_to_fp16=False)


class RuntimeModel:
    """Stands in for the transformer in TextEncoder.encode_flat: called with the tokenizer's tensors, it runs
    the exported model on the CPU and returns last_hidden_state (the padding's states zeroed) and
    pooler_output as float32 torch tensors."""

    def __init__(self, backend: str, folder: Path, config, threads: int):
        self.backend, self.config = backend, config
        if backend == "onnx":
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
            options.log_severity_level = 3  # errors only
            self.session = ort.InferenceSession(
                str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"]
            )
            self.inputs = [i.name for i in self.session.get_inputs()]
        else:
            import openvino as ov

            # f32: a CPU with bf16 units would otherwise compute in bf16 by default
            hints: dict = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": threads}
            if os.environ.get("ONEDNN_MAX_CPU_ISA"):
                # OpenVINO's own oneDNN obeys the portable path's cap: on an AVX-512 CPU its dynamically
                # quantised int8 layers then have no kernel and fail to build. Capped, activations stay float32
                hints["DYNAMIC_QUANTIZATION_GROUP_SIZE"] = 0
            self.compiled = ov.Core().compile_model(str(folder / "model.xml"), "CPU", hints)
            self.inputs = [i.get_any_name() for i in self.compiled.inputs]

    def __call__(self, **batch) -> SimpleNamespace:
        feed = {name: np.ascontiguousarray(batch[name].cpu().numpy()) for name in self.inputs}
        if self.backend == "onnx":
            outputs = self.session.run(None, feed)
        else:
            result = self.compiled(feed)
            outputs = [result[i] for i in range(len(self.compiled.outputs))]
        tensors = [torch.from_numpy(np.asarray(o, dtype=np.float32)) for o in outputs]
        hidden = tensors[0]
        # the padding's states are never stored nor pooled, but may come back NaN (OpenVINO's ModernBERT)
        # where torch's are finite, and NaN x 0 in the masked mean is NaN: zeroed
        hidden[~batch["attention_mask"].bool()] = 0.0
        return SimpleNamespace(
            last_hidden_state=hidden, pooler_output=tensors[1] if len(tensors) > 1 else None
        )


class RuntimeTextEncoder(TextEncoder):
    """A TextEncoder whose forward pass runs on ONNX Runtime or OpenVINO (`backend`), float32 or with int8
    weights (`quantize`), on the CPU with torch's thread count. The export is built on first use into
    `export_dir`/<name>-<backend>[-int8]-<fingerprint>/ and loaded from there after; the backend, the
    quantisation and the runtimes' versions are fields of the fingerprint (another table than torch's)."""

    def __init__(
        self, name: str, backend: str, quantize: str | None = None, export_dir: Path | None = None, **kwargs
    ):
        if backend not in RUNTIMES:
            raise DriftError(f"embed.backend must be torch, {' or '.join(RUNTIMES)}, got {backend!r}")
        if quantize is not None and quantize not in QUANTIZE:
            raise DriftError(f"embed.quantize must be null or {', '.join(QUANTIZE)}, got {quantize!r}")
        device = kwargs.pop("device", None) or "cpu"
        if device != "cpu":
            raise DriftError(
                f"embed.backend {backend} runs on the CPU: set embed.device to cpu or null, or embed.backend to torch"
            )
        if export_dir is None:
            raise DriftError(f"embed.backend {backend} needs a folder for its export (embed.cache_dir)")
        self.backend, self.quantize = backend, quantize
        super().__init__(name, device="cpu", **kwargs)
        tag = f"{backend}-{quantize}" if quantize else backend
        self.export_path = Path(export_dir) / f"{self.spec.name}-{tag}-{self.fingerprint_hash()[:16]}"
        if not self.export_path.is_dir():
            self._build()
        try:
            self.model = RuntimeModel(backend, self.export_path, self.model.config, torch.get_num_threads())
        except ImportError as e:
            raise DriftError(f"embed.backend {backend} needs {e.name or 'its runtime'}: {EXTRA}") from e

    def fingerprint_fields(self) -> dict:
        fields = {**super().fingerprint_fields(), "backend": self.backend}
        if self.quantize is not None:
            fields["quantize"] = self.quantize
        fields["runtime"] = runtime_versions(self.backend, self.quantize)
        return fields

    def _build(self) -> None:
        """Export into a temporary folder beside the target and rename it into place: a reader sees a whole
        export or none; of two processes building at once, the first rename wins and the other's is dropped.
        """
        self.export_path.parent.mkdir(parents=True, exist_ok=True)
        example = dict(
            self.tokenizer(["an example", "and a longer example text"], padding=True, return_tensors="pt")
        )
        sliding = "sliding_attention" in (getattr(self.model.config, "layer_types", None) or [])
        if self.backend == "openvino" and sliding:
            # OpenVINO's frontend turned torch's fused attention under a sliding-window mask (ModernBERT's
            # local layers) into NaN vectors for some rows of a batch padded past the window; the plain
            # attention converts exactly (the others keep the fused one, about 4 % faster here)
            self.model.set_attn_implementation("eager")
        forward = _Forward(self.model, pooler=self.spec.pooling == "pooler").eval()
        build = export_onnx if self.backend == "onnx" else export_openvino
        tmp = Path(tempfile.mkdtemp(prefix=f".{self.export_path.name}-", dir=self.export_path.parent))
        try:
            try:
                # the exporters' notes on tracing are not the user's concern; their progress goes to stderr
                with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
                    warnings.simplefilter("ignore")
                    build(forward, example, tmp, self.quantize)
            except ImportError as e:
                raise DriftError(
                    f"embed.backend {self.backend} needs {e.name or 'its exporter'}: {EXTRA}"
                ) from e
            except Exception as e:  # an architecture the exporter cannot trace
                reason = " ".join(str(e).split())[:300]
                raise DriftError(
                    f"cannot export encoder {self.spec.name} to {self.backend}: {reason}; set embed.backend to torch"
                ) from e
            (tmp / "fingerprint.json").write_text(json.dumps(self.fingerprint(), indent=1, sort_keys=True))
            try:
                os.replace(tmp, self.export_path)
            except OSError:
                if not self.export_path.is_dir():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
