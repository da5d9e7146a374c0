"""The `drift` command, run as users run it."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

DRIFT = str(Path(sys.executable).parent / "drift")


def write_metrics(root: Path):
    for model, (id_, future) in {"ffn-s": (0.8, 0.7), "tx-s": (0.9, 0.6), "bigru-s": (0.7, 0.69)}.items():
        path = root / "metrics" / "sotu" / f"{model}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"id": id_, "future": future, "decay": id_ - future, "metric": "accuracy",
                                    "higher_is_better": True, "k": 18, "seeds": 1, "family": "x"}))
    path = root / "metrics" / "amazon" / "ffn-s.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"id": 0.7, "future": 0.8, "decay": 0.1, "metric": "balanced_mse",
                                "higher_is_better": False, "k": 20, "seeds": 3, "family": "FFN"}))


def drift(*args, cwd):
    return subprocess.run([DRIFT, *args], cwd=cwd, capture_output=True, text=True)


def test_summary_ranks_by_future(tmp_path):
    write_metrics(tmp_path)
    result = drift("summary", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert [r["model"] for r in out["sotu"]] == ["ffn-s", "bigru-s", "tx-s"]
    assert [r["rank"] for r in out["sotu"]] == [1, 2, 3]
    table = drift("summary", "sotu", cwd=tmp_path).stdout
    assert "ffn-s" in table and "0.700" in table and "amazon" not in table
    assert "lower is better" in drift("summary", "amazon", cwd=tmp_path).stdout


def test_summary_errors_are_one_line(tmp_path):
    result = drift("summary", cwd=tmp_path)
    assert result.returncode == 2 and "run `dvc repro` first" in result.stderr
    write_metrics(tmp_path)
    result = drift("summary", "sotuu", cwd=tmp_path)
    assert result.returncode == 2 and "did you mean sotu" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_models_json_fields(tmp_path):
    result = drift("models", "--json", cwd=tmp_path)
    rows = json.loads(result.stdout)
    assert {tuple(sorted(r)) for r in rows} == {("family", "input", "name", "size", "total_params", "trainable_params")}
    by_name = {r["name"]: r for r in rows}
    assert by_name["probe-dinov2-s"]["trainable_params"] == 770 and by_name["probe-minilm-l6"]["trainable_params"] == 385
    assert abs(by_name["cnn-s"]["trainable_params"] - 94_000) / 94_000 < 0.1


def test_models_for_a_dataset_use_its_inputs_and_outputs():
    root = Path(__file__).resolve().parents[1]  # params.yaml: sotu is binary on 384-d MiniLM states
    rows = {r["name"]: r for r in json.loads(drift("models", "--dataset", "sotu", "--json", cwd=root).stdout)}
    assert rows["probe-minilm-l6"]["trainable_params"] == 384 * 2 + 2
    assert rows["probe-minilm-l6"]["total_params"] == 770 + 22_700_000  # the frozen encoder counts in the total
    assert rows["probe-roberta"]["trainable_params"] == 768 * 2 + 2
    assert "cnn-s" not in rows and "probe-dinov2-s" not in rows
    images = {r["name"] for r in json.loads(drift("models", "--dataset", "synth-portraits", "--json", cwd=root).stdout)}
    assert "cnn-s" in images and "ffn-s" not in images and "probe-dinov2-s" in images
