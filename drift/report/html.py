"""One dataset's report as a single self-contained HTML page: reports/<dataset>.html.

Built from what the report stage wrote (metrics/<ds>/, plots/<ds>/, plots/policies/<ds>.json, tables/<ds>.json),
so it reads the same committed files as `drift show` and `dvc plots`. It opens offline and alone: every figure
is an inline data URI, the CSS is inline, there is no script, and a Content-Security-Policy forbids the page
any request that is not a data URI, so a figure that would come from elsewhere shows as missing rather than
leaking a request. Sections: the summary table with the references, the labels over time (each class's share
per slice), every drift matrix and its deviation, the per-class scores and a confusion matrix
(drift/report/labels.py), the cohort mean, the forgetting curves, the families, saliency (image datasets), the
retraining policies, the label-free shift and estimates and the shift analysis' most novel rows when a report
has them, our run beside the paper's for Yearbook, Amazon and arXiv (drift/report/published.py); any other
figure of plots/<ds>/ goes under "Other figures". Class names are the slice manifest's where it is there.
"""

from __future__ import annotations

import base64
import html
import json
import struct
import tempfile
from pathlib import Path

import numpy as np

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

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222; margin: 0;
       background: #fafafa; }
main { max-width: 1280px; margin: 0 auto; padding: 1rem 1.5rem 3rem; }
nav { position: sticky; top: 0; background: #fff; border-bottom: 1px solid #ddd; padding: .4rem 1.5rem;
      font-size: 13px; z-index: 1; }
nav a { margin-right: .9rem; color: #35608a; text-decoration: none; }
h1 { font-size: 1.5rem; margin: .6rem 0 .2rem; }
h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
h3 { font-size: 1rem; margin: .8rem 0 .3rem; }
p.note, .note { color: #555; font-size: 13px; }
table { border-collapse: collapse; margin: .5rem 0; font-size: 13px; background: #fff; }
th, td { padding: .25rem .6rem; border-bottom: 1px solid #e4e4e4; text-align: right; white-space: nowrap; }
th { background: #f0f0f0; }
td.name, th.name { text-align: left; }
tr.reference td { color: #777; font-style: italic; }
tr.best td { font-weight: 600; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(380px, 1fr)); gap: 1rem; }
.pairs { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 1rem; }
figure { margin: 0; background: #fff; border: 1px solid #e4e4e4; padding: .4rem; }
figure.wide { grid-column: 1 / -1; }
figcaption { font-size: 12px; color: #555; margin-top: .2rem; }
img { max-width: 100%; height: auto; display: block; }
.warn { color: #9a3b00; }
.scroll { overflow-x: auto; }
td.text, th.text { white-space: normal; text-align: left; min-width: 22rem; max-width: 44rem; }
.pairs > div { min-width: 0; }
"""
# no request leaves the page: images only as data URIs, styles only inline, nothing else
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise DriftError("not a PNG file")
    return struct.unpack(">II", data[16:24])


def figure(path: Path, caption: str, wide: bool = False) -> str:
    """A PNG inlined as a data URI, with its size so the page does not jump while it lays out."""
    data = path.read_bytes()
    width, height = png_size(data)
    uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    cls = ' class="wide"' if wide else ""
    return (
        f'<figure{cls}><img src="{uri}" width="{width}" height="{height}" alt="{html.escape(caption)}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def _num(value, sign: bool = False) -> str:
    return "—" if value is None else f"{value:{'+' if sign else ''}.3f}"


def _table(
    headers: list[str],
    rows: list[list[str]],
    row_classes: list[str] | None = None,
    left: int = 1,
    wrap: int | None = None,
) -> str:
    """An HTML table; the first `left` columns are names (left-aligned), column `wrap` is running text (wrapped),
    cells are already escaped."""
    head = "".join(
        f'<th class="name">{h}</th>'
        if i < left
        else f'<th class="text">{h}</th>'
        if i == wrap
        else f"<th>{h}</th>"
        for i, h in enumerate(headers)
    )
    body = []
    for n, row in enumerate(rows):
        cls = f' class="{row_classes[n]}"' if row_classes and row_classes[n] else ""
        body.append(
            f"<tr{cls}>"
            + "".join(
                f'<td class="name">{c}</td>'
                if i < left
                else f'<td class="text">{c}</td>'
                if i == wrap
                else f"<td>{c}</td>"
                for i, c in enumerate(row)
            )
            + "</tr>"
        )
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _summary(tables: dict) -> str:
    rows, classes = [], []
    for r in tables["ranking"]:
        ref = r.get("reference")
        rows.append(
            [
                "ref" if ref else str(r.get("rank") or "—"),
                html.escape(r["model"]),
                html.escape(r.get("family") or ""),
                _num(r.get("id")),
                _num(r.get("future")),
                _num(r.get("decay")),
                "" if ref else _num(r.get("margin_prior"), sign=True),
                "" if ref else _num(r.get("margin_linear"), sign=True),
                "" if ref else _num(r.get("margin_tfidf"), sign=True),
            ]
        )
        classes.append("reference" if ref else "")
    out = _table(
        ["rank", "model", "family", "ID", "Future", "Decay", "vs prior", "vs linear", "vs tfidf"],
        rows,
        classes,
        left=3,
    )
    for model in tables.get("below_prior") or []:
        out += f'<p class="warn">{html.escape(model)} does not beat baseline-prior in distribution.</p>'
    cohort = tables.get("cohort") or {}
    out += (
        f'<p class="note">Cohort mean (the models that are not references): ID {_num(cohort.get("id"))}, '
        f"Future {_num(cohort.get('future'))}, Decay {_num(cohort.get('decay'))}.</p>"
    )
    return out


def _families(tables: dict) -> str:
    rows = [
        [
            str(r.get("rank") or "—"),
            html.escape(r["family"]),
            str(r["n_models"]),
            _num(r.get("id")),
            _num(r.get("future")),
            _num(r.get("decay")),
        ]
        for r in tables.get("families") or []
    ]
    return _table(["rank", "family", "models", "ID", "Future", "Decay"], rows, left=2) if rows else ""


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


def _peers(tables: dict) -> str:
    """Wild-Time's and CLEAR's summaries of each model's matrix (tables.json `protocols`), in ranking order."""
    protocols = tables.get("protocols") or {}
    rows = [
        [html.escape(r["model"])] + [_num((protocols[r["model"]].get(p) or {}).get(k)) for p, k, _ in PEERS]
        for r in tables["ranking"]
        if r["model"] in protocols
    ]
    return _table(["model"] + [title for _, _, title in PEERS], rows, left=1) if rows else ""


def _policies(rows: list[dict]) -> str:
    """The policy rows (plots/policies/<ds>.json) as a table: each model's best mean score in bold."""
    out, classes = [], []
    for r in rows:
        out.append(
            [
                html.escape(r["model"]),
                html.escape(r["policy"]),
                _num(r["mean"]),
                _num(r["worst"]),
                str(r["retrainings"]),
                f"{r['cost']:,.0f}",
                "yes" if r["pareto"] else "",
            ]
        )
        classes.append("best" if r.get("best") else "")
    unit = html.escape(rows[0].get("cost_unit", "")) if rows else ""
    return _table(
        ["model", "policy", "mean", "worst", "retrains", f"cost ({unit})", "Pareto"], out, classes, left=2
    )


def _paper(name: str, root: Path) -> str:
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
                html.escape(r["model"]),
                html.escape(r["paper_name"] or "—"),
                *(
                    f"{num(ours.get(s))} / {num(pub.get(s))} / {num(diff.get(s), sign=True)}"
                    for s in ("id", "future", "decay")
                ),
                f"{ours.get('rank') or '—'} / {pub.get('rank') or '—'}",
                num(r["mean_abs_difference"]),
            ]
        )
    unit = f" ({html.escape(result['unit'])})" if result["unit"] else ""
    rho = result["spearman_decay"]
    source = result["source"]
    out = (
        f'<p class="note">{html.escape(result["published_metric"])}{unit}, ours / the paper\'s / ours − '
        f"paper; ranks by Decay. Published: {html.escape(source['repository'].split('://')[-1])} @ "
        f"{html.escape(source['commit'][:7])}, {html.escape(source['license'])}.</p>"
    )
    out += _table(["model", "paper", "ID", "Future", "Decay", "rank", "mean |ΔM|"], rows, left=2)
    out += (
        f'<p class="note">{result["cells"]} cells both fill: mean |ours − paper| {num(result["mean_abs_difference"])};'
        f" Spearman ρ of the Decay rankings {_num(rho['rho'])} over {rho['models']} models.</p>"
    )
    empty = empty_cells_line(result)
    if empty:
        out += f'<p class="note">{html.escape(empty[0].upper() + empty[1:])}.</p>'
    for what, names in (
        ("Only in the paper", result["only_published"]),
        ("Only in our run", result["only_ours"]),
        ("Slices only in the paper", result["slices"]["only_published"]),
        ("Slices only in our run", result["slices"]["only_ours"]),
    ):
        if names:
            out += f'<p class="note">{what}: {html.escape(", ".join(names))}.</p>'

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
            figures.append(figure(path, f"{r['model']} ({r['paper_name']}): {titles}", wide=True))
    return out + f'<div class="grid">{"".join(figures)}</div>'


EXAMPLE_CHARS = 240  # of a novel row's text, shown in the page
UNITS = {"recall": "class", "AUC": "label", "MSE": "rating"}  # what a per-class score is of (load_classes)


def _shown(names: list[str]) -> dict[str, str]:
    """{a slice label as the plots data holds it (plot_text): as the data has it}, from tables.json's labels."""
    from drift.report.plots import plot_text  # lazy: matplotlib, only when a report is written

    return {plot_text(n): n for n in names}


def _label_shares(
    name: str, root: Path, rows: list[dict] | None, unit: str, slices: dict[str, str], fig
) -> str:
    """The labels over time (plots/<ds>/labels.png; `rows`: labels.json, load_label_shares): the figure, then per
    class (`unit`: class, label or rating) its share (positive rate, mean rating) over all rows, in the first
    slice, in the last, and the change."""
    if not rows:
        return (
            '<p class="note">No label shares in this report (plots/'
            f"{html.escape(name)}/labels.json): re-run <code>dvc repro report@{html.escape(name)}</code>.</p>"
        )
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
        table.append([html.escape(cls), _num(overall), _num(a), _num(b), _num(change, sign=True)])
    first_name, last_name = (html.escape(slices.get(x, x)) for x in (first, last))
    return (
        f'<p class="note">The prior over time: the {html.escape(what)} of each {unit} per slice, over all its rows '
        "(train and test), before any model. A model trained on the early slices meets the later ones with "
        "these shares.</p>"
        + fig(dataset_paths(name, root)["plots"] / "labels.png", f"{name}: {what} per slice", wide=True)
        + _table([unit, "all slices", first_name, last_name, "change"], table, left=1)
    )


def _class_scores(
    name: str, root: Path, ranked: list[str], references: set[str], slices: dict[str, str], fig
) -> str:
    """Per model: each class's score per training cutoff (figure), its ID, Future and Decay, and the confusion
    counts of one cell (drift/report/labels.py); a note when no model has them. `slices`: _shown."""
    plots = dataset_paths(name, root)["plots"]
    parts, cell, metric = [], None, None
    for model in ranked:
        found = load_classes(name, model, root)
        if found is None:
            continue
        metric = found["metric"]
        unit = UNITS.get(metric, "class")
        summary = _table(
            [unit, "ID", "Future", "Decay"],
            [
                [html.escape(r["class"]), _num(r["id"]), _num(r["future"]), _num(r["decay"])]
                for r in found["classes"]
            ],
            left=1,
        )
        confusion = ""
        if found["confusion"]:
            rows = found["confusion"]
            cell = rows[0]
            columns = list(dict.fromkeys(r["eval"] for r in rows))
            counts = {(r["train"], r["eval"]): r["value"] for r in rows}
            confusion = _table(
                [unit if metric == "AUC" else "true ↓ predicted →"] + [html.escape(c) for c in columns],
                [
                    [html.escape(t)] + [f"{counts[t, c]:,}" for c in columns]
                    for t in dict.fromkeys(r["train"] for r in rows)
                ],
                left=1,
            )
        title = html.escape(model + (" (reference)" if model in references else ""))
        parts.append(
            f"<h3>{title}</h3>"
            + fig(
                plots / model / "classes.png",
                f"{model}: {metric} of each class per training cutoff",
                wide=True,
            )
            + f'<div class="pairs"><div>{summary}</div><div>{confusion}</div></div>'
        )
    if not parts:
        return (
            '<p class="note">No per-class scores in this report: the evaluate stage writes them beside each '
            f"cell; re-run <code>dvc repro report@{html.escape(name)}</code> after it.</p>"
        )
    where = ""
    if cell is not None:
        where = (
            f" The confusion counts: f trained up to {html.escape(slices.get(cell['cutoff'], cell['cutoff']))}, "
            f"evaluated on {html.escape(slices.get(cell['slice'], cell['slice']))} (its test rows when that is the model's own last slice), summed over "
            f"{cell['seeds']} seed(s); rows the true class, columns the predicted one (multi-label: per label, "
            "predicted where its logit is above 0; regression: the rating nearest the prediction)."
        )
    note = (
        f'<p class="note">Each {UNITS.get(metric or "", "class")} scored on its own, by its '
        f"{html.escape(metric or '')} (binary and multiclass: the recall of each class; multi-label: each label's "
        "AUC; regression: the MSE of each rating), per training "
        "cutoff on the diagonal cell and averaged over the later slices; ID, Future and Decay of each class as "
        f"for the whole matrix (Decay positive = worse).{where}</p>"
    )
    return note + "".join(parts)


def _novel_rows(summary_path: Path) -> str:
    """The shift analysis' most novel rows per period (tables/<ds>-shift.json `examples`), as one table, each
    text cut to EXAMPLE_CHARS; empty when there are none."""
    if not summary_path.exists():
        return ""
    examples = json.loads(summary_path.read_text()).get("examples") or []
    texts = any("text" in r for e in examples for r in e["rows"])
    rows = []
    for e in examples:
        for r in e["rows"]:
            text = str(r.get("text", ""))
            cut = text[:EXAMPLE_CHARS] + ("…" if len(text) > EXAMPLE_CHARS else "")
            rows.append(
                [
                    html.escape(str(e["period"])),
                    html.escape(str(e["against_cutoff"])),
                    html.escape(str(r["id"])),
                    _num(r["distance"]),
                    "yes" if r.get("novel") else "",
                ]
                + ([html.escape(cut)] if texts else [])
            )
    if not rows:
        return ""
    headers = ["period", "against", "row", "distance", "novel"] + (["text"] if texts else [])
    return _table(headers, rows, left=3, wrap=5 if texts else None)


def write_html_report(name: str, root: Path = Path(".")) -> Path:
    """reports/<name>.html from the report stage's outputs under `root`; returns its path."""
    root = Path(root)
    p = dataset_paths(name, root)
    if not p["tables"].exists():
        raise DriftError(f"no {p['tables']}: run `dvc repro report@{name}` first")
    tables = json.loads(p["tables"].read_text())
    plots = p["plots"]
    used: set[Path] = set()

    def fig(path: Path, caption: str, wide: bool = False) -> str:
        if not path.exists():
            return ""
        used.add(path.resolve())
        return figure(path, caption, wide)

    direction = "higher is better" if tables["higher_is_better"] else "lower is better"
    references = set(tables.get("references") or [])
    ranked = [r["model"] for r in tables["ranking"]]
    sections = []

    sections.append(
        (
            "summary",
            "Summary",
            _summary(tables)
            + (
                '<p class="note">ID: the diagonal (trained through a period, tested on its held-out rows). Future: the '
                "later periods. Decay: what is lost going forward (positive = worse, whatever the metric's direction). "
                "vs prior, vs linear: the ID margin over the reference models (positive = better). References are not "
                "ranked and not part of the cohort, the deviations or the families.</p>"
            ),
        )
    )

    shares = load_label_shares(name, root)
    slices = _shown(tables.get("labels") or [])
    unit = {"macro_auc": "label", "balanced_mse": "rating"}.get(tables["metric"], "class")
    sections.append(("labels", "Labels over time", _label_shares(name, root, shares, unit, slices, fig)))

    peers = _peers(tables)
    if peers:
        sections.append(
            (
                "protocols",
                "Other protocols",
                peers
                + (
                    '<p class="note">The same matrices summarised as the peers do (README, "Other protocols"). Wild-Time '
                    "Eval-Fix: trained through the middle period, scored on every later one; Eval-Stream: each period's "
                    "model on the next. CLEAR: in-domain the diagonal, next-domain the next period, backward the periods "
                    "before the cutoff, forward those after it.</p>"
                ),
            )
        )

    matrices = []
    for model in ranked:
        caption = f"{model}{' (reference)' if model in references else ''}: drift matrix"
        matrices.append(fig(plots / model / "heatmap.png", caption))
        matrices.append(
            fig(plots / model / "deviation.png", f"{model}: deviation from the cohort mean (blue: better)")
        )
    sections.append(
        (
            "matrices",
            "Drift matrices",
            (
                '<p class="note">Rows: trained up to; columns: evaluated on; time grows up and to the right; the diagonal '
                "is dashed; white cells are empty (a slice too small to score). Each model's matrix, then its deviation "
                "from the cohort mean.</p>"
                f'<div class="pairs">{"".join(matrices)}</div>'
            ),
        )
    )

    from drift.report.training import training_html  # each model's training curve (plots/losses/<ds>.json)

    sections.append(("training", "Training", training_html(name, root, tables, fig)))

    sections.append(("classes", "Per class", _class_scores(name, root, ranked, references, slices, fig)))

    sections.append(
        (
            "cohort",
            "Cohort mean",
            f'<div class="grid">'
            f"{fig(plots / 'cohort-mean' / 'heatmap.png', 'cohort mean of the models (Figure 5)')}</div>",
        )
    )
    sections.append(
        (
            "forgetting",
            "Forgetting curves",
            fig(
                plots / "forgetting.png",
                "score against the gap j − i, per model and per family (Figures 4, 11)",
                wide=True,
            ),
        )
    )
    sections.append(
        (
            "families",
            "Families",
            _families(tables) + fig(plots / "families.png", "family averages (Table 10)"),
        )
    )
    if (plots / "saliency.png").exists():
        sections.append(
            (
                "saliency",
                "Saliency",
                fig(
                    plots / "saliency.png",
                    "mean gradient saliency of the image models per training cutoff (Figure 3)",
                    wide=True,
                ),
            )
        )

    policy_rows = json.loads(p["policies"].read_text()) if p["policies"].exists() else None
    if policy_rows is not None or (plots / "policies.png").exists():
        body = (
            '<p class="note">Retraining policies replayed from each drift matrix (drift/analysis/policy.py): the model '
            "deployed in period j after retraining at cutoff t is f_t, so its score there is M[t][j]. Mean and "
            "worst score over the deployment periods; cost: training rows through the cutoff × epochs (each slice "
            "one row when the slice manifest was absent), summed over the retrainings (the first model, shared "
            "by all, not counted). Bold: each model's best mean score.</p>"
        )
        body += fig(
            plots / "policies.png",
            "mean (dot) and worst period (ring) against the retraining cost; orange: the Pareto front",
            wide=True,
        )
        body += _policies(policy_rows) if policy_rows else ""
        sections.append(("policies", "Retraining policies", body))
    else:
        sections.append(
            (
                "policies",
                "Retraining policies",
                '<p class="note">No policy comparison in this report (plots/policies/'
                f"{html.escape(name)}.json): re-run <code>dvc repro report@{html.escape(name)}</code>.</p>",
            )
        )

    shift = sorted((plots / "shift").glob("*.png")) if (plots / "shift").is_dir() else []
    estimates = sorted(plots.glob("*/estimate*.png")) + sorted(plots.glob("estimate*/*.png"))
    if shift or estimates:
        body = "".join(fig(f, f"label-free shift: {f.stem}") for f in shift)
        body += "".join(fig(f, f"{f.parent.name}: estimated matrix ({f.stem})") for f in estimates)
        sections.append(("shift", "Label-free shift and estimates", f'<div class="grid">{body}</div>'))
    novel = _novel_rows(p["shift_summary"])
    if novel:
        sections.append(
            (
                "novel",
                "Novel examples",
                '<p class="note">The rows of each period farthest from the training rows of the last cutoff '
                "before it (drift/analysis/novelty.py; distance to the nearest neighbour in the pooled "
                "representation; novel: beyond the cutoff's quantile threshold), texts cut to "
                f"{EXAMPLE_CHARS} characters.</p>" + novel,
            )
        )

    if has_published(name):
        try:
            body = _paper(name, root)
        except DriftError as e:  # a run that cannot be set beside the paper's still gets its report
            body = f'<p class="warn">Not comparable with the published run: {html.escape(str(e))}</p>'
        sections.append(("paper", "Compared with the paper", body))

    others = [f for f in sorted(plots.rglob("*.png")) if f.resolve() not in used]
    if others:
        body = "".join(fig(f, str(f.relative_to(plots))) for f in others)
        sections.append(("other", "Other figures", f'<div class="grid">{body}</div>'))

    env = tables.get("environment") or {}
    versions = ", ".join(
        f"{k} {v}"
        for k, v in sorted((env.get("packages") or {}).items())
        if k in ("torch", "numpy", "timm", "transformers", "lance", "pylance", "dvc")
    )
    footer = (
        f'<p class="note">Python {html.escape(str(env.get("python", "?")))}; {html.escape(versions)}; '
        f"requirements.lock sha256 {html.escape(str(env.get('lock_sha256', '?'))[:12])}…</p>"
    )

    names = [n for n in dict.fromkeys(r["eval"] for r in shares or []) if n != "mean rating"]
    classes = (
        f" {unit.capitalize()}s: {html.escape(', '.join(names[:12]))}{' …' if len(names) > 12 else ''}."
        if names
        else ""
    )
    nav = "".join(f'<a href="#{key}">{title}</a>' for key, title, _ in sections)
    body = "".join(
        f'<section id="{key}"><h2>{title}</h2>{content}</section>' for key, title, content in sections
    )
    page = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(name)}: drift report</title><style>{CSS}</style></head><body>"
        f"<nav>{nav}</nav><main><h1>{html.escape(name)}: drift report</h1>"
        f'<p class="note">{html.escape(tables["metric"])} ({direction}); {len(tables.get("labels") or [])} '
        f"slices, {html.escape(', '.join((tables.get('labels') or [])[:1] + (tables.get('labels') or [])[-1:]))}"
        f"; models ranked by {html.escape(tables.get('ranked_by', 'decay'))}.{classes}</p>{body}{footer}</main>"
        f"</body></html>\n"
    )
    p["report_html"].parent.mkdir(parents=True, exist_ok=True)
    p["report_html"].write_text(page)
    return p["report_html"]
