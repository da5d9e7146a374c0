"""The typed schema of params.yaml (drift/core/params.py): the shipped file and every preset hold up, the
schema's defaults are params.yaml's values, and an unknown key or a wrong type anywhere is a one-line error
before any compute."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from drift.core.dataset_registry import CORPUS_INPUTS, DATASETS
from drift.core.errors import DriftError
from drift.core.params import (
    RUN_CHOICES,
    DatasetParams,
    EmbedParams,
    Params,
    TrainParams,
    load_params,
)
from drift.core.presets import apply_preset
from drift.data.datasets import (
    dataset_cfg,
    dataset_params,
    get_dataset,
)
from drift.data.datasets.arxiv import ArxivParams
from drift.data.datasets.yearbook import YearbookParams
from drift.run.checks import validate
from tests.helpers import SHIPPED_PARAMS, checked_params, only, run, tiny_params

ROOT = Path(__file__).resolve().parents[2]
PRESETS = sorted(p.stem for p in (ROOT / "params").glob("*.yaml"))


def shipped() -> dict:
    return yaml.safe_load((SHIPPED_PARAMS).read_text())


def error(data) -> str:
    """The one-line message checked_params() gives for a params.yaml document."""
    with pytest.raises(DriftError) as e:
        checked_params(data)
    message = str(e.value)
    assert "\n" not in message
    return message


def changed(change) -> dict:
    params = shipped()
    change(params)
    return params


# ---------------------------------------------------------------- what ships holds up


def test_shipped_params_validate():
    params = checked_params(SHIPPED_PARAMS)
    assert isinstance(params, Params)
    for name in params.datasets:
        validate(params, name)


def test_the_workspace_params_validate():
    """Whatever this workspace's params.yaml holds (a user's datasets and sections, a preset), it loads; the
    other tests build their params from params.yaml as committed (conftest.shipped_params) or their own."""
    if (ROOT / "params.yaml").exists():
        checked_params(ROOT / "params.yaml")


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_applied_validates(preset, tmp_path):
    path = tmp_path / "params.yaml"
    shutil.copy(SHIPPED_PARAMS, path)
    apply_preset(preset, params_path=path, presets=ROOT / "params")
    params = checked_params(path)
    for name in params.datasets:
        validate(params, name)


def test_a_preset_that_breaks_params_is_refused_and_nothing_is_written(tmp_path):
    path = tmp_path / "params.yaml"
    shutil.copy(SHIPPED_PARAMS, path)
    presets = tmp_path / "presets"
    presets.mkdir()
    (presets / "typo.yaml").write_text("train:\n  epoch: 3\n")
    with pytest.raises(
        DriftError, match=r"preset typo.*unknown parameter train\.epoch: did you mean train\.epochs\?"
    ):
        apply_preset("typo", params_path=path, presets=presets)
    assert path.read_text() == (SHIPPED_PARAMS).read_text()


def test_a_section_per_dataset():
    params = checked_params(shipped())
    assert all(isinstance(dataset_cfg(params, name), get_dataset(name).PARAMS) for name in DATASETS)
    assert set(DATASETS) <= set(Params.keys())  # the schema's dataset sections are the table's


def test_the_core_schema_keeps_a_dataset_section_as_written_and_its_module_types_it():
    data = changed(lambda p: p["sotu"].update(min_word=20))
    # train, evaluate, report: no reader to type it
    assert load_params(data).section("sotu")["min_word"] == 20
    with pytest.raises(
        DriftError, match=r"^unknown parameter sotu\.min_word: did you mean sotu\.min_words\?"
    ):
        checked_params(data)  # ingest and the CLI: its module's params class


@pytest.mark.parametrize(
    "edit, message",
    [
        # `datasets.<name>: <path>`, the first form
        (
            lambda p: p["datasets"].update(sotu="drift/data/datasets/sotu.py"),
            "params.yaml `datasets.sotu: drift/data/datasets/sotu.py` is an earlier form: write "
            "`datasets.sotu: {input: requirements.lock}`",
        ),
        (
            lambda p: p["datasets"].update(amazon="data/raw/amazon"),
            "params.yaml `datasets.amazon: data/raw/amazon` is an earlier form: write "
            "`datasets.amazon: {input: data/raw/amazon}`",
        ),
        # `{input, reader}`, the second: the reader is the project's business
        (
            lambda p: p["datasets"].update(
                amazon={"input": "data/raw/am", "reader": "drift/data/datasets/amazon.py"}
            ),
            "params.yaml `datasets.amazon.reader` is an earlier form: a dataset's reader comes with it (built in, or "
            "`kind: table` in its section); write `datasets.amazon: {input: data/raw/am}`",
        ),
        # a corpus's files named in its section too
        (
            lambda p: (
                p["datasets"].update(amazon={"input": "data/raw/elsewhere"}),
                p["amazon"].update(source="data/x"),
            ),
            "params.yaml `amazon.source` is an earlier form: a dataset's files are named once, in "
            "`datasets.amazon.input`; drop amazon.source and write `datasets.amazon: {input: data/raw/elsewhere}`",
        ),
        (lambda p: p["datasets"].update(sotu={}), "datasets.sotu.input is missing"),
        # a name that is not built in, with a section that does not say it is a table
        (
            lambda p: (
                p["datasets"].update(mine={"input": "t.csv"}),
                p.update(mine={"time": "t", "task": "binary"}),
            ),
            "`mine` is not a built-in dataset (sotu, synth-portraits, yearbook, amazon, arxiv): a table of your own says "
            "`kind: table` in its section `mine:` (`drift init` writes it)",
        ),
    ],
)
def test_an_earlier_datasets_form_is_one_line_showing_the_current_one(edit, message):
    got = error(changed(edit))
    assert got.startswith(message), got


def test_a_corpus_outside_the_run_cannot_name_its_files_in_its_section():
    message = error(changed(lambda p: p["yearbook"].update(source="data/raw/yb.tar.gz")))
    assert message == (
        "params.yaml `yearbook.source` is an earlier form: a dataset's files are named once, in "
        "`datasets.yearbook.input`; drop yearbook.source and write "
        "`datasets.yearbook: {input: data/raw/yb.tar.gz}`"
    )


# ---------------------------------------------------------------- one source of values


def _leaves(data: dict, prefix: str = ""):
    for key, value in data.items():
        path = f"{prefix}{key}"
        if path in RUN_CHOICES:
            continue
        if isinstance(value, dict):
            yield from _leaves(value, path + ".")
        else:
            yield path, value


def _at(data, path: str):
    for key in path.split("."):
        assert isinstance(data, dict) and key in data, (
            f"params.yaml sets {path}, which the schema does not have"
        )
        data = data[key]
    return data


def test_schema_defaults_are_the_values_of_params_yaml():
    """params.yaml is the source of values; the schema's defaults only fill keys it leaves out, so they must
    equal it wherever it sets a key (but for RUN_CHOICES: the run's choices, with no meaningful default)."""
    defaults = Params.model_validate({"datasets": {}}).model_dump(by_alias=True)
    defaults.update({name: get_dataset(name).PARAMS().model_dump() for name in DATASETS})
    typed = Params.model_validate({"datasets": {}, "train": {"reference_C": "cv"}}).train.reference_C
    # a shorthand the schema spells out: `cv` for each fitted reference
    written = {"train.reference_C": typed}
    differ = {
        path: (value, _at(defaults, path))
        for path, value in _leaves(shipped())
        if _at(defaults, path) != written.get(path, value)
    }
    assert shipped()["train"]["reference_C"] == "cv"
    assert not differ, f"params.yaml value vs schema default: {differ}"


def test_run_choices_are_set_by_params_yaml():
    for path in RUN_CHOICES:
        _at(shipped(), path)


def test_a_missing_key_takes_the_schema_default():
    params = shipped()
    del params["embed"]["max_length"], params["train"]["epochs"], params["sotu"]
    typed = checked_params(params)
    sotu = dataset_cfg(typed, "sotu")
    assert typed.embed.max_length == 64 and typed.train.epochs == 5 and sotu.min_words == 30
    assert sotu.slices.spec() == {"unit": "decade", "start": 1850, "end": 2030}


def test_a_corpus_reads_from_its_datasets_entry():
    params = shipped()
    params["datasets"] = {
        "yearbook": {"input": "elsewhere/yearbook.tar.gz"},
        "amazon": {"input": "data/raw/amazon"},
    }
    typed = checked_params(params)
    assert dataset_cfg(typed, "yearbook").source == "elsewhere/yearbook.tar.gz"
    assert dataset_cfg(typed, "amazon").source == "data/raw/amazon"
    # a corpus left out of the run: its default place (`drift fetch` downloads there)
    assert dataset_cfg(typed, "arxiv").source == CORPUS_INPUTS["arxiv"] == ArxivParams().source
    assert YearbookParams().source == CORPUS_INPUTS["yearbook"]


def test_null_means_empty():
    params = shipped()
    params["train"]["baselines"] = None
    params["embed"]["encoders"] = None
    params["sotu"] = None
    typed = checked_params(params)
    assert typed.train.baselines == [] and typed.embed.encoders == []
    assert dataset_cfg(typed, "sotu") == get_dataset("sotu").PARAMS()


# ---------------------------------------------------------------- unknown keys, at every level


@pytest.mark.compute
@pytest.mark.parametrize(
    "change, expected",
    [
        (
            lambda p: p["train"].update(epoch=3),
            "unknown parameter train.epoch: did you mean train.epochs? valid: baselines, batch_order, batch_size, dropout, engine, epochs, grad_clip, ",
        ),
        (
            lambda p: p.update(trian=p.pop("train")),
            "unknown parameter trian: did you mean train? valid: amazon, ",
        ),
        (
            lambda p: p["sotu"].update(min_word=20),
            "unknown parameter sotu.min_word: did you mean sotu.min_words? valid: ",
        ),
        (
            lambda p: p["synth-portraits"].update(concept=1.0),
            "unknown parameter synth-portraits.concept: did you mean synth-portraits.concept_drift?",
        ),
        (
            lambda p: p["sotu"]["slices"].update(stat=1850),
            "unknown parameter sotu.slices.stat: did you mean sotu.slices.start?",
        ),
        (
            lambda p: p["amazon"]["sample"].update(sed=1),
            "unknown parameter amazon.sample.sed: did you mean amazon.sample.seed?",
        ),
        (
            lambda p: p["embed"].update(max_lenght=32),
            "unknown parameter embed.max_lenght: did you mean embed.max_length?",
        ),
        (
            lambda p: p["split"].update(test_frac=0.2),
            "unknown parameter split.test_frac: did you mean split.test_fraction?",
        ),
        (
            lambda p: p["train"]["models"].update(sotuu=["ffn-s"]),
            "unknown parameter train.models.sotuu: did you mean train.models.sotu?",
        ),
        (
            lambda p: p["datasets"].update(yearbok={"input": "data/raw/yearbook"}),
            "unknown parameter datasets.yearbok: did you mean datasets.yearbook?",
        ),
        (
            lambda p: p["report"]["saliency"]["synth-portraits"].update(cell=[]),
            "unknown parameter report.saliency.synth-portraits.cell: did you mean report.saliency.synth-portraits.cells?",
        ),
        (
            lambda p: p["embed"]["weights"].update(minilm="w"),
            "unknown parameter embed.weights.minilm: did you mean embed.weights.minilm-l6?",
        ),
    ],
)
def test_unknown_keys_name_the_key_and_the_closest_valid_ones(change, expected):
    assert error(changed(change)).startswith(expected)


def test_an_unknown_family_in_lr_stops_validate():
    params = checked_params(changed(lambda p: p["train"].update(lr={"default": 0.001, "frozn": 0.01})))
    with pytest.raises(
        DriftError, match=r"^unknown parameter train\.lr\.frozn: did you mean train\.lr\.frozen\b"
    ):
        validate(params, "sotu")


# ---------------------------------------------------------------- wrong types


@pytest.mark.compute
@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda p: p["train"].update(epochs="three"), "train.epochs must be an integer, got 'three'"),
        (lambda p: p["train"].update(epochs=True), "train.epochs must be an integer, got True"),
        (lambda p: p["train"].update(epochs=0), "train.epochs must be at least 1, got 0"),
        (lambda p: p["train"].update(seeds=[0, "1"]), "train.seeds[1] must be an integer, got '1'"),
        (lambda p: p["train"].update(seeds=[]), "train.seeds must list at least 1 item, got []"),
        (lambda p: p["train"].update(lr="fast"), "train.lr must be a number or a mapping family -> rate"),
        (
            lambda p: p["train"].update(lr={"default": "fast"}),
            "train.lr.default must be a number, got 'fast'",
        ),
        (
            lambda p: p["train"].update(models={"sotu": "ffn-s"}),
            "train.models.sotu must be a list, got 'ffn-s'",
        ),
        (
            lambda p: p["embed"].update(pooling="max"),
            "embed.pooling must be one of mean, cls, pooler, got 'max'",
        ),
        (
            lambda p: p["embed"].update(dtype="fp8"),
            "embed.dtype must be one of float32, bfloat16, float16, got 'fp8'",
        ),
        (lambda p: p["sotu"].update(strict="no"), "sotu.strict must be true or false, got 'no'"),
        (
            lambda p: p["sotu"]["slices"].update(start="1850s"),
            "sotu.slices.start must be an integer, got '1850s'",
        ),
        (lambda p: p["split"].update(test_fraction=1.5), "split.test_fraction must be less than 1, got 1.5"),
        (
            lambda p: p["arxiv"].update(time_field="published"),
            "arxiv.time_field must be one of first_version, update_date, got 'published'",
        ),
        (lambda p: p.update(train=5), "train must be a mapping, got 5"),
        # values of the right type that would run and mislead: refused before any compute
        (lambda p: p["train"].update(seeds=[0, 0]), "train.seeds lists 0 twice: each item must differ"),
        (
            lambda p: p["train"].update(lr=-1),
            "train.lr must be a learning rate in (0, 1], e.g. 0.001, got -1",
        ),
        (lambda p: p["train"].update(lr=0), "train.lr must be a learning rate in (0, 1], e.g. 0.001, got 0"),
        (lambda p: p["train"].update(lr=3), "train.lr must be a learning rate in (0, 1]"),
        (
            lambda p: p["train"].update(lr={"default": 0.001, "frozen": 0}),
            "train.lr.frozen must be a learning rate",
        ),
        (
            lambda p: p["embed"].update(encoders=["nope-enc"]),
            "embed.encoders[0]: unknown encoder 'nope-enc': valid: ",
        ),
        (
            lambda p: p["embed"].update(text_encoder="minilm"),
            "embed.text_encoder: unknown encoder 'minilm': did you mean minilm-l6?",
        ),
        (lambda p: p["embed"].update(encoders=["bert", "bert"]), "embed.encoders lists 'bert' twice"),
        (lambda p: p.pop("datasets"), "params.yaml `datasets` must map each dataset to its raw input"),
    ],
)
def test_wrong_types_are_one_line_errors(change, expected):
    assert error(changed(change)).startswith(expected)


def test_numbers_may_be_written_as_yaml_1_1_strings():
    """PyYAML reads `lr: 1e-3` as a string: a number field takes it."""
    assert checked_params(changed(lambda p: p["train"].update(lr="1e-3", weight_decay="0"))).train.lr == 0.001


def test_the_token_cap_is_train_max_tokens_else_embed_max_length():
    assert checked_params(shipped()).max_tokens == 64  # train.max_tokens null: embed.max_length
    assert checked_params(changed(lambda p: p["train"].update(max_tokens=128))).max_tokens == 128
    assert checked_params(changed(lambda p: p["embed"].update(max_length=32))).max_tokens == 32


def test_the_library_validates_plain_mappings_too():
    assert TrainParams.of({"epochs": 2}).lr == {"default": 0.001, "frozen": 0.01}
    assert dataset_params("sotu", {}).min_words == 30
    with pytest.raises(DriftError, match=r"^unknown parameter embed\.max_lenght"):
        EmbedParams.of({"max_lenght": 3})
    with pytest.raises(
        DriftError, match=r"^unknown parameter dataset\.min_sample: did you mean dataset\.min_samples"
    ):
        DatasetParams.of({"min_sample": 3})


# ---------------------------------------------------------------- end to end: a stage refuses before compute


@pytest.mark.compute
@pytest.mark.pipeline
def test_a_stage_refuses_an_unknown_parameter(project):
    params = only(tiny_params(), "sotu")
    params["train"]["epoch"] = 3  # what `dvc exp run -S '+train.epoch=3'` writes
    repo = project(params)
    for stage in ("ingest", "train"):
        result = run(["python", f"stages/{stage}.py", "sotu"], repo, check=False)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "train.epoch" in lines[0] and "did you mean train.epochs?" in lines[0], (
            lines
        )
    assert not (repo / "data/records/sotu.parquet").exists()


@pytest.mark.compute
@pytest.mark.pipeline
def test_a_stage_refuses_a_wrong_type(project):
    params = only(tiny_params(), "sotu")
    params["embed"]["max_length"] = "long"
    repo = project(params)
    result = run(["python", "stages/ingest.py", "sotu"], repo, check=False)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: embed.max_length must be an integer, got 'long'"


def test_defaults_are_not_shared():
    """Mutable defaults are fresh per load: editing one loaded Params leaves the next alone."""

    def without_defaults():
        params = shipped()
        del params["train"]["baselines"], params["embed"]["weights"]
        return params

    a = checked_params(without_defaults())
    a.train.baselines.append("x")
    a.embed.weights["bert"] = "w"
    b = checked_params(without_defaults())
    assert "x" not in b.train.baselines and b.embed.weights == {}


def test_one_function_loads_the_configuration():
    # drift.core.params.load_params is the one loader of params.yaml: no other module defines a loader, and
    # every stage script reads its params through it (a raw read would bring its own defaults)
    import ast

    loaders = {"load", "load_params", "as_params", "load_core", "load_core_params"}
    defined = []
    for path in sorted([*(ROOT / "drift").rglob("*.py"), *(ROOT / "stages").glob("*.py")]):
        for node in ast.parse(path.read_text()).body:  # module-level functions: the public ones
            if isinstance(node, ast.FunctionDef) and node.name in loaders:
                defined.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert defined == ["drift/core/params.py:load_params"]
    for script in sorted((ROOT / "stages").glob("*.py")):
        tree = ast.parse(script.read_text())
        sources = {
            (n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names
        }
        assert ("drift.core.params", "load_params") in sources, (
            f"{script.name} does not read params.yaml through drift.core.params.load_params"
        )
        assert "safe_load" not in script.read_text(), f"{script.name} reads a YAML file of its own"


def test_what_decides_a_checkpoint_is_stated_once():
    # every TrainParams field says what it decides (or why nothing); the checkpoint key's record and the train
    # stage's DVC params are derived from that, so neither can forget a field
    from drift.core.params import CHECKPOINT, ROSTER, ModelTraining, model_training
    from drift.run.pipeline import STAGES

    unstated = [
        n
        for n, f in TrainParams.model_fields.items()
        if not (
            isinstance(f.json_schema_extra, dict)
            and "decides" in f.json_schema_extra
            and (f.json_schema_extra["decides"] or f.json_schema_extra.get("why"))
        )
    ]
    assert not unstated, f"TrainParams fields that state neither what they decide nor why nothing: {unstated}"
    keyed = TrainParams.deciding(CHECKPOINT)
    assert set(ModelTraining.model_fields) == set(keyed) | {"optimizer"}
    tracked = STAGES["train"]["params"]
    for name in keyed + TrainParams.deciding(ROSTER):
        assert (f"train.{name}" if name != "models" else "train.models.${key}") in tracked, name
    # one record feeds the key and the optimiser: the learning rate resolved once, as a float, per family
    train = TrainParams(lr={"frozen": 0.01, "cnn": 0.003})
    assert model_training(train, "CNN", "image", False, 64).lr == 0.003
    assert model_training(train, "Frozen", "text", False, 64).optimizer == "adamw"
    record = model_training(train, "Recurrent", "text", True, 64)
    assert record.lr == 0.001 and isinstance(record.lr, float) and record.dropout == 0.0 == train.dropout
    assert model_training(train.model_copy(update={"dropout": 0.1}), "MLP", "image", False, 64).dropout == 0.0
    with pytest.raises(DriftError, match="resolved per model"):
        model_training(train.model_copy(update={"engine": "auto"}), "CNN", "image", False, 64)


def test_a_dataset_named_twice_is_one_line(tmp_path):
    # PyYAML keeps the last of two equal keys silently: params.yaml refuses them, with both lines
    text = SHIPPED_PARAMS.read_text().replace(
        "datasets:\n", "datasets:\n  sotu: {input: data/raw/other}\n", 1
    )
    (tmp_path / "params.yaml").write_text(text)
    with pytest.raises(
        DriftError,
        match=r"params.yaml names 'sotu' twice in one mapping \(lines \d+ and \d+\): "
        r"keep one$",
    ):
        load_params(tmp_path / "params.yaml")


def test_drift_check_refuses_an_earlier_form_without_dvc(tmp_path):
    # `drift check` runs the check stage's checks alone: the old `datasets.<name>: <path>` form is one line of
    # ours, where `dvc repro` would stop in DVC's own parse of dvc.yaml
    from tests.helpers import drift_cli

    text = SHIPPED_PARAMS.read_text()
    (tmp_path / "params.yaml").write_text(text)
    assert drift_cli("check", cwd=tmp_path).returncode == 0
    line = next(ln for ln in text.splitlines() if ln.startswith("  sotu: {"))
    (tmp_path / "params.yaml").write_text(text.replace(line, "  sotu: drift/data/datasets/sotu.py", 1))
    result = drift_cli("check", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: params.yaml `datasets.sotu: drift/data/datasets/sotu.py` is an "
        "earlier form: write `datasets.sotu: {input: requirements.lock}`"
    )
