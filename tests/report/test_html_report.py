"""reports/<ds>.html, built from this repository's committed results and loaded in a real browser.

Headless Chromium (Debian's `chromium` package) is driven over the DevTools protocol with aiohttp's websocket
client: the page must load with every figure decoded and drawn at a size, no request other than the file
itself and its data URIs, no console error, no horizontal scrolling on a 1366-pixel laptop screen, and a
screenshot that is not blank. A page that breaks each rule is loaded too, so the checks are seen to fail.
"""

from __future__ import annotations

import asyncio
import base64
import html
import io
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from drift.analysis.policy import write_policy_report
from drift.core.params import load_params
from drift.models import get_model_info
from drift.report.html import write_html_report
from drift.report.outputs import write_dataset_report
from tests.helpers import SHIPPED_PARAMS

ROOT = Path(__file__).resolve().parents[2]
DATASETS = ("sotu", "synth-portraits")
CHROMIUM = next(
    (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None
)
WIDTH, HEIGHT = 1366, 768  # a laptop screen

PAGE_STATE = """JSON.stringify({
  images: [...document.images].map(i => ({alt: i.alt, complete: i.complete, natural: [i.naturalWidth, i.naturalHeight],
                                          shown: [i.getBoundingClientRect().width, i.getBoundingClientRect().height]})),
  sections: [...document.querySelectorAll('section')].map(s => s.id),
  summary: (document.querySelector('#summary table') || {}).innerText || '',
  policies: (document.querySelector('#policies table') || {}).innerText || '',
  scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
  height: document.documentElement.scrollHeight})"""


class DevTools:
    """The few DevTools protocol calls a page check needs; events are kept as they arrive."""

    def __init__(self, ws):
        self.ws, self.n, self.events = ws, 0, []

    async def call(self, method: str, **params):
        self.n += 1
        await self.ws.send_json({"id": self.n, "method": method, "params": params})
        while True:
            message = await self.ws.receive_json(timeout=60)
            if message.get("id") == self.n:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]
            self.events.append(message)

    async def wait_for(self, event: str, timeout: float = 60):
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == event for e in self.events):
            self.events.append(await self.ws.receive_json(timeout=max(0.1, deadline - time.monotonic())))


async def _visit(port: int, urls: list[str]) -> list[dict]:
    import aiohttp

    out = []
    async with aiohttp.ClientSession() as session:
        for url in urls:
            async with session.put(f"http://127.0.0.1:{port}/json/new?about:blank") as r:
                target = await r.json()
            async with session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                tools = DevTools(ws)
                for domain in ("Network", "Page", "Runtime", "Log"):
                    await tools.call(f"{domain}.enable")
                await tools.call(
                    "Emulation.setDeviceMetricsOverride",
                    width=WIDTH,
                    height=HEIGHT,
                    deviceScaleFactor=1,
                    mobile=False,
                )
                await tools.call("Page.navigate", url=url)
                await tools.wait_for("Page.loadEventFired")
                state = await tools.call("Runtime.evaluate", expression=PAGE_STATE, returnByValue=True)
                shot = await tools.call("Page.captureScreenshot", format="png")
                events = tools.events
                out.append(
                    {
                        **json.loads(state["result"]["value"]),
                        "requests": [
                            e["params"]["request"]["url"]
                            for e in events
                            if e.get("method") == "Network.requestWillBeSent"
                        ],
                        "failed": [e["params"] for e in events if e.get("method") == "Network.loadingFailed"],
                        "errors": [
                            e["params"]
                            for e in events
                            if e.get("method") == "Runtime.exceptionThrown"
                            or (
                                e.get("method") == "Log.entryAdded"
                                and e["params"]["entry"]["level"] == "error"
                            )
                            or (
                                e.get("method") == "Runtime.consoleAPICalled"
                                and e["params"]["type"] == "error"
                            )
                        ],
                        "screenshot": base64.b64decode(shot["data"]),
                    }
                )
            async with session.get(f"http://127.0.0.1:{port}/json/close/{target['id']}"):
                pass
    return out


def load_in_chromium(paths: list[Path]) -> list[dict]:
    """Each page as headless Chromium saw it: its figures, sections, requests, failures, errors, a screenshot."""
    # ignore_cleanup_errors: Chromium's helper processes may still write the profile as the browser exits
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        browser = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-sync",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-default-apps",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                f"--window-size={WIDTH},{HEIGHT}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + 60
            while not (port_file.exists() and port_file.read_text().strip()):
                assert browser.poll() is None and time.monotonic() < deadline, "chromium did not start"
                time.sleep(0.1)
            port = int(port_file.read_text().split()[0])
            return asyncio.run(_visit(port, [p.resolve().as_uri() for p in paths]))
        finally:
            browser.terminate()
            browser.wait(30)


def blank(png: bytes) -> bool:
    """A screenshot with (almost) one colour."""
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=float)
    return pixels.std() < 2 or len(np.unique(pixels)) < 8


def page_problems(page: dict) -> list[str]:
    """What is wrong with a loaded page, in words (empty: it rendered)."""
    problems = []
    if not page["images"]:
        problems.append("no figure")
    for image in page["images"]:
        if not image["complete"] or min(image["natural"]) == 0 or min(image["shown"]) < 100:
            problems.append(f"figure not drawn: {image['alt']} {image['natural']} shown {image['shown']}")
    outside = [u for u in page["requests"] if not u.startswith(("file:", "data:"))]
    problems += [f"request outside the file: {u}" for u in outside]
    problems += [f"request failed: {f.get('errorText')} {f.get('blockedReason', '')}" for f in page["failed"]]
    problems += [f"console error: {json.dumps(e)[:200]}" for e in page["errors"]]
    if page["scrollWidth"] > page["innerWidth"]:
        problems.append(f"wider than a {WIDTH}-pixel screen: {page['scrollWidth']} pixels")
    if blank(page["screenshot"]):
        problems.append("blank screenshot")
    return problems


@pytest.fixture(scope="module")
def committed(tmp_path_factory) -> Path:
    """The committed results of this repository (metrics/, plots/, tables/, params.yaml) in a temp dir, with
    the policy comparison and the HTML reports written there."""
    root = tmp_path_factory.mktemp("committed")
    for name in ("metrics", "plots", "tables"):
        shutil.copytree(ROOT / name, root / name)
    shutil.copy(SHIPPED_PARAMS, root / "params.yaml")
    params = load_params(root / "params.yaml")
    for name in DATASETS:
        write_policy_report(name, params.report.policy, params.train.epochs, root)
        write_html_report(name, root)
    return root


@pytest.mark.compute
def test_the_page_is_self_contained(committed):
    for name in DATASETS:
        page = (committed / "reports" / f"{name}.html").read_text()
        assert "http://" not in page and "https://" not in page and "<script" not in page
        assert "<link" not in page and "url(" not in page
        # no published run of the embedded datasets: no comparison with the paper
        assert 'id="paper"' not in page
        pngs = sorted((committed / "plots" / name).rglob("*.png"))
        assert page.count('<img src="data:image/png;base64,') == len(pngs)  # every figure the report drew


@pytest.mark.compute
@pytest.mark.pipeline
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium: apt-get install chromium")
def test_the_reports_render_in_chromium(committed, tmp_path):
    broken = tmp_path / "broken.html"  # breaks every rule: the checks must see each
    broken.write_text(
        '<html><body style="width:3000px"><img src="http://127.0.0.1:9/x.png" alt="remote">'
        '<img src="data:image/png;base64,AAAA" alt="corrupt"></body></html>'
    )
    empty = tmp_path / "empty.html"
    empty.write_text("<html><body></body></html>")
    pages = load_in_chromium([committed / "reports" / f"{name}.html" for name in DATASETS] + [broken, empty])
    for name, page in zip(DATASETS, pages):
        assert page_problems(page) == [], name
        assert len(page["images"]) == len(list((committed / "plots" / name).rglob("*.png")))
        expected = {"summary", "matrices", "cohort", "forgetting", "families", "policies"}
        expected |= {"saliency"} if name == "synth-portraits" else set()
        assert expected <= set(page["sections"]), name
        assert "baseline-prior" in page["summary"] and "always" in page["policies"]
        assert page["height"] > 3 * HEIGHT  # the whole report laid out, not a first screen only
    problems = " | ".join(page_problems(pages[-2]))
    for expected in (
        "request outside the file: http://127.0.0.1:9/x.png",
        "request failed",
        "figure not drawn: corrupt",
        "wider than",
    ):
        assert expected in problems
    assert page_problems(pages[-1]) == ["no figure", "blank screenshot"]


@pytest.mark.compute
@pytest.mark.pipeline
def test_a_paper_dataset_is_set_beside_the_published_run(tmp_path):
    """A run in Amazon Reviews' format (the evaluate stage's files on the published slices, then the report
    stage): the page gets the comparison with the paper and, per model, one figure of its matrix, the paper's
    and the difference."""
    from tests.protocol.test_paper import paper_run

    picked, _ = paper_run(tmp_path, "amazon")
    write_dataset_report("amazon", picked + ["baseline-prior"], tmp_path, saliency=False)
    path = write_html_report("amazon", tmp_path)
    page = path.read_text()
    section = page[page.index('<section id="paper">') :]
    section = section[: section.index("</section>")]
    assert section.count('<img src="data:image/png;base64,') == len(picked)  # one figure of three panels each
    for model in picked:
        display = get_model_info(model).display
        caption = f"{model} ({display}): ours, the paper's, ours − paper"
        assert f'alt="{html.escape(caption)}"' in section
    assert "Only in our run: baseline-prior." in section
    assert "Spearman ρ of the Decay rankings -0.500 over 3 models" in section
    assert "http://" not in page and "https://" not in page
    if CHROMIUM is not None:
        (loaded,) = load_in_chromium([path])
        assert page_problems(loaded) == [] and "paper" in loaded["sections"]


HOSTILE = "<script>alert('x')</script> & co"


def test_a_hostile_name_is_shown_as_text_through_the_template(tmp_path):
    """A model, family, slice label, class, share and policy named with markup and `&` (in the committed sotu
    results): the page rendered from its template shows each as text, in table cells, the heading and a
    figure's caption alike."""
    tables = (ROOT / "tables" / "sotu.json").read_text()
    for name in ("probe-minilm", "Frozen", "1850s"):
        tables = tables.replace(json.dumps(name), json.dumps(f"{name} {HOSTILE}"))
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "sotu.json").write_text(tables)
    plots = tmp_path / "plots" / "sotu"
    plots.mkdir(parents=True)
    shutil.copy(ROOT / "plots" / "sotu" / "labels.png", plots / "labels.png")
    shares = [
        {"train": f"1850s {HOSTILE}", "eval": f"class {HOSTILE}", "value": 0.5, "rows": 10, "what": HOSTILE},
        {"train": "2010s", "eval": f"class {HOSTILE}", "value": 0.25, "rows": 10, "what": HOSTILE},
    ]
    (plots / "labels.json").write_text(json.dumps(shares))
    policy = {
        "model": f"probe-minilm {HOSTILE}",
        "policy": HOSTILE,
        "cost": 1.0,
        "mean": 0.5,
        "worst": 0.1,
        "retrainings": 1,
        "pareto": True,
        "best": True,
        "cost_unit": HOSTILE,
    }
    (tmp_path / "plots" / "policies").mkdir()
    (tmp_path / "plots" / "policies" / "sotu.json").write_text(json.dumps([policy]))

    page = write_html_report("sotu", tmp_path).read_text()
    shown = html.escape(HOSTILE)
    assert shown == "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; co"
    assert "<script" not in page and "alert('x')" not in page and " & co" not in page
    # summary
    assert f'<td class="name">probe-minilm {shown}</td><td class="name">Frozen {shown}</td>' in page
    assert f"slices, 1850s {shown}, " in page  # the heading's first slice
    assert f"s: class {shown}.</p>" in page  # the heading's classes
    # label shares
    assert f'<td class="name">class {shown}</td>' in page and f"<th>1850s {shown}</th>" in page
    assert (
        f'alt="sotu: {shown} per slice"' in page
        and f"<figcaption>sotu: {shown} per slice</figcaption>" in page
    )
    assert f'<tr class="best"><td class="name">probe-minilm {shown}</td><td class="name">{shown}</td>' in page
    assert f"<th>cost ({shown})</th>" in page
