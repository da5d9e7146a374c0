"""The lexical reference baseline-tfidf (drift/models/reference.py TfidfBaseline): TF-IDF of the raw text with
a closed-form linear model, fitted per cutoff like the other references, in every text dataset's roster.

Expectations: planted words that decide the label, scikit-learn's own vectorizer + classifier on the same rows
(the model is that pipeline, kept as buffers), a state_dict round trip, and the roster's rule by modality."""

import numpy as np
import pytest
import torch
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.linear_model import LogisticRegression

from drift.core.errors import DriftError
from drift.core.params import TrainParams, roster
from drift.evaluate.predict import predict, predict_many
from drift.models import InputSpec, create_model, get_model_info
from drift.models.checkpoints import build_model
from drift.models.inputs import Inputs
from drift.models.reference import TfidfBaseline, text_counts
from drift.run.checks import check_roster

TEXT = InputSpec("text", (1,))
FILLER = "the of and to in a is that for it as was with be by on not he this are or his from at which".split()
CUES = ["fix crash", "add feature", "update docs"]


def _texts(n: int, seed: int, classes: int = 3):
    """n texts of filler words (as hashed counts); a label's cue words appear in every text of that label."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    texts = [" ".join(list(rng.choice(FILLER, 12)) + CUES[c].split()) for c in y]
    return text_counts(texts), y


def _accuracy(model, texts, y) -> float:
    return float((model(texts).argmax(1).numpy() == y).mean())


def test_planted_cues_are_learned_for_every_task():
    texts, y = _texts(300, 0)
    test, y_test = _texts(100, 1)
    multi = TfidfBaseline(TEXT, 3).fit(texts, torch.tensor(y), "multiclass")
    assert _accuracy(multi, test, y_test) == 1.0
    binary = TfidfBaseline(TEXT, 2).fit(texts, torch.tensor(y == 0).long(), "binary")
    assert _accuracy(binary, test, (y_test == 0).astype(int)) == 1.0
    labels = torch.tensor(np.stack([y == 0, y == 2], 1), dtype=torch.float32)
    multilabel = TfidfBaseline(TEXT, 2).fit(texts, labels, "multilabel")
    assert ((multilabel(test).numpy() > 0) == np.stack([y_test == 0, y_test == 2], 1)).all()
    ratings = TfidfBaseline(TEXT, 1).fit(texts, torch.tensor(1.0 + 2 * y), "regression")
    err = np.abs(ratings(test).numpy()[:, 0] - (1.0 + 2 * y_test))
    assert err.mean() < 0.5  # the prior (the mean rating) is off by about 1.3


def test_it_is_scikit_learns_tfidf_and_logistic_regression():
    texts, y = _texts(200, 2)
    model = TfidfBaseline(TEXT, 3).fit(texts, torch.tensor(y), "multiclass")
    df = np.asarray((texts > 0).sum(0)).ravel()
    # under max_features: all in 2+
    assert set(model.columns.tolist()) == set(np.flatnonzero(df >= 2).tolist())
    Z = TfidfTransformer(sublinear_tf=True).fit_transform(texts[:, model.columns.numpy()])
    expected = LogisticRegression(C=model.C, tol=1e-5, max_iter=model.max_iter).fit(Z, y).decision_function(Z)
    np.testing.assert_allclose(model(texts).numpy(), expected, rtol=1e-3, atol=1e-3)
    small = TfidfBaseline(TEXT, 3, max_features=10).fit(texts, torch.tensor(y), "multiclass")
    top = np.sort(df)[::-1][:10]
    assert (
        len(small.columns) == 10 and sorted(df[small.columns.numpy()].tolist(), reverse=True) == top.tolist()
    )


@pytest.mark.compute
def test_state_dict_round_trip_determinism_and_registry():
    texts, y = _texts(120, 3)
    model = build_model("baseline-tfidf", TEXT, 3, "multiclass")
    assert isinstance(model, TfidfBaseline) and get_model_info("baseline-tfidf").family == "Reference"
    model.fit(texts, torch.tensor(y), "multiclass")
    again = TfidfBaseline(TEXT, 3).fit(texts, torch.tensor(y), "multiclass")
    state = model.state_dict()
    assert all(torch.equal(state[k], again.state_dict()[k]) for k in state)  # bit-identical refit
    fresh = build_model("baseline-tfidf", TEXT, 3, "multiclass")
    # buffers sized by the fit
    fresh.load_state_dict(state)
    assert torch.equal(fresh(texts), model(texts))
    assert not any(p.requires_grad for p in model.parameters())


def test_text_inputs_batch_and_predict_like_the_other_kinds():
    texts, y = _texts(90, 4)
    assert text_counts(["a b", None])[1].nnz == 0  # a row without text
    inputs = Inputs("text", texts)
    assert inputs.spec() == TEXT and (inputs.batch(np.array([2, 0]))[0] != texts[[2, 0]]).nnz == 0
    model = TfidfBaseline(TEXT, 3).fit(inputs.batch(np.arange(90))[0], torch.tensor(y), "multiclass")
    rows = np.array([7, 3, 5, 60])
    out = predict(model, inputs, rows, batch_size=2)
    assert out.shape == (4, 3) and np.isfinite(out).all()
    np.testing.assert_array_equal(predict_many([model], inputs, rows)[0], out)


def test_tiny_or_empty_texts_fall_back_to_the_prior():
    model = TfidfBaseline(TEXT, 2).fit(text_counts(["", "", ""]), torch.tensor([1, 1, 0]), "binary")
    # no vocabulary: the prior
    assert (model(text_counts(["anything", ""])).argmax(1) == 1).all()
    single = TfidfBaseline(TEXT, 2).fit(text_counts(["just one row"]), torch.tensor([0]), "binary")
    assert (single(text_counts(["x"])).argmax(1) == 0).all()


@pytest.mark.compute
def test_roster_on_text_only_and_errors():
    train = TrainParams(models={"sotu": ["ffn-s"]})
    assert roster(train, "sotu", "text") == ["ffn-s", "baseline-prior", "baseline-linear", "baseline-tfidf"]
    assert roster(train, "sotu", "image") == ["ffn-s", "baseline-prior", "baseline-linear"]
    check_roster(roster(train, "sotu", "text"), "text", "minilm-l6")
    with pytest.raises(DriftError, match="reads raw text"):
        check_roster(["baseline-tfidf"], "image", None)
    with pytest.raises(DriftError, match="needs text input"):
        create_model("baseline-tfidf", InputSpec("pooled", (8,)), 2)
