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

from drift.core.errors import DriftError

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
# when each library loads, so set before torch is imported, by the entry points that compute (importing drift
# sets nothing): the stage scripts and the CLI (use_cpu_path), Ray's workers (drift/core/executor.py), the
# benchmarks and the test suite (tests/conftest.py); numpy reads its own when it is first imported, so they
# come first. A value already in the environment wins (ATEN_CPU_CAPABILITY=avx512 runs the native path). Any
# x86-64 CPU with AVX2 runs these. numpy's names are those of numpy >= 2.4 (the lock); an older numpy warns
# (ImportWarning) and keeps its AVX-512 loops. compute.cpu_path native (CPU_PATHS) leaves them all to the
# libraries, faster and machine-dependent: the stage scripts and the CLI apply the setting (use_cpu_path)
# before numpy and torch load.
CPU_CODE_PATH = {
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's vectorised kernels: default | avx2 | avx512
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN (convolutions, linear layers on CPU)
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",  # MKL's dispatch (torch's BLAS)
    # MKL's conditional numerical reproducibility. AVX2 left its GEMMs vendor-dependent: on an Intel CPU a
    # Linear of 2 or 16 outputs gave other bits than on an AMD one; COMPATIBLE gives the same on both
    # (docs/decisions.md)
    "MKL_CBWR": "COMPATIBLE",
    "OPENBLAS_CORETYPE": "Haswell",  # numpy's and scipy's OpenBLAS (the linear reference model): AVX2 kernels
    # numpy's own SIMD loops (exp, log, log1p, expm1, sin, ...: the estimates, the shift kernel) dispatch to
    # AVX-512 versions that round otherwise than the AVX2 ones: these targets off, every AVX2 CPU runs the
    # same
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
}


CPU_PATHS = ("portable", "native")  # compute.cpu_path: CPU_CODE_PATH pinned, or what the libraries pick
CPU_PATH_VARIABLE = "DRIFT_CPU_PATH"  # the path a process and the processes it starts run; unset: portable
PINNED_VARIABLE = "DRIFT_PINNED"  # the CPU_CODE_PATH names drift set, not the user: native takes them back


def cpu_path() -> str:
    """The CPU path this process runs, one of CPU_PATHS: $DRIFT_CPU_PATH (use_cpu_path sets it), else
    portable."""
    path = os.environ.get(CPU_PATH_VARIABLE) or "portable"
    if path not in CPU_PATHS:
        raise ValueError(
            f"{CPU_PATH_VARIABLE}={path!r} must be one of {', '.join(CPU_PATHS)}: unset it and choose with "
            "compute.cpu_path in params.yaml"
        )
    return path


def pin_cpu_code_path() -> dict[str, str]:
    """The CPU path in force (cpu_path) into os.environ. portable: each CPU_CODE_PATH variable not set already
    (the user's value wins); native: those drift set (here or in a parent process: $DRIFT_PINNED) taken back,
    the user's left. Returns the variables in force, the path's own among them (for Ray's workers)."""
    path = cpu_path()
    pinned = {name for name in os.environ.get(PINNED_VARIABLE, "").split(",") if name in CPU_CODE_PATH}
    for name, value in CPU_CODE_PATH.items():
        if path == "portable" and name not in os.environ:
            os.environ[name] = value
            pinned.add(name)
        elif path == "native" and name in pinned:
            if os.environ.get(name) == value:
                del os.environ[name]
            pinned.discard(name)
    if pinned:
        os.environ[PINNED_VARIABLE] = ",".join(sorted(pinned))
    else:
        os.environ.pop(PINNED_VARIABLE, None)
    names = (PINNED_VARIABLE, *CPU_CODE_PATH)
    return {CPU_PATH_VARIABLE: path, **{name: os.environ[name] for name in names if name in os.environ}}


def use_cpu_path(path: str) -> None:
    """Run this process, and those it starts, on `path` (one of CPU_PATHS) from now: what the stage scripts
    and the `drift` command do first, with configured_cpu_path(). numpy and torch read the variables once,
    when they load: switching paths after either has loaded is an error."""
    if path not in CPU_PATHS:
        raise ValueError(f"compute.cpu_path {path!r} must be one of {', '.join(CPU_PATHS)}")
    if path != cpu_path() and {"numpy", "torch"} & sys.modules.keys():
        raise RuntimeError(
            f"compute.cpu_path {path}: numpy or torch is loaded already on the {cpu_path()} path; choose the path "
            "before importing them (use_cpu_path first, as stages/*.py do)"
        )
    os.environ[CPU_PATH_VARIABLE] = path
    pin_cpu_code_path()


def configured_cpu_path(params: Path | str = "params.yaml") -> str:
    """params.yaml's compute.cpu_path, read with PyYAML alone (before numpy and torch load). portable when the
    file, the section or the key is missing or unreadable, or the value is none of CPU_PATHS: load_params then
    stops the stage or command with its one-line error, before any compute."""
    import yaml

    try:
        path = yaml.safe_load(Path(params).read_text())["compute"]["cpu_path"]
    except (OSError, UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError):
        return "portable"
    return path if isinstance(path, str) and path in CPU_PATHS else "portable"


def deterministic(threads: int) -> None:
    """Bit-identical runs for a seed: deterministic kernels and a fixed thread count (a reduction split over
    another number of threads adds in another order). What train and evaluate set before any compute."""
    import torch

    deterministic_kernels(True)
    torch.set_num_threads(max(1, int(threads)))


def deterministic_kernels(mode: bool) -> None:
    """torch's deterministic-algorithms switch, as torch.use_deterministic_algorithms(mode) sets it for eager
    code. That function also sets the compiler's flag, and importing the compiler's config to do so costs
    about 1.3 CPU-seconds a process (docs/decisions.md); nothing here compiles, so the compiler's flag is set
    only when the compiler is already loaded."""
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


# The libraries whose versions each cache key records: those whose code computes the numbers the key caches
# (docs/decisions.md "Cache keys record the libraries that compute"). A CLI, a progress bar, a downloader, a
# reader of bytes or the CUDA wheels torch pins exactly change no number: upgrading them keeps every key.
KEY_LIBRARIES = {
    # an embedding table (drift.encoders.fingerprint)
    "encoder": (
        "torch",  # the forward pass
        "torchvision",  # its networks and weights (embed.image_source torchvision)
        "timm",  # the vision networks, their heads' pooling, their pixel statistics
        "transformers",  # the text networks
        "tokenizers",  # what a text becomes (transformers' fast tokenizers)
        "sentence-transformers",  # a sentence-transformers model's modules
        "safetensors",  # reads the weights
        "numpy",  # what the vectors are handed back as
        "pillow",  # images, where an encoder decodes or resizes them
        "opencv-python",
        "opencv-python-headless",
        "onnxruntime",  # an encoder backend's runtime
        "onnxruntime-gpu",
        "openvino",
        "openvino-tokenizers",
        "optimum",
        "optimum-onnx",
        "optimum-intel",
    ),
    # a checkpoint (the train stage): the heads (torch), the reference models (scikit-learn on scipy's sparse
    # counts), the targets' and pixels' statistics (numpy)
    "checkpoint": ("torch", "numpy", "scikit-learn", "scipy"),
    # a cell (evaluate): the same predictions, and the metrics (numpy)
    "cell": ("torch", "numpy", "scikit-learn", "scipy"),
}


def library_versions(modules, key: str | None = None) -> dict[str, str | None]:
    """{distribution: version} of the installed distributions that provide these top-level modules, and of
    those they require (one level, no extras: transformers brings tokenizers and safetensors). A module that
    no distribution provides is left out; a required distribution that is not installed is None. `key` (a name
    of KEY_LIBRARIES) keeps only the libraries that compute that cache key's numbers; None keeps them all."""
    keep = None
    if key is not None:
        if key not in KEY_LIBRARIES:
            raise DriftError(f"no cache key {key!r}: name one of {', '.join(KEY_LIBRARIES)}")
        keep = set(KEY_LIBRARIES[key])
    found: dict[str, str | None] = {}
    for module in sorted(modules):
        for distribution in _module_distributions().get(module, []):
            found[_canonical(distribution)] = package_version(distribution)
            for required in _requirements(distribution):
                found.setdefault(_canonical(required), package_version(required))
    return {name: version for name, version in sorted(found.items()) if keep is None or name in keep}


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
    cpu_capability (torch's code path in force), cuda, cuda_device, lock_sha256}, and cpu_path "native" when
    that path ran (compute.cpu_path; absent on the portable one, so a default record is unchanged). `root` is
    the repository whose lock file is hashed (default: found from the working directory); lock_sha256 is None
    when there is no lock file."""
    root = Path(root) if root is not None else repository_root()
    lock = root / LOCK_FILE if root is not None else None
    return {
        "python": platform.python_version(),
        "packages": {name: package_version(name) for name in PACKAGES},
        "platform": {"machine": platform.machine(), "system": platform.system()},
        **_torch_runtime(),
        "lock_sha256": file_sha256(lock) if lock is not None and lock.is_file() else None,
        **({"cpu_path": "native"} if cpu_path() == "native" else {}),
    }


if __name__ == "__main__":
    print(json.dumps(environment(), indent=2))
