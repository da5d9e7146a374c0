"""An encoder's fingerprint: what decides its outputs (its name and weights' bytes, plus each modality's pooling,
length, sizes and dtype), hashed into the key of its table in the embedding store. Another fingerprint is another
table: nothing computed under other settings is served."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from drift.core.errors import DriftError


def weights_hash(path: Path) -> str:
    """sha256 over the weight files' names and bytes (one file, or those under a directory): a retrained or
    re-downloaded checkpoint is a new key."""
    digest = hashlib.sha256()
    if path.is_file():
        files = [path]
    else:
        files = sorted(p for p in path.rglob("*")
                       if p.suffix in {".safetensors", ".bin", ".pt", ".pth"} and p.is_file())
    if not files:
        raise DriftError(f"no weight files (.safetensors, .bin, .pt, .pth) in {path}")
    for f in files:
        digest.update(f.name.encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                digest.update(chunk)
    return digest.hexdigest()


class Fingerprinted:
    """Mixin of the frozen encoders: `fingerprint()` = the spec's name, hub id and weights' sha256 (hashed once)
    plus the encoder's own `fingerprint_fields()`; `fingerprint_hash()` its sha256."""
    _weights_sha256: str | None = None

    def fingerprint(self) -> dict:
        if self._weights_sha256 is None:  # hashing a checkpoint takes a while: once per encoder
            self._weights_sha256 = weights_hash(self.path)
        return {"encoder": self.spec.name, "hub_id": self.spec.hub_id, "weights_sha256": self._weights_sha256,
                **self.fingerprint_fields()}

    def fingerprint_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.fingerprint(), sort_keys=True).encode()).hexdigest()
