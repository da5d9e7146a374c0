"""The documentation site builds: `mkdocs build --strict` (mkdocs.yml) fails on any warning, a link to a page
or an anchor that does not exist included, and on an API page whose module mkdocstrings cannot collect. The
built site opens from disk: no web fonts, no script or stylesheet from another host."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_documentation_builds_strictly_and_works_offline(tmp_path):
    site = tmp_path / "site"
    # Material's notice about its successor, printed on every build
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    pages = list(site.rglob("*.html"))
    assert (site / "index.html").exists() and len(pages) > 20
    remote = re.compile(r"""<(?:script|link)\b[^>]*(?:src|href)=["']https?://""")
    offenders = [str(p.relative_to(site)) for p in pages if remote.search(p.read_text(errors="replace"))]
    assert not offenders, f"these pages load something from the network: {offenders[:5]}"
