"""Names and labels are data, never markup; secrets stay secret. A column, class or slice label written as
Rich markup prints as written on a terminal (no traceback, no hyperlink); a label written as HTML or Markdown
stays text in the plots data, tables/<ds>.md and reports/<ds>.html; a password in an endpoint URL and the
AWS_* credentials reach no printed line and no file, through the real failure paths (a closed port on
127.0.0.1)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from drift.report.outputs import load_eval, md_text, tables_markdown, write_report
from drift.report.plots import plot_text
from tests.helpers import BIN, ROOT, SHIPPED_PARAMS, run
from tests.helpers import drift_cli as drift
from tests.s3_server import free_port

BOLD = "[/bold]"
LINK = "[link=https://example.invalid]click me[/link]"
OSC8 = "\x1b]8;"  # the start of a terminal hyperlink
ESCAPES = "\x1b]8;;https://example.invalid\x1b\\raw\x1b]8;;\x1b\\"
SCRIPT = "</script><script>document.title='pwned'</script>"


def terminal(*args: str, cwd: Path, columns: int = 200) -> subprocess.CompletedProcess:
    """The `drift` command as a terminal runs it: colours and hyperlinks on (FORCE_COLOR), `columns` wide."""
    env = {**os.environ, "FORCE_COLOR": "1", "COLUMNS": str(columns)}
    return subprocess.run([str(BIN / "drift"), *args], cwd=cwd, capture_output=True, text=True, env=env)


def plain(text: str) -> str:
    """What the terminal shows: the text without its SGR colour sequences."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


# --- Rich markup from data ------------------------------------------------------------------------------------


@pytest.mark.pipeline
def test_init_prints_a_markup_column_and_class_as_written(tmp_path):
    with (tmp_path / "t.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["year", "text", BOLD, ESCAPES])  # the last: a hyperlink written as raw terminal escapes
        w.writerows(
            [2000 + i % 4, f"paragraph {i} about topic {i % 5}", LINK if i % 2 else "plain", i]
            for i in range(80)
        )
    shutil.copy(SHIPPED_PARAMS, tmp_path / "params.yaml")
    result = terminal(
        "init", "mine", "t.csv", "--time", "year", "--text", "text", "--label", BOLD, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and result.stderr == ""
    out = plain(result.stdout)
    assert f"{BOLD} (String)" in out and f"label: {BOLD}" in out and LINK in out
    assert "\\x1b]8;;https://example.invalid\\x1b\\raw" in out  # the escapes shown, not obeyed
    assert OSC8 not in result.stdout and "\x1b[" in result.stdout  # a terminal's output, without a hyperlink


def write_eval(root: Path, labels: list[str], families=("FFN", "FFN")) -> None:
    seeds = {"0": [[0.9 if i == j else 0.6 for j in range(len(labels))] for i in range(len(labels))]}
    for model, family in zip(("ffn-s", "tx-s"), families):
        path = root / "data" / "eval" / "mine" / f"{model}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps(
                {
                    "dataset": "mine",
                    "model": model,
                    "family": family,
                    "metric": "accuracy",
                    "higher_is_better": True,
                    "labels": labels,
                    "usable": [True] * len(labels),
                    "seeds": seeds,
                    "estimated": {},
                }
            )
        )


def report(root: Path, labels: list[str], families=("FFN", "FFN")) -> dict:
    write_eval(root, labels, families)
    return write_report("mine", load_eval(root / "data" / "eval" / "mine", ["ffn-s", "tx-s"]), root)


@pytest.mark.compute
@pytest.mark.pipeline
def test_show_prints_markup_slice_labels_as_written(tmp_path):
    report(tmp_path, [BOLD, LINK, "2002"])
    # with the numbers (the labels head the columns), and as colour blocks (the caption names the first and
    # last)
    for columns, shown in ((200, [f"{BOLD} ", LINK]), (20, [f"columns: {BOLD} …"])):
        result = terminal("show", "mine", "ffn-s", "--root", str(tmp_path), cwd=tmp_path, columns=columns)
        assert result.returncode == 0 and result.stderr == "", result.stderr
        out = plain(result.stdout)
        assert all(s in out for s in shown) and "ID 0.900" in out, out
        assert OSC8 not in result.stdout


@pytest.mark.compute
def test_summary_and_errors_print_markup_as_written(tmp_path):
    report(tmp_path, ["2000", "2001"], families=(BOLD, "FFN"))
    result = drift("summary", cwd=tmp_path)
    assert result.returncode == 0 and f"{BOLD} " in result.stdout, result.stdout  # the family column
    result = drift("show", "mine", BOLD, "--root", str(tmp_path))  # an error naming what the user typed
    assert result.returncode == 2 and BOLD in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_progress_description_is_not_markup(monkeypatch):
    from rich.console import Console

    import drift.core.progress as progress

    screen = io.StringIO()
    monkeypatch.setattr(
        progress, "stderr", Console(file=screen, force_terminal=True, color_system="truecolor")
    )
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    with progress.progress(f"ingest {BOLD} {LINK}", total=2) as bar:
        bar.advance(2)
    assert (
        BOLD in plain(screen.getvalue())
        and LINK in plain(screen.getvalue())
        and OSC8 not in screen.getvalue()
    )


# --- HTML and Markdown from data ------------------------------------------------------------------------------


@pytest.mark.compute
def test_report_outputs_keep_html_and_markdown_labels_as_text(tmp_path):
    from drift.report.html import write_html_report

    labels = [
        SCRIPT,
        "a | b",
        "`x` & <b>y</b>\nz",
        "$x^$",
    ]  # the last: mathtext, which would stop the figures
    report(tmp_path, labels, families=("F|G", "<i>H</i>"))

    plots = [p for p in (tmp_path / "plots").rglob("*.json")]
    assert plots and all("<" not in p.read_text() and ">" not in p.read_text() for p in plots)
    rows = json.loads((tmp_path / "plots/mine/ffn-s/matrix.json").read_text())
    assert (
        rows[0]["train"] == "\u2039/script\u203a\u2039script\u203adocument.title='pwned'\u2039/script\u203a"
    )

    md = (tmp_path / "tables/mine.md").read_text()
    assert "<" not in md and ">" not in md and "`x`" not in md
    for table in re.findall(r"(?:^\|.*\|$\n?)+", md, flags=re.M):
        cells = [len(re.findall(r"(?<!\\)\|", line)) for line in table.splitlines()]
        assert len(set(cells)) == 1, table  # a label's `|` or newline never shifts a cell
    assert "F\\|G" in md and "&lt;i&gt;H&lt;/i&gt;" in md

    page = write_html_report("mine", tmp_path).read_text()
    assert "document.title=" not in page.replace("document.title=&#x27;", "")
    assert "<script" not in page and "<b>y" not in page and "<i>H" not in page


def test_escaping_is_a_no_op_on_the_committed_results():
    """The committed tables and plots are their own escaped form: tables/<ds>.md re-rendered is the same
    bytes."""
    for tables in sorted((ROOT / "tables").glob("*.json")):
        if tables.stem.endswith("-shift"):
            continue
        assert tables_markdown(json.loads(tables.read_text())) == tables.with_suffix(".md").read_text()
    for path in (ROOT / "plots").rglob("*.json"):
        for row in json.loads(path.read_text()):
            assert all(plot_text(v) == v for v in row.values() if isinstance(v, str)), path
    assert md_text("baseline-prior") == "baseline-prior" and plot_text("1950s") == "1950s"


@pytest.mark.compute
@pytest.mark.pipeline
def test_dvc_plots_show_runs_no_script_from_a_label(tmp_path):
    """`dvc plots show` pastes the plots data into its page's <script> as it is: the label stays inert there
    (and, where Chromium is installed, the page's title stays its own once its scripts ran)."""
    report(tmp_path, [SCRIPT, "2001"])
    run(["dvc", "init", "-q", "--no-scm"], tmp_path)
    run(["dvc", "plots", "show", "plots/mine/ffn-s/matrix.json", "-o", "shown"], tmp_path)
    page = (tmp_path / "shown" / "index.html").read_text()
    assert "document.title='pwned'" in page and "<script>document" not in page  # the label, inert
    if shutil.which("chromium"):
        dom = subprocess.run(
            [
                "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--dump-dom",
                (tmp_path / "shown" / "index.html").as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout
        assert not any("pwned" in title for title in re.findall(r"<title>(.*?)</title>", dom, flags=re.S))


# --- secrets --------------------------------------------------------------------------------------------------


@pytest.fixture
def secret_env(monkeypatch):
    """A unique secret as the endpoint URL's password and in AWS_SECRET_ACCESS_KEY; the endpoint a closed
    port."""
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    endpoint = f"http://minio:{secret}-url@127.0.0.1:{free_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "drift-test-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", f"{secret}-env")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    return secret


def files_holding(root: Path, secret: str, mine=()) -> list[Path]:
    """Every file under root holding the secret, but those the user wrote it into (`mine`)."""
    return [
        p for p in root.rglob("*") if p.is_file() and p.name not in mine and secret.encode() in p.read_bytes()
    ]


def test_redact_masks_userinfo_and_the_credentials_only(secret_env):
    from drift.core.secrets import redact

    assert (
        redact(f"at {os.environ['AWS_ENDPOINT_URL']}/x")
        == f"at http://minio:***@127.0.0.1:{os.environ['AWS_ENDPOINT_URL'].rsplit(':', 1)[1]}/x"
    )
    assert redact("http://token@host:9 and ray://u:p@h:1") == "http://***@host:9 and ray://u:***@h:1"
    assert redact(f"key {secret_env}-env, password {secret_env}-url") == "key ***, password ***"
    assert redact("drift-test-key-id") == "***"
    ordinary = "s3://bucket/x at http://127.0.0.1:9000 [/bold] 1950s a@b.c"
    assert redact(ordinary) == ordinary


def test_cache_error_names_the_endpoint_without_its_password(tmp_path, secret_env):
    result = drift("cache", "verify", "--cache-dir", "s3://bucket/store", cwd=tmp_path)
    assert (
        result.returncode == 2
        and "does not answer" in result.stderr
        and "minio:***@127.0.0.1" in result.stderr
    )
    assert secret_env not in result.stdout + result.stderr and not files_holding(tmp_path, secret_env)


@pytest.mark.pipeline
def test_stage_errors_and_logs_hold_no_secret(tmp_path, secret_env, monkeypatch, capsys):
    # the embed stage as `dvc repro` runs it: the store's endpoint does not answer (a DriftError, one line)
    (tmp_path / "data" / "slices").mkdir(parents=True)
    (tmp_path / "data" / "slices" / "sotu.json").write_text("{}")
    shutil.copy(SHIPPED_PARAMS, tmp_path / "params.yaml")
    result = subprocess.run(
        [sys.executable, str(ROOT / "stages" / "embed.py"), "sotu"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "DRIFT_CACHE_DIR": "s3://bucket/store"},
    )
    assert result.returncode == 2 and "does not answer" in result.stderr and "minio:***@" in result.stderr
    assert secret_env not in result.stdout + result.stderr

    # any other exception: Lance's own error names the endpoint whole; the line and the log hold it masked
    from drift.core.stage import run_stage

    def main(argv):
        import lance

        lance.dataset("s3://bucket/store/t.lance", storage_options={"max_retries": "0", "timeout": "5s"})

    monkeypatch.setenv("DVC_ROOT", str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["stages/embed.py", "sotu"])
    with pytest.raises(SystemExit) as exit_:
        run_stage(main)
    err = capsys.readouterr().err
    log = tmp_path / ".drift" / "logs" / "embed@sotu.log"
    assert exit_.value.code == 1 and "failed: " in err and str(log) in err
    assert "minio:***@" in log.read_text() and secret_env not in err
    assert not files_holding(tmp_path, secret_env)


@pytest.mark.pipeline
def test_push_error_names_the_remote_without_its_password(tmp_path, secret_env, monkeypatch):
    monkeypatch.delenv(
        "AWS_ENDPOINT_URL"
    )  # the remote's own endpoint (.dvc/config.local), as DVC users set it
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")  # the `dvc` drift push runs
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "f.txt").write_text("data\n")
    endpoint = f"http://minio:{secret_env}-dvc@127.0.0.1:{free_port()}"
    for args in (
        ["init", "-q", "--no-scm"],
        ["add", "-q", "f.txt"],
        ["remote", "add", "-d", "storage", "s3://bucket/dvc"],
        ["remote", "modify", "--local", "storage", "endpointurl", endpoint],
    ):
        run(["dvc", *args], repo)
    result = drift("push", cwd=repo)
    assert (
        result.returncode == 2
        and "remote 'storage' (s3://bucket/dvc at http://minio:***@127.0.0.1" in result.stderr
    )
    assert secret_env not in result.stdout + result.stderr
    assert not files_holding(tmp_path, secret_env, mine=("config.local",))
