"""The rehearsal's samples of the built-in corpora, in each corpus's real format (`drift rehearse`,
drift/run/rehearse.py). Their source files ship in this package (PROVENANCE.md: where each comes from, its
terms and its sha256); `write_sample` adapts them to a preset (its categories, its slices' years) and writes
them where the dataset's reader reads. Nothing here reads outside the installed package."""

from __future__ import annotations

import gzip
import io
import json
import re
import tarfile
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

from drift.core.errors import DriftError

SAMPLES = files(__name__)


def _amazon(cfg, target: Path, years: int, per_year: int, named: list[int]) -> str:
    """One <Category>.jsonl per category of `cfg` (every shipped one when it names none): the shipped file of
    that category where there is one, else real reviews of a category it leaves out, filed under the missing
    name."""
    shipped = {p.name.split(".")[0]: p for p in sorted(SAMPLES.joinpath("amazon").iterdir(), key=str)}
    shipped = {name: p for name, p in shipped.items() if p.name.endswith(".jsonl.gz")}
    categories = list(cfg.categories or shipped)
    spare = [c for c in shipped if c not in categories]
    target.mkdir(parents=True, exist_ok=True)
    refiled = []
    for category in categories:
        source = shipped.get(category)
        if source is None:
            if not spare:
                raise DriftError(
                    f"the shipped sample has no reviews left to file under {category}: give --data PATH"
                )
            source = shipped[spare.pop(0)]
            refiled.append(f"{category}<-{source.name.split('.')[0]}")
        (target / f"{category}.jsonl").write_bytes(gzip.decompress(source.read_bytes()))
    note = f"Amazon Reviews 2023 sample, {len(categories)} category files"
    return note + (
        f" ({len(refiled)} refiled from other categories: {', '.join(refiled)})" if refiled else ""
    )


def _arxiv(cfg, target: Path, years: int, per_year: int, named: list[int]) -> str:
    """The shipped papers (the snapshot's JSON lines), most of them first submitted in 2007, re-dated
    round-robin over the years of `cfg.slices` (every version and update_date moved by the same years), so
    that several cutoffs have papers to train on."""
    start, end = cfg.slices.start, cfg.slices.end
    text = gzip.decompress(SAMPLES.joinpath("arxiv", "arxiv-metadata-sample.json.gz").read_bytes()).decode()
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        paper = json.loads(line)
        first = re.search(r"\b(19|20)\d\d\b", paper["versions"][0]["created"])
        shift = start + i % (end - start) - int(first.group(0)) if first else 0

        def moved(value: str, shift: int = shift) -> str:
            return re.sub(r"\b(?:19|20)\d\d\b", lambda m: str(int(m.group(0)) + shift), value)

        for version in paper["versions"]:
            version["created"] = moved(version["created"])
        if paper.get("update_date"):
            paper["update_date"] = moved(paper["update_date"])
        out.append(json.dumps(paper))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(out) + "\n")
    return f"arXiv sample ({len(lines)} real papers, the snapshot's JSON lines), re-dated round-robin over {start}-{end - 1}"


def _yearbook(cfg, target: Path, years: int, per_year: int, named: list[int]) -> str:
    """The archive as the authors share it (F/ and M/ of <year>_*.png in a .tar.gz): `years` years spread over
    the real corpus's years (yearbook/years.csv) and the years in `named`, `per_year` grey portraits per year
    and sex (no Yearbook pixels ship: these are drawn, seeded)."""
    import numpy as np
    from PIL import Image

    lines = SAMPLES.joinpath("yearbook", "years.csv").read_text().splitlines()[1:]
    real = sorted(int(line.split(",")[0]) for line in lines)
    keep = sorted({real[round(i * (len(real) - 1) / max(years - 1, 1))] for i in range(years)} | set(named))
    rng = np.random.default_rng(0)
    target.parent.mkdir(parents=True, exist_ok=True)
    folder = target.name.removesuffix(".tar.gz").removesuffix(".tgz")
    with tarfile.open(target, "w:gz") as tar:
        for year in keep:
            for sex in ("F", "M"):
                for i in range(per_year):
                    pixels = rng.integers(0, 140, (32, 32)) + (90 if sex == "M" else 0)
                    buffer = io.BytesIO()
                    Image.fromarray(pixels.astype(np.uint8), "L").save(buffer, format="PNG")
                    info = tarfile.TarInfo(f"{folder}/{sex}/{year}_{sex}_{i}.png")
                    info.size = buffer.tell()
                    buffer.seek(0)
                    tar.addfile(info, buffer)
    return (
        f"{len(keep) * 2 * per_year} drawn portraits in the authors' .tar.gz layout: {len(keep)} of the "
        f"{len(real)} years of the real corpus (with those the saliency grid names), {per_year} per year and sex"
    )


# dataset -> its sample's writer (cfg: the dataset's typed section, target: where its reader reads)
WRITERS: dict[str, Callable[..., str]] = {"amazon": _amazon, "arxiv": _arxiv, "yearbook": _yearbook}


def write_sample(name: str, cfg, target: Path, years: int = 4, per_year: int = 2, named=()) -> str:
    """Dataset `name`'s sample at `target` (its reader's path), adapted to its typed section `cfg`; returns
    what was written, in words. Yearbook: `years` years and the years in `named`, `per_year` portraits a year
    and sex. A dataset without a shipped sample is a one-line DriftError."""
    if name not in WRITERS:
        raise DriftError(
            f"no rehearsal sample ships for {name} (only for {', '.join(WRITERS)}): give one with --data PATH"
        )
    return WRITERS[name](cfg, Path(target), years, per_year, list(named))
