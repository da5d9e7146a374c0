"""drift.core.environment: the record of what a result was computed with."""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from drift.core import environment as env_module
from drift.core.environment import CPU_CODE_PATH, PACKAGES, environment, repository_root

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def record() -> dict:
    return environment(ROOT)


def test_every_key_is_there_and_json_serialisable(record):
    assert set(record) == {"python", "packages", "platform", "torch_threads", "cpu_capability", "cuda",
                           "cuda_device", "lock_sha256"}
    assert set(record["packages"]) == {"torch", "torchvision", "timm", "transformers", "sentence-transformers",
                                       "pylance", "pyarrow", "numpy", "scikit-learn", "dvc"}
    assert set(record["platform"]) == {"machine", "system"}
    assert json.loads(json.dumps(record)) == record


def test_versions_are_the_installed_distributions(record):
    assert record["python"] == platform.python_version()
    for name in PACKAGES:
        assert record["packages"][name] == importlib.metadata.version(name), name
    assert record["platform"] == {"machine": platform.machine(), "system": platform.system()}


def test_torch_threads_and_device(record):
    import torch

    assert record["torch_threads"] == torch.get_num_threads() and record["torch_threads"] >= 1
    assert record["cuda"] is torch.cuda.is_available()
    assert (record["cuda_device"] is None) == (not record["cuda"])


def test_lock_hash_is_the_lock_files_sha256(tmp_path):
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    assert environment(tmp_path)["lock_sha256"] is None  # no lock file: null
    lock = tmp_path / "requirements.lock"
    lock.write_bytes(b"numpy==2.0.0\ntorch==2.14.1\n")
    assert environment(tmp_path)["lock_sha256"] == hashlib.sha256(lock.read_bytes()).hexdigest()
    if (ROOT / "requirements.lock").exists():
        assert environment(ROOT)["lock_sha256"] == hashlib.sha256((ROOT / "requirements.lock").read_bytes()).hexdigest()


def test_the_repository_root_is_found_from_a_subdirectory(tmp_path, monkeypatch):
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (tmp_path / "requirements.lock").write_text("pyarrow==1\n")
    (tmp_path / "data" / "x").mkdir(parents=True)
    assert repository_root(tmp_path / "data" / "x") == tmp_path.resolve()
    monkeypatch.chdir(tmp_path / "data" / "x")
    assert environment()["lock_sha256"] == hashlib.sha256(b"pyarrow==1\n").hexdigest()
    assert repository_root(Path("/")) is None


def test_a_missing_package_is_null_not_an_error(monkeypatch):
    monkeypatch.setattr(env_module, "PACKAGES", (*PACKAGES, "no-such-distribution-drift"))
    record = environment(ROOT)
    assert record["packages"]["no-such-distribution-drift"] is None
    assert record["packages"]["numpy"] == importlib.metadata.version("numpy")


def test_no_torch_gives_nulls_not_an_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    record = environment(ROOT)
    assert (record["torch_threads"], record["cuda"], record["cuda_device"]) == (None, False, None)


def test_cheap_versions_do_not_import_the_libraries():
    code = ("import sys; from drift.core.environment import package_version, PACKAGES; "
            "[package_version(p) for p in PACKAGES]; "
            "print(sorted(m for m in ('torch', 'timm', 'transformers', 'lance', 'sklearn', 'dvc') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("preset, expected", [(None, "AVX2"), ("default", "DEFAULT"), ("avx512", "AVX512")])
def test_importing_drift_pins_the_cpu_code_path_before_torch(preset, expected):
    """A stage script imports drift before torch: torch's kernels, oneDNN, MKL and OpenBLAS run their AVX2 code
    path on any x86-64 CPU (this test's machine may have AVX-512), unless the environment chose another."""
    env = {k: v for k, v in os.environ.items() if k not in CPU_CODE_PATH}
    if preset:
        env["ATEN_CPU_CAPABILITY"] = preset
    code = "import drift, os, torch; print(torch.backends.cpu.get_cpu_capability(), os.environ['MKL_CBWR'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    if expected == "AVX512" and "avx512f" not in Path("/proc/cpuinfo").read_text():
        expected = "AVX2"  # torch falls back to the best path the CPU has
    assert out.stdout.split() == [expected, "AVX2"]
