"""Heads declared in params.yaml `models:`: checked against their family's table of arguments (one line per
fault), built, counted, trained into a matrix, keyed by their size; the paper's sizes are the shipped
declarations and build what they built before."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import yaml

from drift.core import model_registry
from drift.core.errors import DriftError
from drift.core.model_registry import BUILT_IN, FAMILIES, MODELS, declare_models
from drift.core.params import TrainParams, load_params
from drift.evaluate.fill_matrices import EvalJob, evaluate_seed
from drift.models import (
    count_params,
    create_model,
    family_problems,
    model_params,
    reference_spec,
)
from drift.models.inputs import Inputs
from drift.protocol.tasks import get_task
from drift.run.checks import validate
from drift.store.cells import ResultCache, code_version, row_hashes
from drift.store.slices import hand_manifest
from drift.train.engine import train_many
from drift.train.loop import train_roster
from tests.helpers import ROOT, SHIPPED_PARAMS, drift_cli

TX_WIDE = {"family": "transformer", "layers": 2, "width": 512, "heads": 8, "ffn": 1024}
CNN_DEEP = {"family": "cnn", "channels": [32, 64, 128]}
DECLARED = {"tx-wide": TX_WIDE, "cnn-deep": CNN_DEEP}

# `drift models --json` before heads were declarations (trainable parameters at the reference setting), and a
# digest of each module's state-dict names and shapes in order, as create_model built it (modules ours,
# authors)
BEFORE = {
    "mlp-s": (98402, "b8807581f4ed1329", "b8807581f4ed1329"),
    "mlp-m": (410114, "fea029f05cd0ad24", "fea029f05cd0ad24"),
    "mlp-l": (2099714, "9e18b1558f34aa86", "9e18b1558f34aa86"),
    "cnn-s": (93730, "d3832eb5f0199bad", "824e120aa84c21fd"),
    "cnn-m": (541874, "db8976f09e2cb6d6", "9cc715fb4efc7335"),
    "cnn-l": (2143298, "189c5e38d08435c7", "426347c9c4105535"),
    "resnet-s": (97940, "bea7a367d6a9007b", "bea7a367d6a9007b"),
    "resnet-m": (400162, "00f2df7ae535e82b", "00f2df7ae535e82b"),
    "resnet-l": (2125818, "5c83bdf3dd366c85", "5c83bdf3dd366c85"),
    "vit-s": (74562, "1836fb08e89ca378", "1836fb08e89ca378"),
    "vit-m": (545154, "813d3ee1d7243ed3", "813d3ee1d7243ed3"),
    "vit-l": (2248514, "0cd13a45f10316e0", "0cd13a45f10316e0"),
    "ffn-s": (98561, "7e5de28ce2be877a", "7e5de28ce2be877a"),
    "ffn-m": (394241, "32b95907ee20f0c8", "32b95907ee20f0c8"),
    "ffn-l": (1576961, "215c6684ba7fa6e6", "215c6684ba7fa6e6"),
    "textcnn-s": (88225, "d20b64c9f37a7019", "363a1d71350cf00d"),
    "textcnn-m": (461201, "c27a9acf6bd70c26", "5a5af208ebb4f925"),
    "textcnn-l": (1918017, "519868f9c06de223", "ff5d0ff5e635e11c"),
    "bigru-s": (99265, "111d8d8c94cc78b6", "111d8d8c94cc78b6"),
    "bilstm-m": (535521, "76e5989e555c86dc", "76e5989e555c86dc"),
    "bilstm-attn-l": (2187362, "a86291d376398200", "a86291d376398200"),
    "tx-s": (82753, "5296c2faa7e88c78", "5296c2faa7e88c78"),
    "tx-m": (492577, "1e2550da4e6cccea", "1e2550da4e6cccea"),
    "tx-l": (1879361, "632f74dfa4c2dbf1", "632f74dfa4c2dbf1"),
}


@pytest.fixture(autouse=True)
def no_declarations():
    """Every test starts and ends with the built-in heads only."""
    declare_models({})
    yield
    declare_models({})


def params_with(declared=None, **train) -> dict:
    """The shipped params.yaml with these heads declared (`models:`) and these train keys set."""
    params = yaml.safe_load(SHIPPED_PARAMS.read_text())
    if declared is not None:
        params["models"] = declared
    params["train"].update(train)
    return params


def layout(model: torch.nn.Module) -> str:
    names = json.dumps([[k, list(v.shape)] for k, v in model.state_dict().items()])
    return hashlib.sha256(names.encode()).hexdigest()[:16]


@pytest.mark.compute
def test_every_built_in_head_builds_what_it_built_before():
    """The paper's S/M/L sizes, read from the shipped declarations by the code that reads the user's: the same
    state-dict names and shapes (our modules and the authors'), the same parameter counts."""
    assert set(BUILT_IN) == set(BEFORE) == {n for n, i in MODELS.items() if model_registry.family_of(i)}
    for name, (params, ours, authors) in BEFORE.items():
        spec, n_outputs = reference_spec(name)
        with torch.device("meta"):
            built = {m: create_model(name, spec, n_outputs, 0.1, m) for m in ("ours", "authors")}
        assert (count_params(built["ours"])[0], layout(built["ours"]), layout(built["authors"])) == (
            params,
            ours,
            authors,
        ), name


def test_the_classes_agree_with_the_family_table(monkeypatch):
    """drift/models refuses to import when a class's size arguments differ from its family's in the torch-free
    table (here: a default changed in the table)."""
    assert family_problems() == []
    cnn = FAMILIES["cnn"]
    edited = {**cnn.args, "channels": model_registry.Arg("ints", (16,), 1, 2048)}
    monkeypatch.setitem(FAMILIES, "cnn", model_registry.Family(cnn.family, cnn.input, cnn.dropout, edited))
    assert family_problems() == [
        "cnn: CNN takes {'channels': (32, 64, 128)}, the table says {'channels': (16,)}"
    ]


@pytest.mark.compute
def test_a_declared_heads_count_is_its_modules():
    load_params(params_with(DECLARED))
    assert MODELS["tx-wide"].args == (("width", 512), ("layers", 2), ("heads", 8), ("ffn", 1024))
    for name in ("tx-wide", "cnn-deep"):
        spec, n_outputs = reference_spec(name)
        assert model_params(name, spec, n_outputs) == count_params(create_model(name, spec, n_outputs))
    # cnn-deep declares cnn-s's arguments: the same module under another name
    assert model_params("cnn-deep", *reference_spec("cnn-deep")) == (93730, 93730)


@pytest.mark.compute
def test_drift_models_lists_declared_heads(tmp_path):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params_with(DECLARED), sort_keys=False))
    done = drift_cli("models", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = {r["name"]: r for r in json.loads(done.stdout)}
    spec, n_outputs = reference_spec("tx-wide")
    trainable = count_params(create_model("tx-wide", spec, n_outputs))[0]
    assert rows["tx-wide"] == {
        "name": "tx-wide",
        "family": "Transformer",
        "size": "-",
        "input": "tokens",
        "trainable_params": trainable,
        "total_params": trainable,
    }
    assert rows["cnn-deep"]["trainable_params"] == 93730 and rows["cnn-s"]["trainable_params"] == 93730


WRONG = [
    (
        {"family": "transformer", "depth": 2},
        "models.h.depth: not an argument of a transformer head: did you mean "
        "width? valid: family, ffn, heads, layers, width",
    ),
    ({"family": "transformer", "width": "512"}, "models.h.width: must be an integer in [1, 2048]; got '512'"),
    ({"family": "transformer", "width": True}, "models.h.width: must be an integer in [1, 2048]; got True"),
    ({"family": "transformer", "width": 0}, "models.h.width: must be an integer in [1, 2048]; got 0"),
    ({"family": "transformer", "layers": 100}, "models.h.layers: must be an integer in [1, 24]; got 100"),
    ({"family": "transformer", "width": 512, "heads": 7}, "models.h.heads: 7 heads do not divide width 512"),
    ({"family": "vit", "width": 96, "heads": 5}, "models.h.heads: 5 heads do not divide width 96"),
    ({"family": "vit", "mlp_ratio": 0.1}, "models.h.mlp_ratio: must be a number in [0.25, 4]; got 0.1"),
    (
        {"family": "cnn", "channels": 64},
        "models.h.channels: must be a list of 1 to 8 integers, each in [1, 2048]; got 64",
    ),
    (
        {"family": "cnn", "channels": [32, 0]},
        "models.h.channels: must be a list of 1 to 8 integers, each in [1, 2048]; got [32, 0]",
    ),
    (
        {"family": "resnet", "channels": [8, 16], "blocks": [1]},
        "models.h.blocks: one count per stage of channels (2); got 1",
    ),
    ({"family": "recurrent", "cell": "rnn"}, "models.h.cell: must be one of gru, lstm; got 'rnn'"),
    ({"family": "recurrent", "attention": "yes"}, "models.h.attention: must be true or false; got 'yes'"),
    (
        {"family": "transfomer"},
        "models.h.family: unknown family 'transfomer': did you mean transformer? valid: "
        "cnn, ffn, mlp, recurrent, resnet, textcnn, transformer, vit",
    ),
    (
        {"width": 64},
        "models.h.family: missing: name one of mlp, cnn, resnet, vit, ffn, textcnn, recurrent, transformer",
    ),
    (
        "transformer",
        "models.h: a head is declared as {family: ..., <size arguments>}, e.g. {family: transformer, "
        "layers: 2, width: 512, heads: 8, ffn: 1024}; got 'transformer'",
    ),
]


@pytest.mark.parametrize("declaration,line", WRONG)
def test_each_wrong_argument_is_one_exact_line(declaration, line):
    load_params(params_with({"tx-wide": TX_WIDE}))
    before = dict(MODELS)
    with pytest.raises(DriftError) as err:
        load_params(params_with({"h": declaration}))
    assert str(err.value) == line
    assert MODELS == before  # a refused declaration changes nothing


@pytest.mark.parametrize(
    "name,line",
    [
        ("cnn-s", "models.cnn-s: cnn-s is a built-in model already: name the head otherwise"),
        (
            "baseline-prior",
            "models.baseline-prior: baseline-prior is a built-in model already: name the head otherwise",
        ),
        (
            "probe-minilm",
            "models.probe-minilm: probe-minilm is a built-in model already: name the head otherwise",
        ),
        (
            "probe-mine",
            "models.probe-mine: names starting with probe- or baseline- are the probes' and the "
            "references': name the head otherwise",
        ),
        (
            "baseline-big",
            "models.baseline-big: names starting with probe- or baseline- are the probes' and the "
            "references': name the head otherwise",
        ),
        (
            "my head",
            "models: 'my head' is not a valid name: use letters, digits, '-', '_' and '.', starting with a "
            "letter, digit or '_' (at most 100 characters)",
        ),
    ],
)
def test_a_name_is_an_identifier_of_its_own(name, line):
    with pytest.raises(DriftError) as err:
        declare_models({name: CNN_DEEP})
    assert str(err.value) == line


def test_declarations_are_registered_on_every_load():
    from drift import models

    load_params(params_with(DECLARED))
    assert (
        list(MODELS)[24:26] == ["tx-wide", "cnn-deep"] and models.MODELS is MODELS
    )  # after the built-in heads
    load_params(params_with({"tx-wide": {**TX_WIDE, "width": 256}}))
    assert "cnn-deep" not in MODELS and dict(MODELS["tx-wide"].args)["width"] == 256
    load_params(params_with())
    assert "tx-wide" not in MODELS and list(MODELS)[:25] == [*BUILT_IN, "probe-dinov2-s"]


def test_a_roster_naming_a_declared_head_passes_the_check_stage():
    validate(load_params(params_with(DECLARED, models={"sotu": ["tx-wide", "ffn-s"]})), "sotu")
    with pytest.raises(DriftError, match="^cnn-deep is an image model; it cannot run on a text dataset$"):
        validate(load_params(params_with(DECLARED, models={"sotu": ["cnn-deep"]})), "sotu")
    with pytest.raises(DriftError, match="^unknown model 'tx-wide'"):
        validate(load_params(params_with(models={"sotu": ["tx-wide"]})), "sotu")


@pytest.mark.pipeline
def test_the_check_stage_reads_declarations_without_torch(tmp_path):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params_with(DECLARED, models={"sotu": ["tx-wide"]})))
    probe = (
        "import sys; from drift.core.params import load_params; from drift.run.checks import validate; "
        "validate(load_params('params.yaml'), 'sotu'); print(sorted(m for m in sys.modules if m == 'torch'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


N = 48


class TinyData:
    """What train_roster and evaluate_seed read of a SliceData: two slices of synthetic rows, token states of
    16 dimensions (a text dataset) or 3x8x8 pixels (an image one), regression targets."""

    def __init__(self, modality: str, seed: int = 5):
        rng = np.random.default_rng(seed)
        self.task = get_task("regression")
        self.labels = rng.integers(1, 6, N).astype(np.float32).tolist()
        self.slices = np.repeat(np.arange(2), N // 2)
        self.splits = np.where(rng.random(N) < 0.7, "train", "test").astype(object)
        self.manifest = hand_manifest("tiny", ["0", "1"], task="regression", label_names=["rating"])
        self.row_hashes = row_hashes([f"key{i}" for i in range(N)], self.labels, self.splits)
        self.paths = {"slices": Path("."), "features": Path(".")}
        self.usable = [True] * 2
        self.modality = modality
        self.n_outputs = 1
        if modality == "image":
            self._inputs = Inputs(
                "pixels", rng.integers(0, 256, (N, 3 * 8 * 8), dtype=np.uint8), image_shape=(3, 8, 8)
            )
        else:
            lengths = rng.integers(1, 5, N)
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
            self._inputs = Inputs(
                "tokens", rng.normal(size=(offsets[-1], 16)).astype(np.float16), offsets, max_tokens=16
            )

    def inputs(self, name):
        return self._inputs

    def usable_rows(self):
        return np.arange(N)

    def input_id(self, name):
        return self._inputs.kind


CFG = TrainParams(epochs=1, batch_size=64, lr=1e-3, weight_decay=0.01, seeds=[0])  # one step per cutoff


@pytest.mark.compute
@pytest.mark.parametrize(
    "name,modality,engine", [("tx-wide", "text", None), ("cnn-deep", "image", train_many)]
)
def test_a_declared_head_trains_into_a_matrix(tmp_path, name, modality, engine):
    """f_0 and f_1 trained (tx-wide by train_one, cnn-deep stacked by the batched engine), then evaluated."""
    load_params(params_with(DECLARED))
    data = TinyData(modality)
    cfg = CFG.model_copy(update={"engine": "batched" if engine else "solo"})
    assert train_roster(data, [name], cfg, tmp_path / "models", train_many=engine).counts["trained"] == 2
    checkpoints = {k: tmp_path / "models" / name / "seed0" / f"cutoff{k:03d}.pt" for k in range(2)}
    matrix, _, done, _ = evaluate_seed(
        EvalJob(data, name, 0, checkpoints, tmp_path / "cells", 1, code_version("evaluate"))
    )
    assert done["computed"] == 4 and len(matrix) == 2
    assert all(np.isfinite(cell) for row in matrix for cell in row)


@pytest.mark.compute
def test_a_size_changes_the_checkpoint_key(tmp_path):
    """A cached checkpoint is reused for the same declaration, trained again for another size."""
    data, cache = TinyData("text", seed=3), ResultCache(tmp_path / "cache")

    def trained(width: int) -> tuple[int, int]:
        load_params(params_with({"h": {"family": "transformer", "width": width, "heads": 2, "ffn": 16}}))
        counts = train_roster(data, ["h"], CFG, tmp_path / "models", cache).counts
        return counts["trained"], counts["reused"]

    assert trained(8) == (2, 0)
    assert trained(8) == (0, 2)  # the same declaration: from the cache
    assert trained(16) == (2, 0)  # another width: trained again


def test_a_worker_rebuilding_the_data_declares_the_heads(monkeypatch):
    """A Ray worker rebuilds SliceData from its recipe, which carries the stage's declared heads."""
    from drift.models import slice_data

    load_params(params_with(DECLARED))
    data = SimpleNamespace(_shipped=None, name="tiny", settings="settings", root=Path("."), _split_order=None)
    rebuild, args = slice_data.SliceData.__reduce__(data)  # type: ignore[arg-type]
    declare_models({})  # a fresh worker: the built-in heads only
    monkeypatch.setattr(slice_data, "SliceData", lambda *args: SimpleNamespace(args=args))
    assert rebuild(*args).args == ("tiny", "settings", Path("."))
    assert MODELS["tx-wide"].args == (("width", 512), ("layers", 2), ("heads", 8), ("ffn", 1024))
    assert "cnn-deep" in MODELS


def test_a_worker_rebuilding_the_data_declares_the_encoders_and_their_probes(monkeypatch):
    """The recipe carries the declared encoders' specs too: a worker trains and evaluates their probes."""
    import dataclasses

    from drift.core import encoder_registry
    from drift.models import slice_data

    load_params(params_with({}))
    spec = dataclasses.replace(encoder_registry.ENCODERS["minilm-l6"], name="mine", declared=True)
    monkeypatch.setitem(encoder_registry.DECLARED, "mine", spec)
    data = SimpleNamespace(_shipped=None, name="tiny", settings="settings", root=Path("."), _split_order=None)
    rebuild, args = slice_data.SliceData.__reduce__(data)  # type: ignore[arg-type]
    monkeypatch.delitem(encoder_registry.DECLARED, "mine")  # a fresh worker: the built-in encoders only
    monkeypatch.setattr(slice_data, "SliceData", lambda *args: SimpleNamespace(args=args))
    rebuild(*args)
    assert encoder_registry.ENCODERS["mine"] == spec and "probe-mine" in MODELS
    load_params(params_with({}))  # the next load drops them
    assert "mine" not in encoder_registry.ENCODERS and "probe-mine" not in MODELS


def test_plan_measures_a_declared_head_alone():
    """`drift plan` gives a family's sizes the rates of one of them, but measures a declared head itself,
    under a key naming its size arguments (a size changed is measured again)."""
    from drift.run.plan import BenchInput, bench_key, rate_group

    load_params(params_with(DECLARED))
    assert [rate_group(m) for m in ("tx-s", "tx-m", "tx-wide", "cnn-deep")] == [
        "Transformer",
        "Transformer",
        "tx-wide",
        "cnn-deep",
    ]
    spec = BenchInput("tokens", (768,), 100, 1, "regression", "text", 64)
    assert bench_key("tx-s", spec) == "tx-s | tokens 768 x100 tokens, regression, batch 64"
    wide = bench_key("tx-wide", spec)
    assert wide.startswith("tx-wide {'width': 512, 'layers': 2, 'heads': 8, 'ffn': 1024} | tokens 768")
    load_params(params_with({"tx-wide": {**TX_WIDE, "width": 256}}))
    assert bench_key("tx-wide", spec) != wide


def test_a_declared_heads_size_reruns_the_datasets_that_train_it(tmp_path):
    """The check stage writes the declarations of each dataset's own heads into data/checked/<ds>.train.json,
    which train and evaluate depend on (dvc.yaml): a changed width re-runs the dataset whose roster has the
    head, and leaves the others' record, so their stages, as they were."""
    from drift.core.paths import dataset_paths
    from drift.run.checks import write_checked

    def records(width: int) -> dict[str, str]:
        declared = {"tx-wide": {**TX_WIDE, "width": width}}
        params = load_params(
            params_with(declared, models={"sotu": ["tx-wide"], "synth-portraits": ["mlp-s"]})
        )
        write_checked(params, tmp_path)
        return {name: dataset_paths(name, tmp_path)["checked_train"].read_text() for name in params.datasets}

    narrow, wide = records(256), records(512)
    assert narrow["synth-portraits"] == wide["synth-portraits"] == '{\n  "dataset": "synth-portraits"\n}\n'
    assert narrow["sotu"] != wide["sotu"] and json.loads(wide["sotu"])["models"]["tx-wide"]["width"] == 512
    stages = yaml.safe_load((Path(__file__).resolve().parents[2] / "dvc.yaml").read_text())["stages"]
    for stage in ("train", "evaluate"):
        assert "data/checked/${key}.train.json" in stages[stage]["do"]["deps"], stage
