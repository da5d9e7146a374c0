"""The files stages hand each other are pydantic models (drift.core.artefact.Artefact): the committed files
round-trip through them byte for byte, a damaged or foreign file fails in one line naming it and the stage to
re-run, the closed sets agree with the tables they come from, and docs/architecture.md lists their fields."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import get_args

import pytest

from drift.core.artefact import Artefact, Executor, MetricName, Modality, TaskName
from drift.core.errors import DriftError
from drift.data.ingest_counts import FileCounts, IngestCounts
from drift.encoders.embed import EmbedRun
from drift.evaluate.eval_result import EstimateMethod, EvalResult, EvaluateRun
from drift.report.metrics_file import Estimate, ModelMetrics, Protocols
from drift.store.embeddings import EmbeddingsManifest, StoreManifest
from drift.store.slices import SliceInfo, SliceManifest, hand_manifest, read_slice_manifest
from drift.train.train_run import TrainRun
from tests.helpers import ROOT

# every model of a file a stage writes, and the nested models whose fields the contracts list
DOCUMENTED = [
    SliceManifest,
    SliceInfo,
    EmbeddingsManifest,
    StoreManifest,
    EmbedRun,
    IngestCounts,
    FileCounts,
    TrainRun,
    EvalResult,
    EvaluateRun,
    ModelMetrics,
    Protocols,
    Estimate,
]
COMMITTED = sorted((ROOT / "metrics").glob("*/*.json"))


def model_of(path: Path) -> type[Artefact]:
    return IngestCounts if path.parent.name == "ingest" else ModelMetrics


@pytest.mark.parametrize("path", COMMITTED, ids=[str(p.relative_to(ROOT)) for p in COMMITTED])
def test_committed_metrics_round_trip_byte_for_byte(path):
    read = model_of(path).from_file(path, path.parent.name)
    assert read.dumps() == path.read_text()
    # and again from the python values alone (what a writer holds), not the parsed file
    assert type(read).model_validate(read.as_json()).dumps() == path.read_text()


def test_committed_metrics_are_there():
    assert {p.parent.name for p in COMMITTED} >= {"ingest", "sotu", "synth-portraits"}
    assert any("estimate" in json.loads(p.read_text()) for p in COMMITTED)


def manifest_dict() -> dict:
    m = hand_manifest("toy", ["1990s", "2000s"], label_names=["a", "b"])
    return {**m.as_json(), "rows": 4, "digest": "0" * 64}


@pytest.mark.parametrize(
    "damage, where",
    [
        (lambda d: d.pop("task"), "task"),  # an older file, without a field
        (lambda d: d.update(encoder="minilm-l6"), "encoder"),  # another version's key
        (lambda d: d.update(task="binomial"), "task"),  # outside the closed set
        (lambda d: d["slices"][1].update(usable="perhaps"), "slices.1.usable"),
    ],
)
def test_a_foreign_slice_manifest_fails_in_one_line(tmp_path, damage, where):
    data = manifest_dict()
    damage(data)
    path = tmp_path / "data/slices/toy.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    with pytest.raises(DriftError) as e:
        read_slice_manifest(path.with_suffix(".lance"))
    message = str(e.value)
    assert "\n" not in message and str(path) in message and where in message, message
    assert message.endswith("re-run `dvc repro -f slice@toy`"), message


def test_a_damaged_file_fails_in_one_line(tmp_path):
    path = tmp_path / "data/eval/sotu/ffn-s.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"dataset": "sotu", "model": ')  # cut short (a full disk, a killed copy)
    with pytest.raises(DriftError, match=r"ffn-s.json is damaged .*: re-run `dvc repro -f evaluate@sotu`$"):
        EvalResult.from_file(path, "sotu")
    with pytest.raises(DriftError, match=r"missing: run `dvc repro report@sotu` first$"):
        ModelMetrics.from_file(tmp_path / "metrics/sotu/nothing.json", "sotu")


def test_the_readers_validate(tmp_path):
    """The readers of the stages after embed and of the report stage stop at a file of another version."""
    from drift.report.results import load_results
    from drift.store.slice_table import SliceTable

    # the embed stage's manifest of an earlier version: one encoder's entry at the top level
    for folder in ("slices", "embeddings"):
        (tmp_path / "data" / folder).mkdir(parents=True)
    (tmp_path / "data/slices/toy.lance").write_bytes(b"")
    (tmp_path / "data/slices/toy.json").write_text(json.dumps(manifest_dict()))
    (tmp_path / "data/embeddings/toy.json").write_text(
        json.dumps({"encoder": "minilm-l6", "fingerprint": "f"})
    )
    with pytest.raises(
        DriftError, match=r"toy.json is not a valid embeddings manifest .*`dvc repro -f embed@toy`"
    ):
        SliceTable("toy", tmp_path)
    # a metrics file without its direction
    path = tmp_path / "metrics/sotu/ffn-s.json"
    path.parent.mkdir(parents=True)
    good = json.loads((ROOT / "metrics/sotu/ffn-s.json").read_text())
    path.write_text(json.dumps({k: v for k, v in good.items() if k != "higher_is_better"}))
    with pytest.raises(
        DriftError, match=r"ffn-s.json is not a valid metrics file .*higher_is_better.*report@sotu"
    ):
        load_results(tmp_path / "metrics", "sotu")


def test_optional_fields_stay_out_of_the_file_until_set():
    record = TrainRun(
        dataset="toy",
        trained=2,
        reused=1,
        recomputed={"corrupt": 0},
        executor="local",
        workers=1,
        engines={"ffn-s": "batched"},
    )
    assert list(json.loads(record.dumps())) == [
        "dataset",
        "trained",
        "reused",
        "recomputed",
        "executor",
        "workers",
        "engines",
    ]
    timing = {"model": "ffn-s", "checkpoints": 3, "row_passes": 120, "seconds": 2}
    timed = TrainRun.parse(
        {**json.loads(record.dumps()), "timings": [timing, {**timing, "seconds": 1.5}]}, "t", "toy"
    )
    assert [t["seconds"] for t in json.loads(timed.dumps())["timings"]] == [2, 1.5]  # an int stays an int
    assert TrainRun.model_validate_json(timed.dumps()).dumps() == timed.dumps()
    with pytest.raises(DriftError, match="engines.ffn-s"):
        TrainRun.parse({**record.as_json(), "engines": {"ffn-s": "turbo"}}, "x", "toy")
    # the text encoder's entry has no with_tokens, a probe encoder's says false: both kept as they were
    entry = {
        "encoder": "e",
        "fingerprint": "f",
        "fingerprint_fields": {"pooling": None},
        "store": "s",
        "dim": 4,
        "rows": 2,
        "keys_sha256": "k",
    }
    for extra in ({}, {"with_tokens": False}):
        text = json.dumps({"encoders": {"e": {**entry, **extra}}}, indent=2) + "\n"
        assert EmbeddingsManifest.model_validate_json(text).dumps() == text


def test_closed_sets_agree_with_their_tables():
    from drift.core.dataset_registry import DATASETS
    from drift.core.params import EXECUTORS
    from drift.evaluate.estimate import METHODS
    from drift.protocol.summary import REFERENCES
    from drift.protocol.tasks import TASKS

    assert set(get_args(TaskName)) == set(TASKS)
    assert set(get_args(MetricName)) == {t.metric for t in TASKS.values()} | {
        m for t in TASKS.values() for m in t.also
    }
    assert set(get_args(EstimateMethod)) == {m for methods in METHODS.values() for m in methods}
    assert set(get_args(Estimate.model_fields["method"].annotation)) == set(get_args(EstimateMethod))
    assert set(get_args(Executor)) == set(EXECUTORS)
    assert {d.modality for d in DATASETS.values()} <= set(get_args(Modality))
    margins = {f for f in ModelMetrics.model_fields if f.startswith("margin_")}
    assert margins == {f"margin_{key}" for key in REFERENCES}


def documented_fields() -> dict[str, list[str]]:
    """{model: its fields} as docs/architecture.md's contracts list them: "`Model` fields: `a`, `b` and `c`",
    a parenthesis (the module) allowed before the colon."""
    text = (ROOT / "docs/architecture.md").read_text()
    contracts = text.split("## Contracts", 1)[1].split("\n## ", 1)[0]
    found = {}
    for name, listing in re.findall(
        r"`(\w+)`\s+fields(?:\s+\([^)]*\))?:\s+((?:`[\w-]+`(?:,\s+|\s+and\s+)?)+)", contracts
    ):
        assert name not in found, f"{name}'s fields are listed twice in docs/architecture.md"
        found[name] = re.findall(r"`([\w-]+)`", listing)
    return found


def test_the_contracts_in_the_docs_list_every_models_fields():
    documented = documented_fields()
    stage_models = {cls.__name__ for cls in Artefact.__subclasses__()}
    assert stage_models <= {cls.__name__ for cls in DOCUMENTED}, (
        "a stage's file with no line in the contracts"
    )
    for cls in DOCUMENTED:
        fields = [f.alias or name for name, f in cls.model_fields.items()]
        assert documented.get(cls.__name__) == fields, (
            f"docs/architecture.md lists {cls.__name__}'s fields as {documented.get(cls.__name__)}; the model "
            f"has {fields}: make them agree"
        )
