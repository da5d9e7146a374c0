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

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def record() -> dict:
    return environment(ROOT)


@pytest.mark.compute
@pytest.mark.pipeline
def test_every_key_is_there_and_json_serialisable(record):
    assert set(record) == {
        "python",
        "packages",
        "platform",
        "torch_threads",
        "cpu_capability",
        "cuda",
        "cuda_device",
        "lock_sha256",
    }
    assert set(record["packages"]) == {
        "torch",
        "torchvision",
        "timm",
        "transformers",
        "sentence-transformers",
        "pylance",
        "pyarrow",
        "numpy",
        "scikit-learn",
        "dvc",
    }
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
        assert (
            environment(ROOT)["lock_sha256"]
            == hashlib.sha256((ROOT / "requirements.lock").read_bytes()).hexdigest()
        )


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


@pytest.mark.compute
@pytest.mark.pipeline
def test_cheap_versions_do_not_import_the_libraries():
    code = (
        "import sys; from drift.core.environment import package_version, PACKAGES; "
        "[package_version(p) for p in PACKAGES]; "
        "print(sorted(m for m in ('torch', 'timm', 'transformers', 'lance', 'sklearn', 'dvc') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def native_capability() -> str:
    """The code path torch picks on this CPU when nothing pins it (what CPUID offers, not /proc/cpuinfo)."""
    env = {k: v for k, v in os.environ.items() if k not in CPU_CODE_PATH}
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


# what an entry point (a stage script, the `drift` command, a benchmark) does before numpy and torch load
PIN = "from drift.core.environment import pin_cpu_code_path; pin_cpu_code_path()"


@pytest.mark.compute
@pytest.mark.pipeline
def test_importing_drift_leaves_the_environment_as_it_was():
    """A notebook that imports drift's library, every module of it, keeps its own numpy, torch and matplotlib
    setup: the same backend, no variable set, none removed, beyond what the libraries drift uses set when they
    load (scikit-learn, polars and timm set three of their own: imported first, they are the baseline)."""
    env = {k: v for k, v in os.environ.items() if k not in CPU_CODE_PATH and not k.startswith("DRIFT_")}
    code = (
        "import os, pkgutil, importlib\n"
        "import numpy, torch, sklearn, polars, pyarrow, lance, timm, transformers, sentence_transformers, matplotlib\n"
        "before, backend = dict(os.environ), str(dict.__getitem__(matplotlib.rcParams, 'backend'))\n"
        "import drift\n"
        "names = [m.name for m in pkgutil.walk_packages(drift.__path__, 'drift.') if not m.name.endswith('__main__')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "from drift.cli import app\n"
        "changed = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k))\n"
        "changed += ['matplotlib backend'] if str(dict.__getitem__(matplotlib.rcParams, 'backend')) != backend else []\n"
        "print(len(names), changed)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    count, changed = out.stdout.strip().split(" ", 1)
    assert int(count) > 100 and changed == "[]", out.stdout


@pytest.mark.pipeline
@pytest.mark.parametrize("preset, expected", [(None, "AVX2"), ("default", "DEFAULT"), ("avx512", "AVX512")])
def test_the_pinned_path_holds_for_torch(preset, expected):
    """A stage script pins the CPU code path before torch loads: torch's kernels, oneDNN and OpenBLAS run
    their AVX2 code path on any x86-64 CPU (this test's machine may have AVX-512), MKL its vendor-independent
    one (COMPATIBLE), unless the environment chose another."""
    env = {k: v for k, v in os.environ.items() if k not in CPU_CODE_PATH}
    if preset:
        env["ATEN_CPU_CAPABILITY"] = preset
    code = f"{PIN}; import os, torch; print(torch.backends.cpu.get_cpu_capability(), os.environ['MKL_CBWR'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    if expected == "AVX512" and native_capability() != "AVX512":
        # a CPU without AVX-512: torch caps the preset at AVX2, or (2.14 on an AMD EPYC without avx512f in
        # /proc/cpuinfo) reports the preset it was given without running a kernel of it here
        assert out.stdout.split() in (["AVX2", "COMPATIBLE"], ["AVX512", "COMPATIBLE"])
        return
    assert out.stdout.split() == [expected, "COMPATIBLE"]


NUMPY_AVX512 = ("X86_V4", "AVX512_ICL", "AVX512_SPR")  # numpy >= 2.4's AVX-512 dispatch targets


@pytest.mark.pipeline
def test_the_pinned_path_turns_numpys_avx512_loops_off():
    """numpy's own loops (exp, log, sin, ...) round otherwise in their AVX-512 versions: on the pinned path
    only the AVX2 ones can run, here and in this test process (conftest pins before numpy is imported)."""
    env = {k: v for k, v in os.environ.items() if k not in CPU_CODE_PATH}
    code = (
        f"{PIN}; import numpy; from numpy._core._multiarray_umath import __cpu_features__ as f; "
        f"print([t for t in {NUMPY_AVX512!r} if f.get(t)])"
    )
    out = subprocess.run(
        [sys.executable, "-W", "error::ImportWarning", "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]", out.stderr
    from numpy._core._multiarray_umath import __cpu_features__

    assert [t for t in NUMPY_AVX512 if __cpu_features__.get(t)] == []


def test_numpys_transcendentals_give_the_avx2_bits():
    """The same bits on any x86-64 with AVX2: these digests were computed natively (an AVX-512 CPU, pinned)
    and under `qemu-x86_64 -cpu Haswell` (AVX2, no AVX-512), where numpy's AVX-512 loops gave others."""
    import numpy as np

    x = np.random.default_rng(0).standard_normal(1000)
    digests = {
        name: hashlib.sha256(f(x).tobytes()).hexdigest()[:12]
        for name, f in {
            "exp": np.exp,
            "log": lambda v: np.log(np.abs(v)),
            "log1p": lambda v: np.log1p(np.abs(v)),
            "expm1": np.expm1,
        }.items()
    }
    assert digests == {
        "exp": "88812449833f",
        "log": "5b2645eb87d1",
        "log1p": "9803b7ee1c07",
        "expm1": "d024bd88acda",
    }


# sha256 (first 8 hex digits) of F.linear(a, w, b) for [n, k] x [m, k] from torch.randn (generator seeded 0,
# drawn in this order), under the pinned path: the same natively on an Intel Xeon (AVX-512, FP16) and under
# `qemu-x86_64 -cpu EPYC-Milan` (AMD, AVX2); with MKL_CBWR=AVX2 the Intel machine gave other bits for 6 of the
# 8
LINEAR_DIGESTS = {
    (8, 128, 2): "507b33e9",
    (64, 128, 1): "b3c802d1",
    (64, 384, 2): "eec6e65e",
    (64, 128, 16): "442899dc",
    (8, 3072, 32): "38697f40",
    (32, 384, 1536): "7e6004ba",
    (1, 128, 2): "d2743e9a",
    (16, 384, 7): "31f94fb5",
}


@pytest.mark.pipeline
def test_linear_layers_give_the_bits_of_every_vendor():
    """MKL's GEMM under the pinned path (MKL_CBWR=COMPATIBLE): a Linear of each shape the models use (heads of
    1, 2, 7 and 16 outputs, MiniLM's 384 x 1536) gives the bits recorded on an Intel and an emulated AMD CPU.
    """
    code = (
        f"{PIN}\n"
        "import hashlib, torch, torch.nn.functional as F\n"
        "torch.set_num_threads(1)\n"
        "g = torch.Generator().manual_seed(0)\n"
        f"for n, k, m in {list(LINEAR_DIGESTS)!r}:\n"
        "    a = torch.randn(n, k, generator=g); w = torch.randn(m, k, generator=g); b = torch.randn(m, generator=g)\n"
        "    print(hashlib.sha256(F.linear(a, w, b).numpy().tobytes()).hexdigest()[:8])\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in CPU_CODE_PATH}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert dict(zip(LINEAR_DIGESTS, out.stdout.split())) == LINEAR_DIGESTS
