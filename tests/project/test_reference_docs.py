"""docs/reference/ and params.schema.json are what drift/cli/reference_docs.py writes from the code: the
committed files are current, the schema holds the shipped params and every preset and refuses what load_params
refuses, and a change in the code or the results shows as a stale file."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from drift.cli.reference_docs import COMMAND, PICTURE, REFERENCE, SCHEMA, main, stale, write
from drift.core.errors import DriftError
from drift.core.params import load_params
from drift.core.presets import apply_preset, list_presets, merged_document
from drift.data.datasets import check_datasets
from tests.helpers import SHIPPED_PARAMS

ROOT = Path(__file__).resolve().parents[2]
PRESETS = ROOT / "params"
SCHEMA_LINE = "# yaml-language-server: $schema="


@pytest.fixture(scope="module")
def shipped_source(tmp_path_factory) -> Path:
    """The inputs as committed: the shipped params.yaml (a preset applied in this checkout changes neither the
    pages nor the schema) beside this checkout's metrics/ and plots/ (the home page's picture)."""
    source = tmp_path_factory.mktemp("source")
    shutil.copy(SHIPPED_PARAMS, source / "params.yaml")
    (source / "metrics").symlink_to(ROOT / "metrics")
    (source / "plots").symlink_to(ROOT / "plots")
    return source


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads((ROOT / SCHEMA).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def read_yaml_as_an_editor(path: Path):
    """YAML 1.2, as yaml-language-server reads it."""
    return YAML(typ="safe", pure=True).load(path.read_text())


def test_the_committed_pages_are_what_the_code_writes(shipped_source):
    found = stale(ROOT, source=shipped_source)
    assert not found, f"stale: {', '.join(found)}: run `{COMMAND}`"


def test_each_page_is_markdown_with_a_title():
    for name in ("cli", "params", "models", "encoders", "results"):
        text = (ROOT / REFERENCE / f"{name}.md").read_text()
        assert text.startswith("# ") and text.endswith("\n") and not text.endswith("\n\n"), name


def test_params_files_name_the_schema():
    for params in (ROOT / "params.yaml", SHIPPED_PARAMS):
        assert params.read_text().startswith(f"{SCHEMA_LINE}params.schema.json\n"), params
    for preset in PRESETS.glob("*.yaml"):
        assert preset.read_text().startswith(f"{SCHEMA_LINE}../params.schema.json\n"), preset.name


def test_the_schema_holds_the_shipped_params_and_every_preset(validator):
    documents = {"params.yaml": read_yaml_as_an_editor(SHIPPED_PARAMS)}
    for preset in list_presets(PRESETS):
        documents[f"{preset}.yaml"] = read_yaml_as_an_editor(PRESETS / f"{preset}.yaml")
        documents[f"params.yaml with {preset}"] = merged_document(preset, SHIPPED_PARAMS, PRESETS)
    assert len(documents) >= 4
    for name, document in documents.items():
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]
        assert not errors, f"{name}: {errors}"


def _shipped(**changes) -> dict:
    document = copy.deepcopy(read_yaml_as_an_editor(SHIPPED_PARAMS))
    for dotted, value in changes.items():
        *parents, key = dotted.split("__")
        node = document
        for parent in parents:
            node = node.setdefault(parent, {})
        node[key] = value
    return document


REFUSED = {
    "a misspelt section": {"trian": {"epochs": 3}},
    "a misspelt key": {"train__epoch": 3},
    "a misspelt key of a dataset's section": {"sotu__min_word": 10},
    "negative epochs": {"train__epochs": -1},
    "a test fraction of 2": {"split__test_fraction": 2},
    "dropout 1": {"train__dropout": 1.0},
    "no such engine": {"train__engine": "fast"},
    "no strata": {"split__stratify": []},
    "a dataset's source written in its section": {"sotu__source": "data/raw/sotu"},
}


@pytest.mark.parametrize("changes", REFUSED.values(), ids=REFUSED.keys())
def test_the_schema_refuses_what_load_params_refuses(validator, changes):
    document = _shipped(**changes)
    assert list(validator.iter_errors(document))
    with pytest.raises(DriftError):
        check_datasets(load_params(document))


def test_the_schema_takes_a_table_of_your_own_and_a_datasets_own_train(validator):
    table = {"kind": "table", "time": "opened", "label": "category", "task": "multiclass", "text": ["body"]}
    document = _shipped(mine=table, sotu__train={"epochs": 20})
    document["datasets"]["mine"] = {"input": "t.jsonl"}
    assert not list(validator.iter_errors(document))
    load_params(document)


def test_a_preset_keeps_the_schema_line(tmp_path):
    shutil.copy(SHIPPED_PARAMS, tmp_path / "params.yaml")
    apply_preset(list_presets(PRESETS)[0], tmp_path / "params.yaml", PRESETS)
    lines = (tmp_path / "params.yaml").read_text().splitlines()
    assert lines[0] == f"{SCHEMA_LINE}params.schema.json"
    assert sum(line.startswith(SCHEMA_LINE) for line in lines) == 1


@pytest.fixture(scope="module")
def generated(tmp_path_factory, shipped_source) -> Path:
    """Every file written from the committed inputs into a folder of its own."""
    out = tmp_path_factory.mktemp("generated")
    assert sorted(write(out, source=shipped_source)) == sorted(
        [
            *(f"{REFERENCE}/{n}.md" for n in ("cli", "params", "models", "encoders", "results")),
            SCHEMA,
            PICTURE,
        ]
    )
    return out


def test_check_names_each_stale_file_and_the_command(tmp_path, generated, capsys):
    out = tmp_path / "out"
    shutil.copytree(generated, out)
    # a page edited by hand, the schema deleted
    (out / REFERENCE / "cli.md").write_text((out / REFERENCE / "cli.md").read_text() + "edited\n")
    (out / SCHEMA).unlink()
    assert main(["--check", "--out", str(out)]) == 1
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and said.startswith("stale: ") and said.endswith(f": run `{COMMAND}`\n")
    assert f"{REFERENCE}/cli.md" in said and SCHEMA in said


def test_a_schema_registry_or_results_change_makes_pages_stale(
    tmp_path, generated, shipped_source, monkeypatch
):
    from drift.core.model_registry import MODELS, head_info
    from drift.core.params import SplitParams

    monkeypatch.setattr(SplitParams.model_fields["seed"], "description", "the seed of the train/test split")
    assert stale(generated, source=shipped_source) == [f"{REFERENCE}/params.md", SCHEMA]
    monkeypatch.undo()
    monkeypatch.setitem(
        MODELS, "cnn-xl", head_info("cnn-xl", {"family": "cnn", "channels": [96]}, "CNN-XL", "L")
    )
    assert stale(generated, source=shipped_source) == [f"{REFERENCE}/models.md"]
    monkeypatch.delitem(MODELS, "cnn-xl")
    # a re-run whose numbers moved: its results page is stale
    source = tmp_path / "source"
    shutil.copytree(shipped_source, source)
    metrics = source / "metrics" / "sotu" / "ffn-s.json"
    numbers = json.loads(metrics.read_text())
    metrics.write_text(json.dumps({**numbers, "decay": numbers["decay"] + 0.01}, indent=2) + "\n")
    assert stale(generated, source=source) == [f"{REFERENCE}/results.md"]
