"""The files stages hand each other, as pydantic models (Artefact): each defined once, in the package of the
layer that writes it, and used by its writer and its readers. Written as `json.dumps(indent=2)` of the fields
that were set, in the order the model declares them, plus a newline; read back validated, so a file of another
version or a damaged one stops its reader with one line naming the file and the stage that rewrites it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from drift.core.errors import DriftError

# a number as JSON gave it: an int stays an int, a float a float, so a file round-trips to the same bytes
Number = float | int


A = TypeVar("A", bound="Artefact")


class Artefact(BaseModel):
    """A JSON file one stage writes and another reads. Unknown keys are errors (a file of another version);
    optional fields that were never set are left out of the file, so an older writer's bytes are kept."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    WRITER: ClassVar[str] = ""  # the DVC stage that writes it ("slice", "embed", ...), named in read errors
    WHAT: ClassVar[str] = "file"  # what it is, in words

    def as_json(self) -> dict[str, Any]:
        """The file's content: the fields that were set, in declaration order (nested models alike), under
        their aliases (a key that is no Python name)."""
        return self.model_dump(exclude_unset=True, by_alias=True)

    def dumps(self) -> str:
        return json.dumps(self.as_json(), indent=2) + "\n"

    def to_file(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.dumps())

    @classmethod
    def rerun(cls, dataset: str) -> str:
        return f"`dvc repro -f {cls.WRITER}@{dataset}`" if cls.WRITER else "the stage that writes it"

    @classmethod
    def parse(cls: type[A], data: Any, path: Path | str, dataset: str = "<dataset>") -> A:
        """`data` (a file's parsed JSON) as this model; one DriftError line when it is not one."""
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(top level)"
            more = f" and {e.error_count() - 1} more" if e.error_count() > 1 else ""
            raise DriftError(
                f"{path} is not a valid {cls.WHAT} for this version ({where}: {first['msg']}{more}): "
                f"re-run {cls.rerun(dataset)}"
            ) from None

    @classmethod
    def from_file(cls: type[A], path: Path | str, dataset: str = "<dataset>") -> A:
        """The file at `path`, validated; a missing, unreadable or invalid one is one DriftError line naming
        the file and the stage to run."""
        path = Path(path)
        if not path.exists():
            raise DriftError(f"{path} is missing: run {cls.rerun(dataset).replace(' -f', '')} first")
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise DriftError(f"{path} is damaged ({e}): re-run {cls.rerun(dataset)}") from None
        return cls.parse(data, path, dataset)


# the closed sets artefacts name (drift.protocol.tasks.TASKS and the dataset registry's modalities; tests
# check)
TaskName = Literal["binary", "multiclass", "regression", "multilabel"]
MetricName = Literal["accuracy", "macro_f1", "balanced_mse", "macro_auc"]
Modality = Literal["text", "image"]
Executor = Literal["local", "ray"]
