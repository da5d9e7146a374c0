"""What a result was computed with: package versions, platform, torch threads and device, and the lock file.

`environment()` is cheap: versions come from the installed distributions' metadata (importlib.metadata), not
from importing the packages; only torch is imported, for its thread count and CUDA device. A package that is
not installed is `None`, never an error. `python -m drift.core.environment` prints it as JSON.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import sys
from collections.abc import Mapping
from functools import cache, lru_cache
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

# distributions (as pip names them) whose versions can change results; pylance is the `lance` module
PACKAGES = (
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
)
LOCK_FILE = "requirements.lock"  # written by `make lock`, installed from by `make install`

# The CPU code path torch's kernels (ATen), oneDNN, MKL and OpenBLAS choose at run time, pinned to AVX2: an
# AVX-512 machine would otherwise sum in other orders and give other numbers in the 4th decimal. Read once
# when each library loads, so set before torch is imported: drift/__init__.py (every stage script and the CLI),
# Ray's workers (drift/core/executor.py), the test suite (tests/conftest.py); numpy's reads its own when it is
# first imported, so drift is imported before numpy too. A value already in the environment wins
# (ATEN_CPU_CAPABILITY=avx512 runs the native path). Any x86-64 CPU with AVX2 runs these. numpy's names are
# those of numpy >= 2.4 (the lock); an older numpy warns (ImportWarning) and keeps its AVX-512 loops.
CPU_CODE_PATH = {
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's vectorised kernels: default | avx2 | avx512
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN (convolutions, linear layers on CPU)
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",  # MKL's dispatch (torch's BLAS)
    # MKL's conditional numerical reproducibility. AVX2 left its GEMMs vendor-dependent: on an Intel CPU a Linear
    # of 2 or 16 outputs gave other bits than on an AMD one; COMPATIBLE gives the same on both (docs/decisions.md)
    "MKL_CBWR": "COMPATIBLE",
    "OPENBLAS_CORETYPE": "Haswell",  # numpy's and scipy's OpenBLAS (the linear reference model): AVX2 kernels
    # numpy's own SIMD loops (exp, log, log1p, expm1, sin, ...: the estimates, the shift kernel) dispatch to
    # AVX-512 versions that round otherwise than the AVX2 ones: these targets off, every AVX2 CPU runs the same
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
}


def pin_cpu_code_path() -> dict[str, str]:
    """CPU_CODE_PATH into os.environ where not set already; returns the values in force (for Ray's workers)."""
    for name, value in CPU_CODE_PATH.items():
        os.environ.setdefault(name, value)
    return {name: os.environ[name] for name in CPU_CODE_PATH}


def deterministic(threads: int) -> None:
    """Bit-identical runs for a seed: deterministic kernels and a fixed thread count (a reduction split over
    another number of threads adds in another order). What train and evaluate set before any compute."""
    import torch

    deterministic_kernels(True)
    torch.set_num_threads(max(1, int(threads)))


def deterministic_kernels(mode: bool) -> None:
    """torch's deterministic-algorithms switch, as torch.use_deterministic_algorithms(mode) sets it for eager
    code. That function also sets the compiler's flag, and importing the compiler's config to do so costs about
    1.3 CPU-seconds a process (docs/decisions.md); nothing here compiles, so the compiler's flag is set only
    when the compiler is already loaded."""
    import torch

    if "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(mode)
    else:
        torch._C._set_deterministic_algorithms(mode, warn_only=False)


@cache  # installed versions do not change under a running process
def package_version(distribution: str) -> str | None:
    """The installed version of a distribution, None when it is not installed."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def _module_distributions() -> Mapping[str, list[str]]:
    return metadata.packages_distributions()  # scans every installed distribution: once per process


@cache
def _requirements(distribution: str) -> tuple[str, ...]:
    """The distributions `distribution` requires when installed without extras (one level)."""
    names = []
    for line in metadata.requires(distribution) or []:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            names.append(requirement.name)
    return tuple(names)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def library_versions(modules) -> dict[str, str | None]:
    """{distribution: version} of the installed distributions that provide these top-level modules, and of
    those they require (one level, no extras: transformers brings tokenizers and safetensors). A module that no
    distribution provides is left out; a required distribution that is not installed is None."""
    found: dict[str, str | None] = {}
    for module in sorted(modules):
        for distribution in _module_distributions().get(module, []):
            found[_canonical(distribution)] = package_version(distribution)
            for required in _requirements(distribution):
                found.setdefault(_canonical(required), package_version(required))
    return dict(sorted(found.items()))


def repository_root(start: Path | str | None = None) -> Path | None:
    """The directory holding dvc.yaml: `start` (default: the working directory) or its closest parent that has
    one, else the checkout this package was imported from; None when neither is in a repository."""
    candidates = [Path(start or os.getcwd()).resolve()]
    if start is None:
        candidates.append(Path(__file__).resolve().parents[2])
    for candidate in candidates:
        for directory in (candidate, *candidate.parents):
            if (directory / "dvc.yaml").is_file():
                return directory
    return None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _torch_runtime() -> dict:
    try:
        import torch  # lazy: torch kept out of torch-free stages
    except Exception:  # not installed, or broken: the record says so rather than failing the stage
        return {"torch_threads": None, "cpu_capability": None, "cuda": False, "cuda_device": None}
    cuda = bool(torch.cuda.is_available())
    return {
        "torch_threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cuda": cuda,
        "cuda_device": torch.cuda.get_device_name(torch.cuda.current_device()) if cuda else None,
    }


def environment(root: Path | str | None = None) -> dict:
    """{python, packages: {distribution: version or None}, platform: {machine, system}, torch_threads,
    cpu_capability (torch's code path in force), cuda, cuda_device, lock_sha256}. `root` is the repository whose lock file is hashed (default: found from the
    working directory); lock_sha256 is None when there is no lock file."""
    root = Path(root) if root is not None else repository_root()
    lock = root / LOCK_FILE if root is not None else None
    return {
        "python": platform.python_version(),
        "packages": {name: package_version(name) for name in PACKAGES},
        "platform": {"machine": platform.machine(), "system": platform.system()},
        **_torch_runtime(),
        "lock_sha256": file_sha256(lock) if lock is not None and lock.is_file() else None,
    }


if __name__ == "__main__":
    print(json.dumps(environment(), indent=2))
