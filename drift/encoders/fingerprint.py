"""An encoder's fingerprint: what decides its outputs (its id and weights' bytes, a declaration's revision,
prefix and remote-code permission when set; its code: the encoder module's import closure inside drift/, as
dvc.yaml's code deps are computed; the versions of the libraries that compute among those that code imports
and those they require; plus each modality's pooling, normalisation, length, sizes and dtype, and a text
encoder's backend, quantisation and runtime versions when it does not run in torch:
drift/encoders/backends.py), hashed into the key of its table in the embedding store. Never its registry name:
a declaration renamed finds every row it computed. Another fingerprint is another table: nothing computed
under other settings or other code is served."""

from __future__ import annotations

import abc
import hashlib
import json
from pathlib import Path

from drift.core.closure import code_digest, external_imports, module_closure
from drift.core.encoder_registry import EncoderSpec
from drift.core.environment import cpu_path, library_versions
from drift.core.errors import DriftError


def weights_hash(path: Path) -> str:
    """sha256 over the weight files' names and bytes (one file, or those under a directory): a retrained or
    re-downloaded checkpoint is a new key."""
    digest = hashlib.sha256()
    if path.is_file():
        files = [path]
    else:
        files = sorted(
            p for p in path.rglob("*") if p.suffix in {".safetensors", ".bin", ".pt", ".pth"} and p.is_file()
        )
    if not files:
        raise DriftError(f"no weight files (.safetensors, .bin, .pt, .pth) in {path}")
    for f in files:
        digest.update(f.name.encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                digest.update(chunk)
    return digest.hexdigest()


def code_fields(module: str) -> dict:
    """{code_sha256, libraries} of an encoder module: its closure's files and the versions of the libraries
    among them that compute vectors (the digest covers both; KEY_LIBRARIES["encoder"]), and those versions
    themselves, readable in the table's metadata."""
    files = module_closure(module)
    return {
        "code_sha256": code_digest(files, key="encoder"),
        "libraries": library_versions(external_imports(files), "encoder"),
    }


class Fingerprinted(abc.ABC):
    """Mixin of the frozen encoders: `fingerprint()` = the spec's id and weights' sha256 (hashed once), its
    declaration's revision, prefix and allow_remote_code where set, the code and library versions of the
    encoder's module, plus its own `fingerprint_fields()`, plus cpu_path "native" on that CPU path
    (compute.cpu_path); `fingerprint_hash()` its sha256."""

    spec: EncoderSpec  # set by the encoder: its registry entry
    path: Path  # set by the encoder: its weights (a file or a directory)
    _weights_sha256: str | None = None
    _code: dict | None = None

    @abc.abstractmethod
    def fingerprint_fields(self) -> dict:
        """What else decides the encoder's outputs (pooling, lengths, sizes, dtype): each encoder's own."""

    def fingerprint(self) -> dict:
        if self._weights_sha256 is None:  # hashing a checkpoint takes a while: once per encoder
            self._weights_sha256 = weights_hash(self.path)
        if self._code is None:
            self._code = code_fields(type(self).__module__)
        declared = {
            key: getattr(self.spec, key)
            for key in ("revision", "prefix", "allow_remote_code")
            if getattr(self.spec, key)  # set only: the built-ins' fingerprints name none of them
        }
        return {
            "hub_id": self.spec.hub_id,
            "weights_sha256": self._weights_sha256,
            **declared,
            **self._code,
            **self.fingerprint_fields(),
            # the machine's own code paths give other bits: their rows are another table (the default adds
            # none)
            **({"cpu_path": "native"} if cpu_path() == "native" else {}),
        }

    def fingerprint_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.fingerprint(), sort_keys=True).encode()).hexdigest()
