"""compute.cpu_path: portable pins the CPU code path (drift/core/environment.py CPU_CODE_PATH), native leaves
it to the libraries; the stage scripts and the CLI apply it before numpy and torch load, and every key, metric
and environment record of a native run says so while the default ones stay as they were."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from drift.core import environment as env_module
from drift.core.environment import (
    CPU_CODE_PATH,
    CPU_PATH_VARIABLE,
    PINNED_VARIABLE,
    configured_cpu_path,
    environment,
    pin_cpu_code_path,
    use_cpu_path,
)
from drift.core.errors import DriftError
from drift.core.params import load_params
from drift.encoders.fingerprint import Fingerprinted
from drift.store.cells import cell_key, checkpoint_key
from tests.helpers import metrics_json

ROOT = Path(__file__).resolve().parents[2]

# what a stage script and the CLI do first (stages/*.py), then what the run sees once numpy and torch are
# loaded
STARTUP = (
    "from drift.core.environment import configured_cpu_path, use_cpu_path\n"
    "use_cpu_path(configured_cpu_path())\n"
    "import json, os, numpy, torch\n"
    f"print(json.dumps({{k: os.environ.get(k) for k in {sorted(CPU_CODE_PATH)!r}}}))\n"
)


def params_file(folder: Path, cpu_path) -> Path:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["compute"]["cpu_path"] = cpu_path
    (folder / "params.yaml").write_text(yaml.safe_dump(params))
    return folder / "params.yaml"


def start(folder: Path, env: dict | None = None, code: str = STARTUP) -> dict:
    """The CPU code path variables a process started in `folder` runs with (env: this process's by default)."""
    env = {**(os.environ if env is None else env), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=folder, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def clean_env(**user) -> dict:
    """This process's environment without drift's pins (a fresh shell), plus the user's own values."""
    drop = {*CPU_CODE_PATH, CPU_PATH_VARIABLE, PINNED_VARIABLE}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **user}


@pytest.mark.pipeline
def test_native_leaves_the_variables_to_the_libraries(tmp_path):
    params_file(tmp_path, "native")
    unset = dict.fromkeys(CPU_CODE_PATH)
    assert start(tmp_path, clean_env()) == unset
    # started by a pinned process (a portable parent, the test suite): what drift set there is taken back
    assert os.environ.get(PINNED_VARIABLE) and start(tmp_path) == unset


@pytest.mark.pipeline
def test_portable_pins_them_as_today(tmp_path):
    params_file(tmp_path, "portable")
    assert start(tmp_path, clean_env()) == CPU_CODE_PATH
    (tmp_path / "empty").mkdir()
    assert start(tmp_path / "empty", clean_env()) == CPU_CODE_PATH  # no params.yaml: portable


@pytest.mark.pipeline
def test_a_value_the_user_set_wins_on_either_path(tmp_path):
    params_file(tmp_path, "native")
    assert start(tmp_path, clean_env(MKL_CBWR="AVX2")) == {**dict.fromkeys(CPU_CODE_PATH), "MKL_CBWR": "AVX2"}
    params_file(tmp_path, "portable")
    assert start(tmp_path, clean_env(ATEN_CPU_CAPABILITY="default")) == {
        **CPU_CODE_PATH,
        "ATEN_CPU_CAPABILITY": "default",
    }


@pytest.mark.pipeline
def test_the_cli_starts_on_the_configured_path(tmp_path):
    params_file(tmp_path, "native")
    code = (
        "import sys, json, os, drift.cli\nsys.argv = ['drift', '--version']\ntry:\n    drift.cli.main()\n"
        "except SystemExit:\n    pass\n" + STARTUP.splitlines()[-1]
    )
    assert start(tmp_path, code=code) == dict.fromkeys(CPU_CODE_PATH)


@pytest.mark.pipeline
def test_every_stage_script_chooses_the_path_before_any_heavy_import():
    """The start-up line comes before every import but the interrupt handler's, and what it imports loads
    neither numpy nor torch."""
    for script in sorted((ROOT / "stages").glob("*.py")):
        body = ast.parse(script.read_text()).body
        calls = [
            i
            for i, node in enumerate(body)
            if isinstance(node, ast.Expr) and ast.unparse(node) == "use_cpu_path(configured_cpu_path())"
        ]
        assert calls, f"{script.name} does not apply compute.cpu_path"
        earlier = {node.module for node in body[: calls[0]] if isinstance(node, ast.ImportFrom)}
        assert earlier <= {"drift.core.interrupt", "drift.core.environment"}, (script.name, earlier)
    code = (
        "import sys, drift.core.interrupt, drift.core.environment\n"
        "print(sorted(m for m in ('numpy', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_ray_workers_get_the_path(monkeypatch):
    """What Ray's workers are given (drift/core/executor.py): the path, so their `import drift` pins or not."""
    assert pin_cpu_code_path() == {
        CPU_PATH_VARIABLE: "portable",
        PINNED_VARIABLE: os.environ[PINNED_VARIABLE],
        **CPU_CODE_PATH,
    }
    for name in (*CPU_CODE_PATH, PINNED_VARIABLE):  # restored after the test
        monkeypatch.setenv(name, os.environ[name])
    monkeypatch.setenv(CPU_PATH_VARIABLE, "native")
    assert pin_cpu_code_path() == {CPU_PATH_VARIABLE: "native"}
    assert not {*CPU_CODE_PATH, PINNED_VARIABLE} & set(os.environ)


class Stub(Fingerprinted):
    """An encoder's fingerprint without an encoder: fixed weights and code fields."""

    spec = type("Spec", (), {"hub_id": "stub", "revision": None, "prefix": None, "allow_remote_code": None})()
    _weights_sha256 = "0" * 64
    _code = {"code_sha256": "c", "libraries": {}}

    def fingerprint_fields(self) -> dict:
        return {"pooling": "mean"}


# the keys of these arguments before compute.cpu_path existed: the default path keeps them
CHECKPOINT_ARGS = ("probe-linear", 0, "rows", "inputs", {"epochs": 3}, "code")
CELL_ARGS = ("ckpt", "rows", "macro_f1", "code")
DEFAULT_KEYS = {
    "checkpoint": "d12d6af4ecd5f70346a898cea0947686eb9a007c1921e59866f8cd63d60f684d",
    "cell": "96bdfb8d1aa9b3e4b4a8bafe4e5fbc5ee90d7ee82bbd48e623f1d6b4402c8fb0",
    "fingerprint": "426e3a123edc64dfc410eaa6263c9b3b9ae87791bcfa887c80c948658bf3dd81",
}


def keys() -> dict:
    return {
        "checkpoint": checkpoint_key(*CHECKPOINT_ARGS),
        "cell": cell_key(*CELL_ARGS),
        "fingerprint": Stub().fingerprint_hash(),
    }


def test_the_default_path_keeps_todays_keys_and_native_has_its_own(monkeypatch):
    monkeypatch.delenv(CPU_PATH_VARIABLE, raising=False)
    assert keys() == DEFAULT_KEYS
    assert "cpu_path" not in Stub().fingerprint() and "cpu_path" not in environment(ROOT)
    monkeypatch.setenv(CPU_PATH_VARIABLE, "portable")  # set explicitly, as a stage does: the same keys
    assert keys() == DEFAULT_KEYS
    monkeypatch.setenv(CPU_PATH_VARIABLE, "native")
    native = keys()
    assert all(native[k] != DEFAULT_KEYS[k] for k in DEFAULT_KEYS), native
    assert Stub().fingerprint()["cpu_path"] == "native" and environment(ROOT)["cpu_path"] == "native"


def test_metrics_name_the_native_path_only():
    assert "cpu_path" not in json.loads(metrics_json())  # a default metrics file: the same bytes as before
    assert json.loads(metrics_json(cpu_path="native"))["cpu_path"] == "native"
    with pytest.raises(Exception, match="native"):
        metrics_json(cpu_path="portable")


@pytest.mark.pipeline
def test_a_bad_value_is_one_line_naming_both_paths(tmp_path, monkeypatch):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["compute"]["cpu_path"] = "fast"
    with pytest.raises(DriftError, match=r"^compute\.cpu_path must be one of portable, native, got 'fast'$"):
        load_params(params)
    # the start-up's own read stays portable; the stage's typed read then stops it with that line, exit 2
    path = params_file(tmp_path, "fast")
    assert configured_cpu_path(path) == "portable"
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    out = subprocess.run(
        [sys.executable, str(ROOT / "stages" / "slice.py"), "sotu"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert out.stderr.strip() == "error: compute.cpu_path must be one of portable, native, got 'fast'"
    monkeypatch.setenv(CPU_PATH_VARIABLE, "fast")
    with pytest.raises(ValueError, match="must be one of portable, native"):
        env_module.cpu_path()


def test_the_path_is_chosen_before_numpy_loads(monkeypatch):
    monkeypatch.delenv(CPU_PATH_VARIABLE, raising=False)
    use_cpu_path("portable")  # the path in force: nothing to change
    monkeypatch.delenv(CPU_PATH_VARIABLE)
    with pytest.raises(RuntimeError, match="before importing them"):
        use_cpu_path("native")  # numpy is loaded here: too late
    assert CPU_PATH_VARIABLE not in os.environ and os.environ["MKL_CBWR"] == "COMPATIBLE"
