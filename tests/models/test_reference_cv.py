"""The linear references' C chosen by cross-validation (train.reference_C: cv, drift/models/reference.py
C_GRID).

Expectations: planted cutoffs whose best C is decades from the old fixed one (cv finds it and scores better on
rows it never saw), the chosen C in the checkpoint's metadata, the fixed option as the models were before cv,
the same fit twice, and the parameter's parsing and routing into the checkpoint key's record."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from drift.core.errors import DriftError
from drift.core.params import TrainParams, model_training
from drift.models import InputSpec
from drift.models.checkpoints import build_model, chosen_C, load_checkpoint, save_checkpoint
from drift.models.reference import C_DEFAULT, C_GRID, CV, TFIDF_C, LinearBaseline, TfidfBaseline, text_counts
from drift.protocol.metrics import balanced_mse
from drift.train.loop import model_to_train

TEXT = InputSpec("text", (1,))
FIXED = {"baseline-linear": 0.01, "baseline-tfidf": 1.0}  # the values before cv (the paper presets')


def _pooled(n: int, seed: int, d: int):
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def _rare_positives(seed: int = 0):
    """600 rows of 20 features, class 1 (20%) decided by feature 0: at 100 training rows C = 0.01 shrinks the
    weight until the intercept's majority class wins most rows."""
    x = _pooled(600, seed, 20)
    noise = np.random.default_rng(seed + 1).standard_normal(600) * 0.5
    y = (x[:, 0] * 3 + noise > np.quantile(x[:, 0] * 3, 0.8)).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y), 2, "binary"


def _ratings(seed: int = 0):
    """Ratings 1-5 = 3 + 1.5 x_0 + noise over 10 features: ridge's alpha = 1 / 0.01 = 100 shrinks the slope of
    80 training rows to less than half."""
    x = _pooled(600, seed, 10)
    noise = np.random.default_rng(seed + 1).standard_normal(600) * 0.3
    y = np.clip(np.round(3 + 1.5 * x[:, 0] + noise), 1, 5)
    return torch.from_numpy(x), torch.from_numpy(y), 1, "regression"


def _cue_texts(n: int = 1300, seed: int = 0):
    """Texts of 30 words from 2,000 fillers plus 2 of 300 cue words of their class: each cue is rare, so at
    300 training rows TF-IDF's C = 1 leaves most cues' weights near 0."""
    rng = np.random.default_rng(seed)
    fillers = np.array([f"w{i}" for i in range(2000)])
    cues = [np.array([f"n{i}" for i in range(300)]), np.array([f"p{i}" for i in range(300)])]
    y = (rng.random(n) < 0.5).astype(np.int64)
    texts = [" ".join([*rng.choice(fillers, 30), *rng.choice(cues[label], 2)]) for label in y]
    return text_counts(texts), torch.from_numpy(y)


def _accuracy(model, x, y) -> float:
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def _state(model) -> dict:
    return {k: v.clone() for k, v in model.state_dict().items()}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ---- cv finds a C far from the fixed one, and it scores better held out ------------------------------------------


@pytest.mark.parametrize("case", [_rare_positives, _ratings])
def test_linear_cv_finds_a_far_C_that_beats_the_fixed_one_held_out(case):
    x, y, k, task = case()
    train = 100 if task == "binary" else 80
    spec = InputSpec("pooled", (x.shape[1],))
    fixed = LinearBaseline(spec, k).fit(x[:train], y[:train], task)
    cv = LinearBaseline(spec, k, C=CV).fit(x[:train], y[:train], task)
    assert fixed.chosen_C == C_DEFAULT and cv.chosen_C in C_GRID
    assert cv.chosen_C >= 10 * C_DEFAULT  # a decade or more from the old C
    held_x, held_y = x[train:], y[train:]
    if task == "binary":
        assert _accuracy(cv, held_x, held_y) > _accuracy(fixed, held_x, held_y) + 0.03
    else:
        with torch.no_grad():
            mse_cv = balanced_mse(held_y.numpy(), cv(held_x).numpy())
            mse_fixed = balanced_mse(held_y.numpy(), fixed(held_x).numpy())
        assert mse_cv < 0.6 * mse_fixed


def test_tfidf_cv_finds_a_far_C_that_beats_the_fixed_one_held_out():
    counts, y = _cue_texts()
    train, held = np.arange(300), np.arange(300, counts.shape[0])
    fixed = TfidfBaseline(TEXT, 2).fit(counts[train], y[train], "binary")
    cv = TfidfBaseline(TEXT, 2, C=CV).fit(counts[train], y[train], "binary")
    assert fixed.chosen_C == TFIDF_C and cv.chosen_C >= 10 * TFIDF_C
    assert _accuracy(cv, counts[held], y[held]) > _accuracy(fixed, counts[held], y[held]) + 0.05


# ---- the chosen C is recorded ------------------------------------------------------------------------------------


@pytest.mark.compute
def test_the_chosen_C_travels_in_the_checkpoint_metadata(tmp_path):
    x = torch.from_numpy(_pooled(240, 3, 12))
    labels = torch.stack([x[:, 0] > 0.5, x[:, 1] < 0, torch.zeros(240, dtype=torch.bool)], 1).float()
    spec = InputSpec("pooled", (12,))
    model = build_model("baseline-linear", spec, 3, "multilabel", reference_C={"baseline-linear": CV})
    model.fit(x, labels, "multilabel")
    assert model.C == CV and len(model.chosen_C) == 3
    # a label never seen: prior
    assert all(c in C_GRID for c in model.chosen_C[:2]) and model.chosen_C[2] is None
    assert set(model.state_dict()) == {"mean", "std", "head.weight", "head.bias"}  # no tensor added
    path = tmp_path / "cutoff000.pt"
    save_checkpoint(model, path)
    assert chosen_C(path) == model.chosen_C
    loaded = load_checkpoint("baseline-linear", spec, 3, "multilabel", path)
    assert loaded.chosen_C == model.chosen_C and loaded.C == CV
    assert torch.equal(loaded(x), model(x))

    counts, y = _cue_texts(200, seed=4)
    tfidf = TfidfBaseline(TEXT, 2, C=CV).fit(counts, y, "binary")
    save_checkpoint(tfidf, tmp_path / "tfidf.pt")
    assert chosen_C(tmp_path / "tfidf.pt") == tfidf.chosen_C in C_GRID
    prior = build_model("baseline-prior", spec, 2, "binary").fit(x, (x[:, 0] > 0).long(), "binary")
    save_checkpoint(prior, tmp_path / "prior.pt")
    assert chosen_C(tmp_path / "prior.pt") is None


def test_without_folds_cv_keeps_the_fixed_default():
    # one positive row: no fold could hold a positive in its training rows and another in its held-out ones
    x = torch.from_numpy(_pooled(40, 5, 6))
    y = torch.zeros(40, dtype=torch.long)
    y[7] = 1
    assert LinearBaseline(InputSpec("pooled", (6,)), 2, C=CV).fit(x, y, "binary").chosen_C == C_DEFAULT
    counts, _ = _cue_texts(40, seed=6)
    assert TfidfBaseline(TEXT, 2, C=CV).fit(counts, y, "binary").chosen_C == TFIDF_C
    # two rows of the rarest class: two folds, C chosen from the grid
    y[8] = 1
    assert LinearBaseline(InputSpec("pooled", (6,)), 2, C=CV).fit(x, y, "binary").chosen_C in C_GRID


# ---- the fixed option is the model as it was ---------------------------------------------------------------------


def _all_tasks():
    x = torch.from_numpy(_pooled(150, 8, 12))
    z = x[:, 0] + 0.5 * x[:, 1] + torch.from_numpy(_pooled(150, 9, 1)[:, 0])  # noisy: no separable task
    texts = [
        f"t{int(abs(a) * 4)} u{int(abs(b) * 4)} {'hi' if a > 0 else 'lo'} filler{i % 7} and of the"
        for i, (a, b) in enumerate(x[:, :2].tolist())
    ]
    counts = text_counts(texts)
    tasks = {
        "binary": ((z > 0).long(), 2),
        "multiclass": (torch.bucketize(z, torch.tensor([-0.8, 0.0, 0.8])), 4),
        "regression": (torch.clamp(torch.round(z + 3), 1, 5), 1),
        "multilabel": (torch.stack([z > 0.4, x[:, 2] > 0, x[:, 3] < -1], 1).float(), 3),
    }
    return x, counts, tasks


@pytest.mark.compute
def test_the_fixed_option_reproduces_the_fixed_models_exactly():
    x, counts, tasks = _all_tasks()
    spec = InputSpec("pooled", (12,))
    for task, (y, k) in tasks.items():
        for name, inputs, default in (
            ("baseline-linear", x, LinearBaseline(spec, k)),
            ("baseline-tfidf", counts, TfidfBaseline(TEXT, k)),
        ):
            model = build_model(name, TEXT if name == "baseline-tfidf" else spec, k, task, reference_C=FIXED)
            assert model.C == FIXED[name] == default.C  # the classes' defaults: the old C
            model.fit(inputs, y, task)
            default.fit(inputs, y, task)
            assert _same(_state(model), _state(default)), (name, task)
            used = model.chosen_C if task != "multilabel" else {c for c in model.chosen_C if c is not None}
            assert used == FIXED[name] or used == {FIXED[name]}


# ---- determinism -------------------------------------------------------------------------------------------------


def test_cv_fits_twice_to_the_same_bits():
    # every CV path once: LogisticRegressionCV unweighted (binary), multinomial, weighted (multilabel);
    # GridSearchCV over dense (cholesky) and sparse (lsqr) ridge
    x, counts, tasks = _all_tasks()
    spec = InputSpec("pooled", (12,))
    for task, reference in (
        ("binary", "linear"),
        ("multilabel", "linear"),
        ("regression", "linear"),
        ("multiclass", "tfidf"),
        ("regression", "tfidf"),
    ):
        y, k = tasks[task]
        fits = []
        # the folds ignore the global generators
        for seed in (1, 2):
            torch.manual_seed(seed)
            np.random.seed(seed)
            if reference == "linear":
                fits.append(LinearBaseline(spec, k, C=CV).fit(x, y, task))
            else:
                fits.append(TfidfBaseline(TEXT, k, C=CV).fit(counts, y, task))
        assert fits[0].chosen_C == fits[1].chosen_C, (task, reference)
        assert _same(_state(fits[0]), _state(fits[1])), (task, reference)


# ---- the parameter -----------------------------------------------------------------------------------------------


@pytest.mark.compute
def test_reference_C_parses_and_reaches_the_references_only():
    assert TrainParams().reference_C == {"baseline-linear": CV, "baseline-tfidf": CV}
    assert TrainParams.of({"reference_C": "cv"}).reference_C == TrainParams().reference_C
    paper = TrainParams.of({"reference_C": {"baseline-linear": 0.01, "baseline-tfidf": 1}})
    assert paper.reference_C == FIXED
    assert TrainParams.of({"reference_C": {"baseline-tfidf": "1e1"}}).reference_C == {
        "baseline-linear": CV,
        "baseline-tfidf": 10.0,
    }
    for bad, says in (
        (0.5, "must be cv, or a mapping"),
        ({"baseline-prior": 1.0}, "no reference with a C"),
        ({"baseline-linear": 0}, "C > 0"),
        ({"baseline-linear": "auto"}, "C > 0"),
        ({"baseline-linear": True}, "C > 0"),
    ):
        with pytest.raises(DriftError, match=says):
            TrainParams.of({"reference_C": bad})
    # the checkpoint key's record: a reference's holds the setting, a head's holds none
    assert model_training(paper, "Reference", "text", False, 64).reference_C == FIXED
    assert model_training(paper, "Recurrent", "text", True, 64).reference_C is None
    assert model_training(paper, "Reference", "text", False, 64) != model_training(
        TrainParams(), "Reference", "text", False, 64
    )
    # train_one's model: the references with the setting's C, a head untouched
    inputs = SimpleNamespace(spec=lambda: InputSpec("pooled", (8,)))
    task = SimpleNamespace(name="binary")
    assert model_to_train("baseline-linear", inputs, 2, task, paper).C == 0.01
    assert model_to_train("baseline-linear", inputs, 2, task, TrainParams()).C == CV
    assert not hasattr(model_to_train("probe-minilm", inputs, 2, task, paper), "chosen_C")
    with pytest.raises(DriftError, match="C > 0"):
        LinearBaseline(InputSpec("pooled", (8,)), 2, C=-1.0)
