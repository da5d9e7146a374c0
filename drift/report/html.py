"""One dataset's report as a single self-contained HTML page: reports/<dataset>.html.

Built from what the report stage wrote (metrics/<ds>/, plots/<ds>/, plots/policies/<ds>.json,
tables/<ds>.json), the files `drift show` and `dvc plots` read. It opens offline and alone: figures are inline
data URIs, the CSS is inline, there is no script, and a Content-Security-Policy forbids any request but a data
URI. Sections: the summary with the references, the label shares, every drift matrix and its deviation, the
per-class scores and a confusion matrix, the cohort mean, forgetting, families, saliency (images), the
retraining policies, the label-free estimates and the most novel rows when the report has them, and our run
beside the paper's for Yearbook, Amazon and arXiv; any other figure of plots/<ds>/ under "Other figures".
Class names are the slice manifest's where it is there.

The markup is drift/report/templates/ (report.html.j2, parts.html.j2, report.css), rendered by Jinja2 with
every printed value escaped; this module builds the context: plain strings, numbers, lists and dicts, the
numbers already formatted.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import re
import struct
import tempfile
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
from jinja2.ext import Extension
from markupsafe import Markup

from drift.core.errors import DriftError
from drift.core.paths import dataset_paths
from drift.report.labels import load_classes, load_label_shares
from drift.report.published import (
    compare,
    compare_run,
    empty_cells_line,
    has_published,
    load_published,
    our_result,
    published_model,
)

Context = dict[str, Any]  # what a template reads: strings, numbers, lists and dicts of them

PAGE = "report.html.j2"  # in drift/report/templates/
PARTS = "parts.html.j2"  # the figure and table macros the page uses


class JoinedLines(Extension):
    """An .html.j2 template's lines joined, each without its indentation (its last line break kept): the
    templates are laid out for reading and the page stays one line."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        if not (name or "").endswith(".html.j2"):
            return source
        body, last = (source[:-1], "\n") if source.endswith("\n") else (source, "")
        return re.sub(r"\n[ \t]*", "", body) + last


def _escaped(value: object) -> Markup:
    """A value the templates print, escaped as html.escape writes it (&quot;, &#x27;); our own Markup as it
    is."""
    return value if isinstance(value, Markup) else Markup(html.escape(str(value)))


@functools.cache
def _templates() -> jinja2.Environment:
    """drift/report/templates/: every printed value escaped, a name the context lacks an error."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("drift.report", "templates"),
        autoescape=True,
        finalize=_escaped,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        extensions=[JoinedLines],
    )


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise DriftError("not a PNG file")
    return struct.unpack(">II", data[16:24])


def figure_context(path: Path, caption: str, wide: bool = False) -> Context:
    """A PNG as the page shows it: inlined as a data URI, with its size so the page does not jump while it
    lays out."""
    data = path.read_bytes()
    width, height = png_size(data)
    uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    return {"uri": uri, "width": width, "height": height, "caption": caption, "wide": wide}


def _figure_html(context: Context | None) -> str:
    """A figure's HTML from the page's figure macro ("" for None)."""
    return _templates().get_template(PARTS).module.figure(context)  # type: ignore[attr-defined]


def figure(path: Path, caption: str, wide: bool = False) -> str:
    """A PNG inlined as a data URI, as HTML: a figure for a section written in Python."""
    return _figure_html(figure_context(path, caption, wide))


class Figures:
    """The page's figures: a file the report lacks is None (the page leaves it out), and the files shown are
    remembered so that the rest of plots/<ds>/ goes under "Other figures"."""

    def __init__(self) -> None:
        self.shown: set[Path] = set()

    def __call__(self, path: Path, caption: str, wide: bool = False) -> Context | None:
        if not path.exists():
            return None
        self.shown.add(path.resolve())
        return figure_context(path, caption, wide)

    def html(self, path: Path, caption: str, wide: bool = False) -> str:
        """The same figure as HTML, for a section written in Python (drift/report/training.py)."""
        return _figure_html(self(path, caption, wide))


def _num(value: float | None, sign: bool = False) -> str:
    return "—" if value is None else f"{value:{'+' if sign else ''}.3f}"


def _table(
    headers: list[str],
    rows: list[list[str]],
    row_classes: list[str] | None = None,
    left: int = 1,
    wrap: int | None = None,
) -> Context:
    """A table: the first `left` columns are names (left-aligned), column `wrap` is running text (wrapped);
    `row_classes`: each row's CSS class ("" for none)."""
    kinds = row_classes or [""] * len(rows)
    return {
        "headers": headers,
        "rows": [{"cells": cells, "kind": kind} for cells, kind in zip(rows, kinds)],
        "left": left,
        "wrap": wrap,
    }


def _section(key: str, title: str, **content: Any) -> Context:
    """A section of the page: its anchor `key` (which names its macro in report.html.j2), title and content."""
    return {"key": key, "title": title, **content}


def _summary(tables: dict) -> Context:
    """The ranking with the references, the models below baseline-prior and the cohort mean."""
    rows, classes = [], []
    for r in tables["ranking"]:
        ref = r.get("reference")
        rows.append(
            [
                "ref" if ref else str(r.get("rank") or "—"),
                r["model"],
                r.get("family") or "",
                _num(r.get("id")),
                _num(r.get("future")),
                _num(r.get("decay")),
                "" if ref else _num(r.get("margin_prior"), sign=True),
                "" if ref else _num(r.get("margin_linear"), sign=True),
                "" if ref else _num(r.get("margin_tfidf"), sign=True),
            ]
        )
        classes.append("reference" if ref else "")
    headers = ["rank", "model", "family", "ID", "Future", "Decay", "vs prior", "vs linear", "vs tfidf"]
    cohort = tables.get("cohort") or {}
    return {
        "table": _table(headers, rows, classes, left=3),
        "below_prior": tables.get("below_prior") or [],
        "cohort": {score: _num(cohort.get(score)) for score in ("id", "future", "decay")},
    }


def _families(tables: dict) -> Context | None:
    rows = [
        [
            str(r.get("rank") or "—"),
            r["family"],
            str(r["n_models"]),
            _num(r.get("id")),
            _num(r.get("future")),
            _num(r.get("decay")),
        ]
        for r in tables.get("families") or []
    ]
    return _table(["rank", "family", "models", "ID", "Future", "Decay"], rows, left=2) if rows else None


PEERS = [
    ("wild-time", "eval_fix_average", "Eval-Fix avg"),
    ("wild-time", "eval_fix_worst", "Eval-Fix worst"),
    ("wild-time", "eval_stream_average", "Eval-Stream avg"),
    ("wild-time", "eval_stream_worst", "Eval-Stream worst"),
    ("clear", "in_domain", "in-domain"),
    ("clear", "next_domain", "next-domain"),
    ("clear", "backward_transfer", "backward"),
    ("clear", "forward_transfer", "forward"),
]


def _peers(tables: dict) -> Context | None:
    """Wild-Time's and CLEAR's summaries of each model's matrix (tables.json `protocols`), in ranking order."""
    protocols = tables.get("protocols") or {}
    rows = [
        [r["model"]] + [_num((protocols[r["model"]].get(p) or {}).get(k)) for p, k, _ in PEERS]
        for r in tables["ranking"]
        if r["model"] in protocols
    ]
    return _table(["model"] + [title for _, _, title in PEERS], rows, left=1) if rows else None


def _policy_table(rows: list[dict]) -> Context:
    """The policy rows (plots/policies/<ds>.json) as a table: each model's best mean score in bold."""
    out, classes = [], []
    for r in rows:
        out.append(
            [
                r["model"],
                r["policy"],
                _num(r["mean"]),
                _num(r["worst"]),
                str(r["retrainings"]),
                f"{r['cost']:,.0f}",
                "yes" if r["pareto"] else "",
            ]
        )
        classes.append("best" if r.get("best") else "")
    cost = f"cost ({rows[0].get('cost_unit', '')})"
    return _table(["model", "policy", "mean", "worst", "retrains", cost, "Pareto"], out, classes, left=2)


def _policies(name: str, root: Path, figures: Figures) -> Context:
    """The retraining policies: {replayed: their figure and table}, or {replayed: None} when the report has
    neither."""
    p = dataset_paths(name, root)
    rows = json.loads(p["policies"].read_text()) if p["policies"].exists() else None
    chart = p["plots"] / "policies.png"
    if rows is None and not chart.exists():
        return {"replayed": None}
    caption = "mean (dot) and worst period (ring) against the retraining cost; orange: the Pareto front"
    return {
        "replayed": {
            "figure": figures(chart, caption, wide=True),
            "table": _policy_table(rows) if rows else None,
        }
    }


def _paper(name: str, root: Path) -> Context:
    """The run beside the paper's published one: the table of `drift paper`, then for each model both have one
    figure of three panels: our matrix, theirs and the difference over the slices both have, in the published
    unit."""
    from drift.report.plots import (
        heatmap_row,  # lazy: matplotlib, only when a report is written
    )

    result = compare_run(root, name)
    d = result["printed_decimals"]

    def num(value, sign=False):
        return "—" if value is None else f"{value:{'+' if sign else ''}.{d}f}"

    rows = []
    for r in result["models"]:
        ours, pub, diff = r["ours"] or {}, r["published"] or {}, r["difference"] or {}
        rows.append(
            [
                r["model"],
                r["paper_name"] or "—",
                *(
                    f"{num(ours.get(s))} / {num(pub.get(s))} / {num(diff.get(s), sign=True)}"
                    for s in ("id", "future", "decay")
                ),
                f"{ours.get('rank') or '—'} / {pub.get('rank') or '—'}",
                num(r["mean_abs_difference"]),
            ]
        )
    source = result["source"]
    empty = empty_cells_line(result)
    missing = [
        (what, ", ".join(names))
        for what, names in (
            ("Only in the paper", result["only_published"]),
            ("Only in our run", result["only_ours"]),
            ("Slices only in the paper", result["slices"]["only_published"]),
            ("Slices only in our run", result["slices"]["only_ours"]),
        )
        if names
    ]

    data = load_published(name)
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in result["models"]:
            if r["ours"] is None or r["published"] is None or not r["slices"]["shared"]:
                continue  # nothing to draw beside the paper's: no matrix, or no slice both sides have
            ours = our_result(root, name, r["model"])
            difference = np.array(
                [
                    [np.nan if v is None else v for v in row]
                    for row in compare(ours, name, r["model"])["difference"]
                ],
                dtype=float,
            )
            panels = (
                (np.asarray(ours["matrix"], dtype=float) * data["scale"], ours["labels"], "ours", False),
                (published_model(data, r["model"])["matrix"], data["slices"], "the paper's", False),
                (
                    difference.reshape(len(r["slices"]["shared"]), -1),
                    r["slices"]["shared"],
                    "ours − paper",
                    True,
                ),
            )
            path = Path(tmp) / f"{r['model']}.png"
            heatmap_row(
                [
                    (matrix, labels, f"{r['model']}: {title}", diverging)
                    for matrix, labels, title, diverging in panels
                ],
                path,
                data["metric"],
                data["higher_is_better"],
            )
            titles = ", ".join(title for _, _, title, _ in panels)
            figures.append(figure_context(path, f"{r['model']} ({r['paper_name']}): {titles}", wide=True))
    return {
        "metric": result["published_metric"],
        "unit": result["unit"],
        "repository": source["repository"].split("://")[-1],
        "commit": source["commit"][:7],
        "license": source["license"],
        "table": _table(["model", "paper", "ID", "Future", "Decay", "rank", "mean |ΔM|"], rows, left=2),
        "cells": result["cells"],
        "mean_abs_difference": num(result["mean_abs_difference"]),
        "rho": _num(result["spearman_decay"]["rho"]),
        "rho_models": result["spearman_decay"]["models"],
        "empty_cells": empty[0].upper() + empty[1:] if empty else None,
        "missing": missing,
        "figures": figures,
    }


EXAMPLE_CHARS = 240  # of a novel row's text, shown in the page
UNITS = {"recall": "class", "AUC": "label", "MSE": "rating"}  # what a per-class score is of (load_classes)


def _shown(names: list[str]) -> dict[str, str]:
    """{a slice label as the plots data holds it (plot_text): as the data has it}, from tables.json's labels."""
    from drift.report.plots import plot_text  # lazy: matplotlib, only when a report is written

    return {plot_text(n): n for n in names}


def _label_unit(tables: dict) -> str:
    """What a label share is of: a class, a label (multi-label) or a rating (regression)."""
    return {"macro_auc": "label", "balanced_mse": "rating"}.get(tables["metric"], "class")


def _label_shares(
    name: str, root: Path, rows: list[dict] | None, unit: str, slices: dict[str, str], figures: Figures
) -> Context:
    """The labels over time (plots/<ds>/labels.png; `rows`: labels.json, load_label_shares): {shares: the
    figure, then per class (`unit`: class, label or rating) its share (positive rate, mean rating) over all
    rows, in the first slice, in the last, and the change}, or {shares: None} without rows."""
    if not rows:
        return {"shares": None}
    what = rows[0].get("what", "share")
    order = list(dict.fromkeys(r["train"] for r in rows))
    first, last = order[0], order[-1]
    table = []
    for cls in dict.fromkeys(r["eval"] for r in rows):
        mine = {r["train"]: r for r in rows if r["eval"] == cls}
        scored = [r for r in mine.values() if r["value"] is not None]
        total = sum(r["rows"] for r in scored)
        overall = sum(r["value"] * r["rows"] for r in scored) / total if total else None
        a, b = mine[first]["value"] if first in mine else None, mine[last]["value"] if last in mine else None
        change = None if a is None or b is None else b - a
        table.append([cls, _num(overall), _num(a), _num(b), _num(change, sign=True)])
    headers = [unit, "all slices", slices.get(first, first), slices.get(last, last), "change"]
    chart = dataset_paths(name, root)["plots"] / "labels.png"
    return {
        "shares": {
            "what": what,
            "unit": unit,
            "figure": figures(chart, f"{name}: {what} per slice", wide=True),
            "table": _table(headers, table, left=1),
        }
    }


def _class_scores(
    name: str, root: Path, ranked: list[str], references: set[str], slices: dict[str, str], figures: Figures
) -> Context:
    """Per model: each class's score per training cutoff (figure), its ID, Future and Decay, and the confusion
    counts of one cell (drift/report/labels.py); `models` empty when no model has them. `slices`: _shown."""
    plots = dataset_paths(name, root)["plots"]
    models, cell, metric = [], None, ""
    for model in ranked:
        found = load_classes(name, model, root)
        if found is None:
            continue
        metric = found["metric"]
        unit = UNITS.get(metric, "class")
        summary = _table(
            [unit, "ID", "Future", "Decay"],
            [[r["class"], _num(r["id"]), _num(r["future"]), _num(r["decay"])] for r in found["classes"]],
            left=1,
        )
        confusion = None
        if found["confusion"]:
            rows = found["confusion"]
            cell = rows[0]
            columns = list(dict.fromkeys(r["eval"] for r in rows))
            counts = {(r["train"], r["eval"]): r["value"] for r in rows}
            confusion = _table(
                [unit if metric == "AUC" else "true ↓ predicted →"] + columns,
                [
                    [t] + [f"{counts[t, c]:,}" for c in columns]
                    for t in dict.fromkeys(r["train"] for r in rows)
                ],
                left=1,
            )
        caption = f"{model}: {metric} of each class per training cutoff"
        models.append(
            {
                "title": model + (" (reference)" if model in references else ""),
                "figure": figures(plots / model / "classes.png", caption, wide=True),
                "summary": summary,
                "confusion": confusion,
            }
        )
    confusion_cell = None
    if cell is not None:
        confusion_cell = {
            "cutoff": slices.get(cell["cutoff"], cell["cutoff"]),
            "slice": slices.get(cell["slice"], cell["slice"]),
            "seeds": cell["seeds"],
        }
    return {
        "models": models,
        "unit": UNITS.get(metric, "class"),
        "metric": metric,
        "confusion_cell": confusion_cell,
    }


def _novel_rows(summary_path: Path) -> Context | None:
    """The shift analysis' most novel rows per period (tables/<ds>-shift.json `examples`), as one table, each
    text cut to EXAMPLE_CHARS; None when there are none."""
    if not summary_path.exists():
        return None
    examples = json.loads(summary_path.read_text()).get("examples") or []
    texts = any("text" in r for e in examples for r in e["rows"])
    rows = []
    for e in examples:
        for r in e["rows"]:
            text = str(r.get("text", ""))
            cut = text[:EXAMPLE_CHARS] + ("…" if len(text) > EXAMPLE_CHARS else "")
            rows.append(
                [str(e["period"]), str(e["against_cutoff"]), str(r["id"]), _num(r["distance"])]
                + ["yes" if r.get("novel") else ""]
                + ([cut] if texts else [])
            )
    if not rows:
        return None
    headers = ["period", "against", "row", "distance", "novel"] + (["text"] if texts else [])
    return _table(headers, rows, left=3, wrap=5 if texts else None)


def _model_sections(
    name: str, root: Path, tables: dict, shares: list[dict] | None, figures: Figures
) -> list[Context]:
    """What the models scored: summary, labels over time, other protocols, drift matrices, training, per
    class, cohort mean, forgetting curves, families and saliency."""
    from drift.report.training import training_html  # each model's training curve (plots/losses/<ds>.json)

    plots = dataset_paths(name, root)["plots"]
    references = set(tables.get("references") or [])
    ranked = [r["model"] for r in tables["ranking"]]
    slices = _shown(tables.get("labels") or [])
    labels = _label_shares(name, root, shares, _label_unit(tables), slices, figures)
    sections = [
        _section("summary", "Summary", **_summary(tables)),
        _section("labels", "Labels over time", **labels),
    ]
    peers = _peers(tables)
    if peers:
        sections.append(_section("protocols", "Other protocols", table=peers))
    matrices = []
    for model in ranked:
        caption = f"{model}{' (reference)' if model in references else ''}: drift matrix"
        matrices.append(figures(plots / model / "heatmap.png", caption))
        deviation = f"{model}: deviation from the cohort mean (blue: better)"
        matrices.append(figures(plots / model / "deviation.png", deviation))
    sections.append(_section("matrices", "Drift matrices", figures=matrices))
    # our own markup (drift/report/training.py escapes what it prints), so it passes as it is
    training = Markup(training_html(name, root, tables, figures.html))
    sections.append(_section("training", "Training", html=training))
    classes = _class_scores(name, root, ranked, references, slices, figures)
    sections.append(_section("classes", "Per class", **classes))
    cohort = figures(plots / "cohort-mean" / "heatmap.png", "cohort mean of the models (Figure 5)")
    sections.append(_section("cohort", "Cohort mean", figure=cohort))
    gaps = "score against the gap j − i, per model and per family (Figures 4, 11)"
    sections.append(
        _section("forgetting", "Forgetting curves", figure=figures(plots / "forgetting.png", gaps, wide=True))
    )
    families = figures(plots / "families.png", "family averages (Table 10)")
    sections.append(_section("families", "Families", table=_families(tables), figure=families))
    if (plots / "saliency.png").exists():
        caption = "mean gradient saliency of the image models per training cutoff (Figure 3)"
        sections.append(
            _section("saliency", "Saliency", figure=figures(plots / "saliency.png", caption, wide=True))
        )
    return sections


def _analysis_sections(name: str, root: Path, figures: Figures) -> list[Context]:
    """What was replayed or estimated from the results: retraining policies, label-free shift and estimates,
    novel examples, the comparison with the paper."""
    p = dataset_paths(name, root)
    plots = p["plots"]
    sections = [_section("policies", "Retraining policies", **_policies(name, root, figures))]
    shift = sorted((plots / "shift").glob("*.png")) if (plots / "shift").is_dir() else []
    estimates = sorted(plots.glob("*/estimate*.png")) + sorted(plots.glob("estimate*/*.png"))
    if shift or estimates:
        shown = [figures(f, f"label-free shift: {f.stem}") for f in shift]
        shown += [figures(f, f"{f.parent.name}: estimated matrix ({f.stem})") for f in estimates]
        sections.append(_section("shift", "Label-free shift and estimates", figures=shown))
    novel = _novel_rows(p["shift_summary"])
    if novel:
        sections.append(_section("novel", "Novel examples", table=novel, cut_to=EXAMPLE_CHARS))
    if has_published(name):
        try:
            sections.append(_section("paper", "Compared with the paper", comparison=_paper(name, root)))
        except DriftError as e:  # a run that cannot be set beside the paper's still gets its report
            sections.append(_section("paper", "Compared with the paper", comparison=None, error=str(e)))
    return sections


def _other_figures(plots: Path, figures: Figures) -> list[Context]:
    """Every figure of plots/<ds>/ that no section showed, as one last section (none when there is none)."""
    others = [f for f in sorted(plots.rglob("*.png")) if f.resolve() not in figures.shown]
    if not others:
        return []
    return [
        _section("other", "Other figures", figures=[figures(f, str(f.relative_to(plots))) for f in others])
    ]


FOOTER_PACKAGES = ("torch", "numpy", "timm", "transformers", "lance", "pylance", "dvc")


def _heading(tables: dict, shares: list[dict] | None) -> Context:
    """The line under the title: the metric, the slices, the ranking and the classes' names (at most 12)."""
    labels = tables.get("labels") or []
    names = [n for n in dict.fromkeys(r["eval"] for r in shares or []) if n != "mean rating"]
    classes = {
        "units": {"class": "Classes", "label": "Labels", "rating": "Ratings"}[_label_unit(tables)],
        "names": ", ".join(names[:12]),
        "more": len(names) > 12,
    }
    return {
        "metric": tables["metric"],
        "direction": "higher is better" if tables["higher_is_better"] else "lower is better",
        "slices": len(labels),
        "span": ", ".join(labels[:1] + labels[-1:]),
        "ranked_by": tables.get("ranked_by", "decay"),
        "classes": classes if names else None,
    }


def _footer(tables: dict) -> Context:
    """The environment the results came from: Python, the main packages' versions, the lock file's hash."""
    env = tables.get("environment") or {}
    packages = sorted((env.get("packages") or {}).items())
    return {
        "python": str(env.get("python", "?")),
        "versions": ", ".join(f"{k} {v}" for k, v in packages if k in FOOTER_PACKAGES),
        "lock": str(env.get("lock_sha256", "?"))[:12],
    }


def write_html_report(name: str, root: Path = Path(".")) -> Path:
    """reports/<name>.html from the report stage's outputs under `root`; returns its path."""
    root = Path(root)
    p = dataset_paths(name, root)
    if not p["tables"].exists():
        raise DriftError(f"no {p['tables']}: run `dvc repro report@{name}` first")
    tables = json.loads(p["tables"].read_text())
    shares = load_label_shares(name, root)
    figures = Figures()
    sections = _model_sections(name, root, tables, shares, figures) + _analysis_sections(name, root, figures)
    sections += _other_figures(p["plots"], figures)  # last: what the sections above did not show
    page = (
        _templates()
        .get_template(PAGE)
        .render(name=name, heading=_heading(tables, shares), sections=sections, footer=_footer(tables))
    )
    p["report_html"].parent.mkdir(parents=True, exist_ok=True)
    p["report_html"].write_text(page)
    return p["report_html"]
