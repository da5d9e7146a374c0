"""Gradient saliency (paper Figure 3): against a hand-computed gradient, and on a tiny trained CNN and MLP."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn

from drift.core.params import SliceSpec, SplitParams, TrainParams
from drift.data.datasets.synth_portraits import SynthPortraitsParams, make_slice
from drift.models import InputSpec, create_model
from drift.models.checkpoints import build_model, checkpoint_path, save_checkpoint
from drift.models.inputs import Inputs
from drift.protocol.tasks import get_task
from drift.report.saliency import saliency_map, select_rows
from drift.train.loop import train_one
from tests.helpers import SHIPPED_PARAMS


def linear_model(C=2, H=3, W=4, n_outputs=2, seed=0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Flatten(), nn.Linear(C * H * W, n_outputs))
    return model, model[1].weight.detach().numpy().reshape(n_outputs, C, H, W)


@pytest.mark.compute
def test_linear_model_matches_the_gradient_by_hand():
    # logit_y = W_y . x + b_y, so d logit_y / dx = W_y whatever x is: the map of one portrait is max_c
    # |W_y[c]|, and the mean over portraits with labels [0, 1, 1] is (map_0 + 2 map_1) / 3
    model, W = linear_model()
    x = torch.randn(3, 2, 3, 4)
    got = saliency_map(model, x, [0, 1, 1])
    by_hand = (np.abs(W[0]).max(0) + 2 * np.abs(W[1]).max(0)) / 3
    np.testing.assert_allclose(got, by_hand, rtol=1e-6)
    assert got.shape == (3, 4)


@pytest.mark.compute
def test_single_output_ignores_the_target_and_batches_do_not_matter():
    model, W = linear_model(n_outputs=1)
    x = torch.randn(5, 2, 3, 4)
    np.testing.assert_allclose(saliency_map(model, x, [7] * 5), np.abs(W[0]).max(0), rtol=1e-6)
    # a CNN with batch norm in eval mode: each output depends on its own input only, so chunking changes
    # nothing
    cnn = create_model("cnn-s", InputSpec("pixels", (3, 16, 16)), 2)
    x = torch.rand(6, 3, 16, 16)
    y = [0, 1, 0, 1, 1, 0]
    np.testing.assert_allclose(
        saliency_map(cnn, x, y, batch_size=6), saliency_map(cnn, x, y, batch_size=2), rtol=1e-5, atol=1e-9
    )


def test_select_rows_follow_the_matrix_protocol():
    slices = np.array([0, 0, 0, 1, 1, 1, 1])
    splits = np.array(["train", "test", "test", "train", "test", "train", "test"])
    # seen slice: its test rows
    np.testing.assert_array_equal(select_rows(1, 1, slices, splits, n=10), [4, 6])
    # later slice: all rows
    np.testing.assert_array_equal(select_rows(0, 1, slices, splits, n=10), [3, 4, 5, 6])
    picked = select_rows(0, 1, slices, splits, n=2, seed=1)
    assert len(picked) == 2 and set(picked) <= {3, 4, 5, 6} and list(picked) == sorted(picked)
    np.testing.assert_array_equal(picked, select_rows(0, 1, slices, splits, n=2, seed=1))


@pytest.mark.compute
def test_cnn_looks_at_the_eyes_more_than_the_mlp():
    """synth-portraits tells the class by bars at the "eyes" (rows 9-15 shifted by up to 2 px, columns 7-13
    and 18-24 likewise): a CNN trained on it puts its saliency there; an MLP spreads it over the frame.
    Measured (seed 0, 12 epochs, the authors' CNN-S with global average pooling): CNN 0.40 of the saliency in
    the eye band (test accuracy 1.0), MLP 0.27 (0.88), uniform 0.24."""
    images, labels = make_slice(
        0, SynthPortraitsParams(k=1, per_slice=400, seed=0, concept_drift=0, covariate_drift=0, label_drift=0)
    )
    inputs = Inputs("pixels", images.reshape(len(images), -1))
    targets = torch.from_numpy(labels)
    train, test = np.arange(300), np.arange(300, 400)
    eyes = np.zeros((32, 32), bool)
    eyes[7:18, 5:27] = True
    share = {}
    for name in ("cnn-s", "mlp-s"):
        model = train_one(
            name,
            inputs,
            train,
            targets,
            get_task("binary"),
            2,
            TrainParams(epochs=12, batch_size=32, lr=1e-3),
            seed=0,
        )
        (x,) = inputs.batch(test)
        m = saliency_map(model, x, labels[test])
        assert np.isfinite(m).all() and m.min() >= 0 and m.std() > 0  # finite and not uniform
        share[name] = m[eyes].sum() / m.sum()
    assert share["cnn-s"] > eyes.mean() + 0.1
    assert share["cnn-s"] > share["mlp-s"] + 0.1


# ---------------------------------------------------------------- the grid of params.yaml report.saliency


@pytest.fixture(scope="module")
def portraits_root(tmp_path_factory):
    """A synth-portraits slice table (years 2000-2002, the real ingest and slice code) and random-weight
    checkpoints of mlp-s (seeds 0, 1) and cnn-s (seed 0) at every cutoff, laid out as the train stage does."""
    from drift.core.paths import dataset_paths
    from drift.data.datasets import dataset_params
    from drift.data.ingest import ingest
    from drift.data.records import read_records
    from drift.store.slices import slice_dataset, write_slice_table

    root = tmp_path_factory.mktemp("saliency")
    name = "synth-portraits"
    cfg = dataset_params(
        name,
        {
            "k": 3,
            "start_year": 2000,
            "per_slice": 40,
            "seed": 0,
            "concept_drift": 0,
            "covariate_drift": 0,
            "label_drift": 0,
            "slices": {"unit": "year", "start": 2000, "end": 2003},
            "min_samples": 10,
        },
    )
    p = dataset_paths(name, root)
    ingest(name, cfg, p["records"], p["quarantine"])
    table, manifest = slice_dataset(read_records(p["records"]), name, SplitParams(seed=0, test_fraction=0.3))
    write_slice_table(table, p["slices"], manifest)
    for model_name, seeds in (("mlp-s", (0, 1)), ("cnn-s", (0,))):
        for seed in seeds:
            for cutoff in range(3):
                torch.manual_seed(100 * seed + cutoff)
                model = build_model(model_name, InputSpec("pixels", (3, 32, 32)), 2, "binary")
                model.mean.fill_(0.4)  # the checkpoint's own pixel statistics must be the ones applied
                model.std.fill_(0.2)
                save_checkpoint(model, checkpoint_path(p["models"], model_name, seed, cutoff))
    return root


@pytest.mark.compute
def test_grid_of_cells(portraits_root, tmp_path):
    from drift.report.saliency import write_saliency

    # the YAML may write labels as numbers: 2000 is the slice "2000"
    cells = [["2000", "2001"], ["2000", "2002"], [2002, 2001]]
    out = tmp_path / "saliency.png"
    result = write_saliency(
        "synth-portraits", out, models=["cnn-s", "mlp-s"], cells=cells, n=8, root=portraits_root
    )
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result["models"] == ["cnn-s", "mlp-s"]
    assert [(c["cutoff_label"], c["eval_label"]) for c in result["columns"]] == [
        ("2000", "2001"),
        ("2000", "2002"),
        ("2002", "2001"),
    ]
    assert [(c["cutoff"], c["eval"]) for c in result["columns"]] == [(0, 1), (0, 2), (2, 1)]
    assert [c["n"] for c in result["columns"]] == [8, 8, 8]
    assert set(result["maps"]) == {(m, c) for m in ("cnn-s", "mlp-s") for c in range(3)}
    assert all(m.shape == (32, 32) and np.isfinite(m).all() for m in result["maps"].values())
    # a panel is the mean over the seeds' checkpoints (mlp-s has two) of their maps on the cell's portraits
    from drift.models.inputs import load_inputs
    from drift.store.slices import read_slice_table

    table = read_slice_table(portraits_root / "data/slices/synth-portraits.lance")
    rows = select_rows(
        0, 1, table.column("slice").to_numpy(), table.column("split").to_numpy(zero_copy_only=False), 8
    )
    (x,) = load_inputs("pixels", table).batch(rows)
    y = np.array(table.column("label").to_pylist())[rows]
    by_seed = []
    for seed in (0, 1):
        model = build_model("mlp-s", InputSpec("pixels", (3, 32, 32)), 2, "binary")
        model.load_state_dict(
            torch.load(portraits_root / f"data/models/synth-portraits/mlp-s/seed{seed}/cutoff000.pt")
        )
        assert float(model.mean[0]) == pytest.approx(0.4)
        by_seed.append(saliency_map(model, x, y))
    np.testing.assert_allclose(result["maps"][("mlp-s", 0)], (by_seed[0] + by_seed[1]) / 2, rtol=1e-6)
    assert not np.allclose(by_seed[0], by_seed[1])


@pytest.mark.compute
def test_grid_defaults_to_every_trained_image_model(portraits_root):
    from drift.report.saliency import dataset_saliency

    result = dataset_saliency("synth-portraits", cells=[["2001", "2002"]], n=4, root=portraits_root)
    assert result["models"] == ["cnn-s", "mlp-s"] and len(result["columns"]) == 1
    # without cells: cutoffs over the timeline, each on the next slice (what `drift saliency --cutoffs` does)
    result = dataset_saliency("synth-portraits", cutoffs=[0, 1], n=4, root=portraits_root)
    assert [(c["cutoff_label"], c["eval_label"]) for c in result["columns"]] == [
        ("2000", "2001"),
        ("2001", "2002"),
    ]


@pytest.mark.compute
@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            dict(cells=[["1950", "1960"]]),
            "report.saliency.cells: no slice '1950' in synth-portraits; valid slice labels: 2000, 2001, 2002",
        ),
        (dict(cells=[["2000", "2003"]]), "valid slice labels: 2000, 2001, 2002"),
        (dict(cells=[["2000"]]), "is not a [trained-through, evaluated-on] pair"),
        (dict(cells=[]), "must be a non-empty list"),
        (
            dict(models=["cnn-l"], cells=[["2000", "2001"]]),
            "no trained image model 'cnn-l' for synth-portraits: trained ones are cnn-s, mlp-s",
        ),
        (dict(cells=[["2000", "2001"]], n=0), "must be a positive integer"),
        (dict(cells=[["2000", "2001"]], cutoffs=[0]), "not both"),
    ],
)
def test_grid_errors_are_one_line(portraits_root, kwargs, message):
    from drift.core.errors import DriftError
    from drift.report.saliency import dataset_saliency

    with pytest.raises(DriftError) as err:
        dataset_saliency("synth-portraits", root=portraits_root, **kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.compute
def test_default_grid_fits_the_embedded_dataset():
    """params.yaml report.saliency names synth-portraits' trained models and slice labels (2000-2007)."""

    import yaml

    from drift.protocol.slicing import slice_edges

    params = yaml.safe_load(SHIPPED_PARAMS.read_text())
    grid = params["report"]["saliency"]["synth-portraits"]
    _, labels = slice_edges(SliceSpec(**params["synth-portraits"]["slices"]))
    assert labels == [str(y) for y in range(2000, 2008)]
    assert set(grid["models"]) <= set(params["train"]["models"]["synth-portraits"])
    assert grid["cells"] and all(len(c) == 2 and {str(x) for x in c} <= set(labels) for c in grid["cells"])
    assert isinstance(grid["n"], int) and grid["n"] > 0
