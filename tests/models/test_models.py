"""Model registry: every model builds, trains a step, matches the paper's parameter counts, ignores padding."""

import pytest
import torch

from drift.core.encoder_registry import ENCODERS
from drift.core.errors import DriftError
from drift.models import (
    ALIASES,
    BASELINES,
    MODELS,
    PAPER_PARAMS,
    PAPER_PARAMS_ARXIV,
    InputSpec,
    count_params,
    create_model,
    format_params,
    list_models,
    reference_spec,
)

ALL = list(MODELS) + list(ALIASES)
# the references are fitted in closed form (test_reference.py)
TRAINED = [m for m in ALL if m not in BASELINES]
TOKEN_MODELS = [m.name for m in list_models() if m.input == "tokens"]
IMAGE_MODELS = [m.name for m in list_models() if m.input == "pixels"]
PROBES = [m.name for m in list_models() if m.input == "pooled"]
LENGTHS = [7, 4, 1]  # real tokens per row of the test batch (T = 7)


def _inputs(spec, B=3, T=7):
    """A small batch for spec: (args for forward). Padding holds garbage, so a leak would show."""
    if spec.kind == "pixels":
        return (torch.rand(B, *spec.shape),)
    if spec.kind == "pooled":
        return (torch.randn(B, *spec.shape),)
    mask = torch.arange(T)[None, :] < torch.tensor(LENGTHS[:B])[:, None]
    return torch.randn(B, T, spec.shape[0]), mask


def test_registry_contents():
    assert len(IMAGE_MODELS) == 12 and len(TOKEN_MODELS) == 12
    assert {p.removeprefix("probe-") for p in PROBES} == set(ENCODERS)
    assert {MODELS[p].family for p in PROBES} == {"Frozen"}  # as Tables 12 and 20 name the probes
    for info in list_models():
        assert info.size in ("S", "M", "L", "-")
    assert ALIASES["probe-minilm"] == "probe-minilm-l6"


@pytest.mark.compute
@pytest.mark.parametrize("name", TRAINED)
def test_forward_backward(name):
    torch.manual_seed(0)
    spec, n = reference_spec(name)
    model = create_model(name, spec, n)
    assert model.input_kind == spec.kind and model.family == MODELS[model.name].family
    out = model(*_inputs(spec))
    assert out.shape == (3, n)
    out.square().mean().backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


@pytest.mark.compute
@pytest.mark.parametrize("name", IMAGE_MODELS + TOKEN_MODELS)
def test_params_match_paper(name):
    """Within 10% of Table 3 (images), of Tables 11 and 19 (text heads, 1 and 7 outputs), and equal to the
    printed count once rounded as the paper rounds (the authors' architectures give them exactly)."""
    tables = [(PAPER_PARAMS, False)] + ([(PAPER_PARAMS_ARXIV, True)] if name in TOKEN_MODELS else [])
    for table, arxiv in tables:
        spec, n = reference_spec(name, arxiv=arxiv)
        for dropout in (0.0, 0.1):  # dropout adds no parameter
            trainable, total = count_params(create_model(name, spec, n, dropout))
            assert trainable == total
            assert abs(trainable / table[name] - 1) <= 0.10, (name, n, trainable, table[name])
            assert format_params(trainable) == format_params(table[name]), (name, n, trainable, table[name])


def _preset(preset: str) -> dict:
    from pathlib import Path

    import yaml

    return yaml.safe_load((Path(__file__).resolve().parents[2] / "params" / f"{preset}.yaml").read_text())


# the token lengths of the authors' runs: CONFERENCE_AMAZON_REVIEWS_MAX_SEQ_LEN and
# CONFERENCE_ARXIV_MAX_SEQ_LEN in drift_happens/model/dataset/text/architectures.py of
# learning-mechanisms/drift-happens (CC BY 4.0)
SNAPSHOT_MAX_TOKENS = {"paper-amazon": 128, "paper-arxiv": 256}


@pytest.mark.compute
@pytest.mark.parametrize(
    "preset, table, arxiv", [("paper-amazon", PAPER_PARAMS, False), ("paper-arxiv", PAPER_PARAMS_ARXIV, True)]
)
@pytest.mark.parametrize("name", TOKEN_MODELS)
def test_params_match_paper_at_the_presets_length(name, preset, table, arxiv):
    """Tables 11 and 19 at the snapshots' token lengths and at the preset's own (train.max_tokens, else
    embed.max_length, as the train stage sizes inputs), the preset's embedding width and dropout: no head has
    a position table, so the count is the same at any length."""
    params = _preset(preset)
    assert params["embed"]["text_encoder"] == "roberta"  # 768-d token states, as the tables count them
    spec, n = reference_spec(name, arxiv=arxiv)
    lengths = {
        SNAPSHOT_MAX_TOKENS[preset],
        int(params["train"].get("max_tokens") or params["embed"]["max_length"]),
        4,
    }
    counts = set()
    for length in lengths:
        model = create_model(
            name, InputSpec("tokens", spec.shape, max_tokens=length), n, params["train"].get("dropout", 0.0)
        )
        counts.add(count_params(model))
    assert len(counts) == 1, (name, lengths, counts)
    trainable, total = counts.pop()
    assert trainable == total
    assert format_params(trainable) == format_params(table[name]), (name, trainable, table[name])


@pytest.mark.compute
def test_dropout_reaches_the_authors_families():
    """p reaches ViT and every text head (0.1 in the authors' runs), no other family; each such model then has
    dropout modules at p, and none at p = 0 draws a random number."""
    from drift.models.blocks import Dropout

    with_dropout = {m.name for m in list_models() if m.dropout}
    assert with_dropout == {f"vit-{s}" for s in "sml"} | set(TOKEN_MODELS)
    for name in TRAINED:
        spec, n = reference_spec(name)
        ps = {
            m.p
            for m in create_model(name, spec, n, 0.1).modules()
            if isinstance(m, (Dropout, torch.nn.Dropout))
        }
        assert ps == ({0.1} if name in with_dropout else set()), name
        if name in with_dropout and "lstm" in name and "attn" in name:  # two stacked layers: dropout between
            assert create_model(name, spec, n, 0.1).rnn.dropout == 0.1
    model = create_model("tx-s", *reference_spec("tx-s"), 0.1).train()
    x, mask = _inputs(InputSpec("tokens", (768,)))
    torch.manual_seed(0)
    a = model(x, mask)
    torch.manual_seed(1)
    assert not torch.allclose(a, model(x, mask))  # training mode: the masks differ with the generator's state
    off = create_model("tx-s", *reference_spec("tx-s"), 0.0).train()
    torch.manual_seed(0)
    before = torch.get_rng_state()
    off(x, mask)
    # p = 0 draws nothing: runs without dropout are unchanged
    assert torch.equal(torch.get_rng_state(), before)
    with pytest.raises(DriftError, match="dropout"):
        create_model("tx-s", *reference_spec("tx-s"), 1.0)


@pytest.mark.compute
@pytest.mark.parametrize("name", PROBES)
def test_probe_params(name):
    """Exactly D * n + n; the paper's tables print that rounded (Tables 4, 12, 20)."""
    for table, arxiv in [(PAPER_PARAMS, False), (PAPER_PARAMS_ARXIV, True)]:
        spec, n = reference_spec(name, arxiv=arxiv)
        trainable, _ = count_params(create_model(name, spec, n))
        assert trainable == spec.shape[0] * n + n
        if name in table:
            assert format_params(trainable) == format_params(table[name])


@pytest.mark.compute
def test_probe_reference_counts():
    assert count_params(create_model("probe-minilm", InputSpec("pooled", (384,)), 2))[0] == 770
    assert count_params(create_model("probe-roberta", InputSpec("pooled", (768,)), 1))[0] == 769
    assert reference_spec("probe-dinov2-s") == (InputSpec("pooled", (384,)), 2)
    assert reference_spec("probe-minilm", arxiv=True) == (InputSpec("pooled", (384,)), 7)


@pytest.mark.compute
@pytest.mark.parametrize("name", TOKEN_MODELS)
def test_padding_invariance(name):
    torch.manual_seed(0)
    spec = InputSpec("tokens", (32,), max_tokens=16)
    model = create_model(name, spec, 2).eval()
    x, mask = _inputs(spec)
    extra = 5  # pad every row further, with garbage
    x_long = torch.cat([x, 100 * torch.randn(3, extra, 32)], dim=1)
    mask_long = torch.cat([mask, torch.zeros(3, extra, dtype=torch.bool)], dim=1)
    with torch.no_grad():
        short, long = model(x, mask), model(x_long, mask_long)
        alone = model(x[2:, :1], mask[2:, :1])  # the 1-token row with no padding at all
    torch.testing.assert_close(long, short, atol=1e-5, rtol=0)
    torch.testing.assert_close(alone, short[2:], atol=1e-5, rtol=0)


@pytest.mark.compute
@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 64, 48), (3, 7, 5)])
@pytest.mark.parametrize("name", IMAGE_MODELS[::3] + IMAGE_MODELS[2::3])
def test_other_image_shapes(name, shape):
    model = create_model(name, InputSpec("pixels", shape), 4)
    assert model(torch.rand(2, *shape)).shape == (2, 4)


@pytest.mark.compute
def test_deterministic_given_seed():
    spec, n = reference_spec("tx-s")
    outs = []
    for _ in range(2):
        torch.manual_seed(1)
        model = create_model("tx-s", spec, n).eval()
        outs.append(model(*_inputs(spec)))
    torch.testing.assert_close(outs[0], outs[1], atol=0, rtol=0)


@pytest.mark.compute
def test_unknown_name():
    with pytest.raises(DriftError) as err:
        create_model("cnn-x", InputSpec("pixels", (3, 32, 32)), 2)
    msg = str(err.value)
    assert "\n" not in msg and "cnn-x" in msg and "did you mean" in msg and "cnn-s" in msg


@pytest.mark.compute
@pytest.mark.parametrize(
    "name, spec",
    [
        ("cnn-s", InputSpec("tokens", (768,))),
        ("tx-s", InputSpec("pixels", (3, 32, 32))),
        ("probe-dinov2-s", InputSpec("tokens", (384,))),
        ("mlp-s", InputSpec("pixels", (32, 32))),
    ],
)
def test_wrong_input(name, spec):
    with pytest.raises(DriftError) as err:
        create_model(name, spec, 2)
    assert MODELS[name].input in str(err.value) and "\n" not in str(err.value)


@pytest.mark.compute
def test_any_number_of_tokens():
    """No position table: a Transformer head reads rows longer than the spec's max_tokens, as the authors'."""
    model = create_model("tx-s", InputSpec("tokens", (8,), max_tokens=4), 1).eval()
    assert model(torch.randn(1, 9, 8), torch.ones(1, 9, dtype=torch.bool)).shape == (1, 1)
