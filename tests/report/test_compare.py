"""Comparing revisions: `drift compare` on hand-built metrics, and a real pipeline in a temporary git
repository with two commits, read back through `drift compare`, `dvc plots diff`, `drift plots`, `drift show`,
`drift saliency`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from drift.report.results import diff_metrics, diff_params, not_rerun
from tests.helpers import drift_cli as drift
from tests.helpers import only, run, tiny_params

PNG = b"\x89PNG\r\n\x1a\n"


def approx(x):
    return pytest.approx(x, abs=1e-12)


def stats(id_, future, higher=True):
    return {
        "id": id_,
        "future": future,
        "decay": (id_ - future) if higher else (future - id_),
        "metric": "accuracy" if higher else "balanced_mse",
        "higher_is_better": higher,
    }


def test_diff_metrics_by_hand():
    a = {"sotu": {"ffn-s": stats(0.8, 0.6), "tx-s": stats(0.9, 0.5), "old": stats(0.5, 0.5)}}
    b = {
        "sotu": {"ffn-s": stats(0.85, 0.55), "tx-s": stats(0.9, 0.5), "new": stats(0.7, 0.6)},
        "amazon": {"ffn-s": stats(0.7, 0.9, higher=False)},
    }
    rows = diff_metrics(a, b)
    assert list(rows) == ["amazon", "sotu"]
    sotu = {r["model"]: r for r in rows["sotu"]}
    assert {m: r["status"] for m, r in sotu.items()} == {
        "ffn-s": "changed",
        "new": "added",
        "old": "removed",
        "tx-s": "unchanged",
    }
    ffn = sotu["ffn-s"]
    assert ffn["id"] == {"a": 0.8, "b": 0.85, "change": approx(0.05), "improved": True}
    assert ffn["future"]["change"] == approx(-0.05) and ffn["future"]["improved"] is False
    assert ffn["decay"]["change"] == approx(0.1) and ffn["decay"]["improved"] is False  # more decay is worse
    assert sotu["new"]["id"] == {"a": None, "b": 0.7, "change": None, "improved": None}
    assert sotu["tx-s"]["id"]["improved"] is None
    assert rows["amazon"][0]["status"] == "added" and rows["amazon"][0]["higher_is_better"] is False


def test_a_dataset_whose_report_stage_did_not_run_says_not_re_run():
    metrics = {"id": 0.8, "future": 0.7, "decay": 0.1, "metric": "accuracy", "higher_is_better": True}
    a = {"sotu": {"ffn-s": metrics}, "mine": {"ffn-s": metrics}}
    b = {"sotu": {"ffn-s": metrics}, "mine": {"ffn-s": {**metrics, "id": 0.9}}}
    locks_a = {"sotu": {"outs": [{"md5": "1"}]}, "mine": {"outs": [{"md5": "2"}]}}
    locks_b = {"sotu": {"outs": [{"md5": "1"}]}, "mine": {"outs": [{"md5": "3"}]}}
    rows = not_rerun(diff_metrics(a, b), locks_a, locks_b)
    assert [r["status"] for r in rows["sotu"]] == ["not re-run"] and [r["status"] for r in rows["mine"]] == [
        "changed"
    ]
    # the same numbers from a report that ran again are "unchanged"; without a lock nothing is claimed
    assert not_rerun(diff_metrics(a, a), locks_a, locks_b)["mine"][0]["status"] == "unchanged"
    assert not_rerun(diff_metrics(a, a), {}, {})["sotu"][0]["status"] == "unchanged"


def test_improvement_is_direction_aware():
    a = {"amazon": {"ffn-s": stats(0.8, 1.0, higher=False)}}
    b = {"amazon": {"ffn-s": stats(0.7, 1.1, higher=False)}}
    r = diff_metrics(a, b)["amazon"][0]
    assert r["id"]["improved"] is True  # lower balanced MSE in distribution
    assert r["future"]["improved"] is False  # higher on the future
    assert r["decay"]["change"] == approx(0.2) and r["decay"]["improved"] is False
    assert diff_params({"x": 1, "y": [1]}, {"x": 2, "y": [1], "z": 0}) == {
        "x": {"a": 1, "b": 2},
        "z": {"a": None, "b": 0},
    }


def test_compare_keeps_reference_rows(monkeypatch):
    """Reference models (baseline-*) are rows like any other in `drift compare`, marked and listed last."""
    import contextlib

    from typer.testing import CliRunner

    import drift.report.api as api  # where `drift compare` reads the revisions
    from drift.cli import app

    prior = {**stats(0.6, 0.6), "family": "Reference", "reference": True}
    a = {"sotu": {"ffn-s": stats(0.8, 0.6), "baseline-prior": prior}}
    b = {
        "sotu": {
            "ffn-s": {**stats(0.85, 0.55), "margin_prior": 0.25, "beats_prior": True},
            "baseline-prior": {**prior, "id": 0.62, "decay": 0.02},
            "baseline-linear": stats(0.7, 0.65),
        }
    }
    rows = diff_metrics(a, b)["sotu"]
    assert [(r["model"], r["reference"], r["status"]) for r in rows] == [
        ("ffn-s", False, "changed"),
        ("baseline-linear", True, "added"),
        ("baseline-prior", True, "changed"),
    ]
    assert rows[2]["id"]["change"] == approx(0.02) and rows[2]["id"]["improved"] is True

    monkeypatch.setattr(api, "_open_repo", lambda root: contextlib.nullcontext())
    monkeypatch.setattr(api, "metrics_at", lambda repo, rev: a if rev == "A" else b)
    monkeypatch.setattr(api, "params_at", lambda repo, rev: {})
    monkeypatch.setattr(api, "report_locks_at", lambda repo, rev: {})
    result = CliRunner().invoke(app, ["compare", "A", "B", "--json"])
    assert result.exit_code == 0, result.output
    assert [r["model"] for r in json.loads(result.stdout)["datasets"]["sotu"]] == [
        "ffn-s",
        "baseline-linear",
        "baseline-prior",
    ]
    result = CliRunner().invoke(app, ["compare", "A", "B"])
    assert result.exit_code == 0, result.output
    assert "baseline-prior (ref)" in result.stdout and "baseline-linear (ref)" in result.stdout
    assert "0.620 (+0.020)" in result.stdout


def git_json(repo: Path, rev: str, path: str) -> dict:
    return json.loads(run(["git", "show", f"{rev}:{path}"], repo).stdout)


@pytest.mark.compute
@pytest.mark.pipeline
def test_two_commits_compare_and_plots(project):
    params = only(tiny_params(), "synth-portraits")
    params["train"]["models"] = {"synth-portraits": ["mlp-s"]}
    repo = project(params)
    run(["dvc", "repro"], repo)
    run(["git", "add", "-A"], repo)
    run(["git", "commit", "-qm", "one epoch, mlp-s"], repo)

    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["train"]["epochs"] = 2
    params["train"]["models"]["synth-portraits"] = ["mlp-s", "cnn-s"]
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run(["dvc", "repro"], repo)
    run(["git", "add", "-A"], repo)
    run(["git", "commit", "-qm", "two epochs, mlp-s and cnn-s"], repo)

    # drift compare reads both commits' metrics through DVC
    result = drift("compare", "HEAD~1", "HEAD", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["params"]["train.epochs"] == {"a": 1, "b": 2}
    rows = {r["model"]: r for r in out["datasets"]["synth-portraits"]}
    before = git_json(repo, "HEAD~1", "metrics/synth-portraits/mlp-s.json")
    after = git_json(repo, "HEAD", "metrics/synth-portraits/mlp-s.json")
    for s in ("id", "future", "decay"):
        assert rows["mlp-s"][s]["a"] == approx(before[s]) and rows["mlp-s"][s]["b"] == approx(after[s])
        assert rows["mlp-s"][s]["change"] == approx(after[s] - before[s])
    assert rows["mlp-s"]["status"] == ("unchanged" if before == after else "changed")
    assert rows["cnn-s"]["status"] == "added" and rows["cnn-s"]["id"]["a"] is None
    table = drift("compare", "HEAD~1", "HEAD", cwd=repo).stdout
    assert "cnn-s" in table and "added" in table and "train.epochs: 1 → 2" in table
    # nothing re-ran between the last commit and the workspace: each row says so, not "unchanged (+0.000)"
    same = json.loads(drift("compare", "HEAD", "--json", cwd=repo).stdout)
    assert {r["status"] for r in same["datasets"]["synth-portraits"]} == {"not re-run"}
    bad = drift("compare", "nosuchrev", "HEAD", cwd=repo)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "nosuchrev" in bad.stderr

    # dvc plots diff shows both commits: the matrices (heatmap template), deviations, forgetting curves
    diff = json.loads(run(["dvc", "plots", "diff", "HEAD~1", "HEAD", "--json"], repo).stdout)["data"]
    for plot in (
        "plots/synth-portraits/mlp-s/matrix.json",
        "plots/deviations/synth-portraits/mlp-s.json",
        "plots/forgetting/synth-portraits.json",
    ):
        vega = next(e for e in diff[plot] if e["type"] == "vega")
        assert set(vega["revisions"]) == {"HEAD~1", "HEAD"}, plot
        assert {d["rev"] for d in vega["content"]["data"]["values"]} == {"HEAD~1", "HEAD"}
    assert {"HEAD"} == set(next(e for e in diff["plots/synth-portraits/cnn-s/matrix.json"])["revisions"])

    # drift plots renders the same specs to PNG offline
    result = drift("plots", "HEAD~1", "HEAD", "--out", "png", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    files = {w["plot"]: Path(w["file"]) for w in json.loads(result.stdout) if w["kind"] == "vega"}
    for plot in ("plots/synth-portraits/mlp-s/matrix.json", "plots/forgetting/synth-portraits.json"):
        data = (repo / files[plot]).read_bytes()
        assert data[:8] == PNG and len(data) > 5000
    assert (repo / "png/plots/synth-portraits/mlp-s/heatmap@HEAD~1.png").read_bytes()[:8] == PNG

    # drift show and the report's other outputs on the checkout
    shown = drift("show", "synth-portraits", "mlp-s", cwd=repo).stdout
    assert f"ID {after['id']:.3f}" in shown and f"Future {after['future']:.3f}" in shown
    assert f"Decay {after['decay']:.3f}" in shown
    tables = json.loads((repo / "tables/synth-portraits.json").read_text())
    assert [r["model"] for r in tables["ranking"] if r["rank"] is not None] in (
        ["mlp-s", "cnn-s"],
        ["cnn-s", "mlp-s"],
    )
    assert tables["references"] == ["baseline-prior", "baseline-linear"]  # listed, never ranked
    assert (repo / "plots/synth-portraits/saliency.png").read_bytes()[:8] == PNG

    # drift saliency from the checkpoints
    result = drift("saliency", "synth-portraits", "--cutoffs", "2000,2001", "--n", "16", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert {(p["model"], p["cutoff_label"], p["eval_label"]) for p in out["panels"]} == {
        (m, c, e) for m in ("cnn-s", "mlp-s") for c, e in (("2000", "2001"), ("2001", "2002"))
    }
    assert all(p["drawn"] and p["n"] == 16 for p in out["panels"])
    assert (repo / out["file"]).read_bytes()[:8] == PNG
    bad = drift("saliency", "synth-portraits", "--cutoffs", "1999", cwd=repo)
    assert bad.returncode == 2 and "unknown slice '1999'" in bad.stderr
