"""drift.data.fetch against a real HTTP server on 127.0.0.1 serving the fixture files (no network needed), and
its registration with DVC in temporary git + DVC repositories (real git, real DVC)."""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from drift.core.errors import DriftError
from drift.data import fetch as fetch_mod
from drift.data.datasets import amazon
from drift.data.fetch import fetch, fetch_dataset
from drift.data.ledger import Ledger

FIXTURES = Path(__file__).parents[1] / "fixtures"
FILES = {
    "/amazon/Software.jsonl": (FIXTURES / "amazon2023" / "Software.jsonl").read_bytes(),
    "/amazon/Gift_Cards.jsonl.gz": (FIXTURES / "amazon2023" / "Gift_Cards.jsonl.gz").read_bytes(),
    "/arxiv/arxiv-metadata-oai-snapshot.json": (
        FIXTURES / "arxiv" / "arxiv-metadata-sample.json"
    ).read_bytes(),
}
SNAP = "/arxiv/arxiv-metadata-oai-snapshot.json"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Handler(http.server.BaseHTTPRequestHandler):
    """Serves FILES with Range support and an ETag, as file servers do; the server's flags make it misbehave
    on purpose. HEAD requests (DVC's) are not counted in `requests`; `downloads` counts the GETs of
    drift.data.fetch (DVC's GETs read the headers only)."""

    def do_HEAD(self):
        data = FILES.get(self.path)
        if data is None:
            self.send_error(404, "Not Found")
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("ETag", f'"{hashlib.md5(data).hexdigest()}"')
        self.end_headers()

    def do_GET(self):
        srv = self.server
        srv.requests.append((self.path, self.headers.get("Range")))
        srv.downloads += (self.headers.get("User-Agent") or "").startswith("drift-fetch")
        data = FILES.get(self.path)
        if data is None:
            self.send_error(404, "Not Found")
            return
        start = 0
        m = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
        if m and not srv.ignore_range:
            start = int(m.group(1))
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", f'"{hashlib.md5(data).hexdigest()}"')
        self.end_headers()
        if srv.cut_after is not None:  # promise the whole body, send part of it, hang up
            self.wfile.write(body[: srv.cut_after])
            srv.cut_after = None
            self.close_connection = True
            return
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # a client that wanted the headers only
            pass

    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.requests, srv.downloads, srv.ignore_range, srv.cut_after = [], 0, False, None
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture(autouse=True)
def no_retry_wait(monkeypatch):
    monkeypatch.setattr(fetch_mod, "RETRY_WAIT", 0.0)


def test_full_download(server, tmp_path):
    data = FILES[SNAP]
    dest = fetch(server.url + SNAP, tmp_path / "a" / "snap.json", sha256=sha(data), progress=False)
    assert dest == tmp_path / "a" / "snap.json" and dest.read_bytes() == data
    assert not (tmp_path / "a" / "snap.json.part").exists()
    assert server.requests == [(SNAP, None)]
    # already there: nothing is downloaded again
    fetch(server.url + SNAP, dest, sha256=sha(data), progress=False)
    assert len(server.requests) == 1


def test_full_download_with_progress_bar(server, tmp_path, capsys):
    dest = fetch(server.url + SNAP, tmp_path / "snap.json", progress=True)
    assert dest.read_bytes() == FILES[SNAP]
    assert capsys.readouterr().out == ""  # progress goes to stderr only


def test_resume_from_part(server, tmp_path):
    data = FILES[SNAP]
    dest = tmp_path / "snap.json"
    (tmp_path / "snap.json.part").write_bytes(data[:1000])
    fetch(server.url + SNAP, dest, sha256=sha(data), progress=False)
    assert dest.read_bytes() == data
    assert server.requests == [(SNAP, "bytes=1000-")]


def test_resume_after_dropped_connection(server, tmp_path):
    data = FILES[SNAP]
    dest = tmp_path / "snap.json"
    server.cut_after = 5000
    with pytest.raises(DriftError, match="run again to resume"):
        fetch(server.url + SNAP, dest, progress=False, retries=0)
    assert (tmp_path / "snap.json.part").stat().st_size == 5000 and not dest.exists()
    fetch(server.url + SNAP, dest, sha256=sha(data), progress=False)
    assert dest.read_bytes() == data and server.requests[-1] == (SNAP, "bytes=5000-")


def test_retries_resume_by_themselves(server, tmp_path):
    data = FILES[SNAP]
    server.cut_after = 7000
    dest = fetch(server.url + SNAP, tmp_path / "snap.json", sha256=sha(data), progress=False, retries=2)
    assert dest.read_bytes() == data
    assert server.requests == [(SNAP, None), (SNAP, "bytes=7000-")]


def test_server_ignoring_range_restarts(server, tmp_path):
    data = FILES[SNAP]
    server.ignore_range = True
    (tmp_path / "snap.json.part").write_bytes(b"garbage that must not stay at the front")
    dest = fetch(server.url + SNAP, tmp_path / "snap.json", sha256=sha(data), progress=False)
    assert dest.read_bytes() == data and server.requests == [(SNAP, "bytes=39-")]


def test_complete_part_gets_416(server, tmp_path):
    data = FILES[SNAP]
    (tmp_path / "snap.json.part").write_bytes(data)
    dest = fetch(server.url + SNAP, tmp_path / "snap.json", sha256=sha(data), progress=False)
    assert dest.read_bytes() == data and server.requests == [(SNAP, f"bytes={len(data)}-")]


def test_sha256_mismatch_removes_the_download(server, tmp_path):
    dest = tmp_path / "snap.json"
    wrong = "0" * 64
    with pytest.raises(DriftError) as e:
        fetch(server.url + SNAP, dest, sha256=wrong, progress=False)
    msg = str(e.value)
    assert "\n" not in msg and "snap.json" in msg and wrong in msg and sha(FILES[SNAP]) in msg
    assert "removed" in msg
    assert not dest.exists() and not (tmp_path / "snap.json.part").exists()


def test_existing_file_with_wrong_sha_is_kept_and_reported(tmp_path):
    dest = tmp_path / "snap.json"
    dest.write_bytes(b"local copy")
    with pytest.raises(DriftError, match="delete it"):
        fetch("http://127.0.0.1:9/x", dest, sha256="0" * 64, progress=False)
    assert dest.read_bytes() == b"local copy"


def test_404_is_one_line(server, tmp_path):
    with pytest.raises(DriftError) as e:
        fetch(server.url + "/nope.json", tmp_path / "nope.json", progress=False)
    msg = str(e.value)
    assert "\n" not in msg and "404" in msg and "/nope.json" in msg
    assert not (tmp_path / "nope.json").exists() and len(server.requests) == 1  # a 404 is not retried


def test_unreachable_server_is_one_line(tmp_path):
    with pytest.raises(DriftError) as e:
        fetch("http://127.0.0.1:9/x.json", tmp_path / "x.json", progress=False, retries=1, timeout=2)
    assert "\n" not in str(e.value) and "2 attempts" in str(e.value)


def test_only_http(tmp_path):
    with pytest.raises(DriftError, match="http"):
        fetch("ftp://example.org/x", tmp_path / "x", progress=False)


def test_fetch_dataset_amazon_then_read(server, tmp_path):
    src = tmp_path / "amazon"
    cfg = {
        "source": str(src),
        "categories": ["Software"],
        "url": server.url + "/amazon/{category}.jsonl",
        "sha256": {"Software.jsonl": sha(FILES["/amazon/Software.jsonl"])},
    }
    assert fetch_dataset("amazon", cfg, progress=False) == [src / "Software.jsonl"]
    # the server has Gift_Cards only as .jsonl.gz: the template's file name is what is asked for
    with pytest.raises(DriftError, match="404"):
        fetch_dataset("amazon", {**cfg, "categories": ["Gift_Cards"]}, progress=False)
    gz = {**cfg, "categories": ["Gift_Cards"], "url": server.url + "/amazon/{category}.jsonl.gz"}
    assert fetch_dataset("amazon", gz, progress=False) == [src / "Gift_Cards.jsonl.gz"]
    # what fetch wrote is where the reader looks
    ledger = Ledger("amazon")
    rows = list(amazon.read(amazon.PARAMS(source=str(src), categories=["Software", "Gift_Cards"]), ledger))
    assert len(rows) == 300


def test_fetch_dataset_destinations(server, tmp_path):
    from drift.data.fetch import targets

    ((u, d),) = targets("arxiv", {"source": str(tmp_path / "snap.json"), "url": server.url + SNAP})
    assert d == tmp_path / "snap.json"
    ((u, d),) = targets("yearbook", {"source": str(tmp_path / "faces"), "url": "https://x/faces.tar.gz"})
    assert d == tmp_path / "faces.tar.gz"
    ((u, d),) = targets("yearbook", {"source": str(tmp_path / "faces.tar.gz"), "url": "https://x/y.tar.gz"})
    assert d == tmp_path / "faces.tar.gz"
    paths = fetch_dataset(
        "arxiv",
        {"source": str(tmp_path / "snap.json"), "url": server.url + SNAP, "sha256": sha(FILES[SNAP])},
        progress=False,
    )
    assert paths[0].read_bytes() == FILES[SNAP]


@pytest.mark.parametrize("name", ["amazon", "arxiv", "yearbook"])
def test_fetch_dataset_without_url_names_the_param(name):
    with pytest.raises(DriftError) as e:
        fetch_dataset(
            name,
            {"categories": ["Software"], "url": None} if name == "amazon" else {"url": None},
            progress=False,
        )
    assert f"{name}.url" in str(e.value) and "\n" not in str(e.value)


def test_fetch_dataset_sha_string_for_many_files(server, tmp_path):
    cfg = {
        "source": str(tmp_path),
        "categories": ["Software", "Gift_Cards"],
        "url": server.url + "/amazon/{category}.jsonl.gz",
        "sha256": "abc",
    }
    with pytest.raises(DriftError, match="file name -> sha256"):
        fetch_dataset("amazon", cfg, progress=False)


# ---- registration with DVC: temporary git + DVC repositories, real `dvc`, the server above

from drift.data.fetch import Tracked, fetch_and_track, track_dataset  # noqa: E402

# what docs/how-to/presets.md recommends for .gitignore: the pipeline's outputs, not data/ as a whole (DVC
# looks for no .dvc file under a folder git ignores, and takes `/data/*` for ignoring data/ itself)
PIPELINE_OUTPUTS = "/data/records/\n/data/slices/\n/data/embeddings/\n/data/models/\n/data/eval/\n"
SNAP_CFG = {"source": "data/raw/arxiv/snap.json", "sha256": sha(FILES[SNAP])}


def sh(cmd: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result


def dvc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return sh([sys.executable, "-m", "dvc", *args], cwd)


def dvc_status(root: Path) -> dict:
    return json.loads(dvc("status", "--json", cwd=root).stdout)


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """Factory: a fresh git + DVC repository (the working directory from then on), committed."""
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")

    def make(gitignore: str = PIPELINE_OUTPUTS, name: str = "repo") -> Path:
        root = tmp_path / name
        root.mkdir()
        sh(["git", "init", "-q"], root)
        sh(["git", "config", "user.email", "test@example.com"], root)
        sh(["git", "config", "user.name", "test"], root)
        dvc("init", "-q", cwd=root)
        (root / ".gitignore").write_text(gitignore)
        sh(["git", "add", "-A"], root)
        sh(["git", "commit", "-qm", "init"], root)
        monkeypatch.chdir(root)
        return root

    return make


def write_params(root: Path, name: str, section: dict) -> None:
    section = dict(section)
    entry = {"input": section.pop("source")}  # a dataset's files are named once, in its datasets entry
    (root / "params.yaml").write_text(yaml.safe_dump({"datasets": {name: entry}, name: section}))


@pytest.mark.pipeline
def test_fetch_registers_the_download_as_a_dvc_import(server, repo, monkeypatch):
    from typer.testing import CliRunner

    from drift.cli import app

    root = repo()
    data, url = FILES[SNAP], server.url + SNAP
    write_params(root, "arxiv", {**SNAP_CFG, "url": url})
    result = CliRunner().invoke(app, ["fetch", "arxiv", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {
            "dataset": "arxiv",
            "url": url,
            "path": "data/raw/arxiv/snap.json",
            "dvc_file": "data/raw/arxiv/snap.json.dvc",
        }
    ]
    path, dvc_file = Path("data/raw/arxiv/snap.json"), Path("data/raw/arxiv/snap.json.dvc")
    assert path.read_bytes() == data and not Path("data/raw/arxiv/snap.json.part").exists()
    # the .dvc file `dvc import-url` writes: the URL and its ETag (what `dvc update` compares), the content's
    # md5
    stage = yaml.safe_load(dvc_file.read_text())
    assert stage["frozen"] is True
    assert stage["deps"][0]["path"] == url and stage["deps"][0]["checksum"] == f'"{md5(data)}"'
    assert stage["outs"][0]["md5"] == md5(data) and stage["outs"][0]["path"] == "snap.json"
    # what push sends
    assert (root / ".dvc" / "cache" / "files" / "md5" / md5(data)[:2] / md5(data)[2:]).is_file()
    assert dvc_status(root) == {}
    # git ignores the data (DVC's data/raw/arxiv/.gitignore) and sees the .dvc file
    assert sh(["git", "check-ignore", "-q", str(path)], root, check=False).returncode == 0
    untracked = sh(["git", "status", "--porcelain", "--untracked-files=all"], root).stdout.split()
    assert {"data/raw/arxiv/snap.json.dvc", "data/raw/arxiv/.gitignore"} <= set(untracked)
    assert str(path) not in untracked

    assert server.downloads == 1
    # again: nothing is downloaded, the same .dvc file is printed
    n = len(server.requests)
    result = CliRunner().invoke(app, ["fetch", "arxiv"])
    assert result.exit_code == 0 and f"fetched {path}, tracked by {dvc_file}" in result.stdout
    assert len(server.requests) == n

    # dvc update: an unchanged upstream is left alone, a changed one (new ETag) is downloaded
    assert "didn't change" in dvc("update", str(dvc_file), cwd=root).stdout
    new = data + b'{"id": "2601.00001"}\n'
    monkeypatch.setitem(FILES, SNAP, new)
    dvc("update", str(dvc_file), cwd=root)
    assert path.read_bytes() == new
    stage = yaml.safe_load(dvc_file.read_text())
    assert stage["outs"][0]["md5"] == md5(new) and stage["deps"][0]["checksum"] == f'"{md5(new)}"'
    assert dvc_status(root) == {}


@pytest.mark.pipeline
def test_dvc_push_and_pull_carry_the_fetched_file(server, repo, tmp_path, monkeypatch):
    root = repo()
    data = FILES[SNAP]
    (t,) = fetch_and_track("arxiv", {**SNAP_CFG, "url": server.url + SNAP}, progress=False)
    dvc("remote", "add", "-d", "store", str(tmp_path / "store"), cwd=root)
    dvc("push", cwd=root)
    sh(["git", "add", "-A"], root)
    sh(["git", "commit", "-qm", "raw data"], root)
    monkeypatch.delitem(FILES, SNAP)  # gone from the server: the clone gets it from the DVC remote
    clone = tmp_path / "clone"
    sh(["git", "clone", "-q", str(root), str(clone)], tmp_path)
    dvc("pull", cwd=clone)
    assert (clone / t.path).read_bytes() == data
    assert dvc_status(clone) == {}


@pytest.mark.pipeline
def test_a_file_already_there_is_registered_without_downloading(server, repo, capsys):
    root = repo()
    cfg = {"source": "data/raw/arxiv/snap.json", "url": server.url + SNAP}
    Path("data/raw/arxiv").mkdir(parents=True)
    Path("data/raw/arxiv/snap.json").write_bytes(FILES[SNAP])  # e.g. fetched with --no-dvc before `dvc init`
    (t,) = fetch_and_track("arxiv", cfg, progress=False)
    assert t.path.read_bytes() == FILES[SNAP]
    assert yaml.safe_load(t.dvc_file.read_text())["deps"][0]["path"] == cfg["url"]
    assert server.downloads == 0 and dvc_status(root) == {}
    assert capsys.readouterr().err == ""

    # a file of another size than the server's is not the server's: it is tracked as it is, with a note
    root = repo(name="other")
    Path("data/raw/arxiv").mkdir(parents=True)
    Path("data/raw/arxiv/snap.json").write_bytes(b'{"id": "an older snapshot"}\n')
    (t,) = fetch_and_track("arxiv", cfg, progress=False)
    assert t.path.read_bytes() == b'{"id": "an older snapshot"}\n'
    assert "deps" not in yaml.safe_load(t.dvc_file.read_text()) and dvc_status(root) == {}
    err = capsys.readouterr().err
    assert f"the server's is {len(FILES[SNAP])}" in err and "drift fetch arxiv" in err
    t.path.unlink()
    t.dvc_file.unlink()
    (t,) = fetch_and_track("arxiv", cfg, progress=False)
    assert t.path.read_bytes() == FILES[SNAP] and "deps" in yaml.safe_load(t.dvc_file.read_text())
    assert dvc_status(root) == {}


@pytest.mark.pipeline
def test_amazon_files_are_tracked_one_by_one_and_ingest_can_depend_on_their_folder(server, repo):
    root = repo()
    cfg = {
        "source": "data/raw/amazon",
        "categories": ["Software"],
        "url": server.url + "/amazon/{category}.jsonl",
    }
    (t,) = fetch_and_track("amazon", cfg, progress=False)
    assert t == Tracked(
        Path("data/raw/amazon/Software.jsonl"),
        Path("data/raw/amazon/Software.jsonl.dvc"),
        server.url + "/amazon/Software.jsonl",
    )
    imported = t.dvc_file.read_text()
    # a category put there by hand: `drift track` adds it and leaves the import as it is
    shutil.copy(FIXTURES / "amazon2023" / "Gift_Cards.jsonl.gz", "data/raw/amazon/")
    tracked = track_dataset("amazon", {**cfg, "categories": ["Software", "Gift_Cards"]})
    gift = Path("data/raw/amazon/Gift_Cards.jsonl.gz.dvc")
    assert [x.dvc_file for x in tracked] == [t.dvc_file, gift]
    assert t.dvc_file.read_text() == imported and "deps" not in yaml.safe_load(gift.read_text())
    assert dvc_status(root) == {}
    # the ingest stage keeps depending on the raw folder: DVC accepts a dependency on .dvc-tracked files
    (root / "dvc.yaml").write_text(
        yaml.safe_dump(
            {
                "stages": {
                    "ingest": {
                        "cmd": "mkdir -p data/records && ls data/raw/amazon > data/records/amazon.txt",
                        "deps": ["data/raw/amazon"],
                        "outs": ["data/records/amazon.txt"],
                    }
                }
            }
        )
    )
    dag = dvc("dag", "--dot", cwd=root).stdout
    assert f'"{t.dvc_file}" -> "ingest"' in dag and f'"{gift}" -> "ingest"' in dag
    dvc("repro", cwd=root)
    assert dvc_status(root) == {}
    assert "Software.jsonl" in (root / "data" / "records" / "amazon.txt").read_text()


@pytest.mark.pipeline
def test_fetch_into_a_folder_dvc_add_tracks_adds_to_that_folder(server, repo):
    root = repo()
    Path("data/raw/amazon").mkdir(parents=True)
    shutil.copy(FIXTURES / "amazon2023" / "Gift_Cards.jsonl.gz", "data/raw/amazon/")
    dvc("add", "data/raw/amazon", cwd=root)  # the user's own way of tracking the folder
    cfg = {
        "source": "data/raw/amazon",
        "categories": ["Software"],
        "url": server.url + "/amazon/{category}.jsonl",
    }
    (t,) = fetch_and_track("amazon", cfg, progress=False)
    assert (
        t.dvc_file == Path("data/raw/amazon.dvc") and not Path("data/raw/amazon/Software.jsonl.dvc").exists()
    )
    assert yaml.safe_load(t.dvc_file.read_text())["outs"][0]["nfiles"] == 2
    assert dvc_status(root) == {}


def test_outside_a_dvc_repo_fetch_downloads_with_one_note(server, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    cfg = {
        "source": "data/raw/amazon",
        "categories": ["Software.jsonl", "Gift_Cards.jsonl.gz"],
        "url": server.url + "/amazon/{category}",
    }
    done = fetch_and_track("amazon", cfg, progress=False)
    assert [t.dvc_file for t in done] == [None, None]
    assert [t.path.read_bytes() for t in done] == [FILES[f"/amazon/{c}"] for c in cfg["categories"]]
    notes = capsys.readouterr().err.strip().splitlines()
    assert len(notes) == 1 and notes[0].startswith("note:") and "not inside a DVC repository" in notes[0]
    assert not list(tmp_path.rglob("*.dvc"))


@pytest.mark.pipeline
@pytest.mark.parametrize("rules", ["/data/\n", "/data/*\n!/data/raw/\n"])
def test_a_gitignored_dvc_file_stops_fetch_before_it_downloads(server, repo, rules):
    repo(gitignore=rules)  # `/data/*` too: git sees data/raw/, DVC's walk skips data/ (treeverse/dvc#10987)
    cfg = {**SNAP_CFG, "url": server.url + SNAP}
    with pytest.raises(DriftError) as e:
        fetch_and_track("arxiv", cfg, progress=False)
    msg = str(e.value)
    assert "\n" not in msg and "git ignores data/" in msg and "--no-dvc" in msg and "snap.json" in msg
    assert server.requests == [] and not Path("data/raw/arxiv").exists()
    (t,) = fetch_and_track("arxiv", cfg, progress=False, dvc=False)
    assert t.dvc_file is None and t.path.read_bytes() == FILES[SNAP]


@pytest.mark.pipeline
def test_track_a_folder_of_local_files(repo):
    from typer.testing import CliRunner

    from drift.cli import app

    root = repo()
    folder = Path("data/raw/yearbook/faces")
    for sex in "FM":
        (folder / sex).mkdir(parents=True)
        (folder / sex / f"1950_{sex}.png").write_bytes(b"not really a png " + sex.encode())
    write_params(root, "yearbook", {"source": str(folder)})
    result = CliRunner().invoke(app, ["track", "yearbook", "--json"])
    assert result.exit_code == 0, result.output
    dvc_file = Path("data/raw/yearbook/faces.dvc")
    assert json.loads(result.stdout) == [
        {"dataset": "yearbook", "path": str(folder), "dvc_file": str(dvc_file)}
    ]
    stage = yaml.safe_load(dvc_file.read_text())
    assert "deps" not in stage and stage["outs"][0]["nfiles"] == 2 and stage["outs"][0]["path"] == "faces"
    assert dvc_status(root) == {}
    assert sh(["git", "check-ignore", "-q", str(folder)], root, check=False).returncode == 0
    # a new portrait: tracking again updates the same .dvc file
    (folder / "F" / "1951_F.png").write_bytes(b"another")
    result = CliRunner().invoke(app, ["track", "yearbook"])
    assert result.exit_code == 0 and f"tracked {folder} by {dvc_file}" in result.stdout
    assert yaml.safe_load(dvc_file.read_text())["outs"][0]["nfiles"] == 3 and dvc_status(root) == {}


@pytest.mark.pipeline
def test_track_a_missing_source_names_it_and_drift_fetch(repo):
    from typer.testing import CliRunner

    from drift.cli import app

    root = repo()
    write_params(root, "arxiv", {"source": "data/raw/arxiv/snap.json"})
    result = CliRunner().invoke(app, ["track", "arxiv"])
    assert result.exit_code == 2
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1 and "data/raw/arxiv/snap.json" in err and "drift fetch arxiv" in err
    with pytest.raises(DriftError, match="nothing to track"):
        track_dataset("sotu", {})


# ---- the public sources the paper's corpora come from (the authors' dataset set-up)


def test_pcloud_share_resolves_to_its_direct_link(server, tmp_path):
    """A pCloud public link is a page naming the file's direct link: fetch reads it, then downloads the file."""
    archive = (FIXTURES / "yearbook" / "yearbook_attributes.csv").read_bytes()
    page = (
        '<html><script>var publinkData = {"name": "faces.tar.gz", "downloadlink": "'
        + (server.url + "/direct/faces.tar.gz").replace("/", "\\/")
        + '", "size": 1};</script></html>'
    )
    FILES["/publink/show?code=XZabc"] = page.encode()
    FILES["/direct/faces.tar.gz"] = archive
    FILES["/publink/show?code=XZgone"] = b"<html>this link has expired</html>"
    try:
        paths = fetch_dataset(
            "yearbook",
            {"source": str(tmp_path / "faces.tar.gz"), "url": server.url + "/publink/show?code=XZabc"},
            progress=False,
        )
        assert paths == [tmp_path / "faces.tar.gz"] and paths[0].read_bytes() == archive
        assert [p for p, _ in server.requests] == ["/publink/show?code=XZabc", "/direct/faces.tar.gz"]
        with pytest.raises(DriftError) as e:
            fetch_dataset(
                "yearbook",
                {"source": str(tmp_path / "other.tar.gz"), "url": server.url + "/publink/show?code=XZgone"},
                progress=False,
            )
        assert "no download link" in str(e.value) and str(tmp_path / "other.tar.gz") in str(e.value)
        assert "\n" not in str(e.value)
    finally:
        for key in ("/publink/show?code=XZabc", "/direct/faces.tar.gz", "/publink/show?code=XZgone"):
            FILES.pop(key)


def test_paper_sources_need_no_setting(tmp_path):
    """With no url set, yearbook and amazon download from the authors' public sources; arXiv (Kaggle, an
    account) says in one line where to get the snapshot and where to put it."""
    from drift.data.fetch import targets

    ((url, dest),) = targets("yearbook", {"source": str(tmp_path / "y.tar.gz")})
    assert url.startswith("https://e.pcloud.link/publink/show?code=") and dest == tmp_path / "y.tar.gz"
    preset = yaml.safe_load((Path(__file__).parents[2] / "params" / "paper-amazon.yaml").read_text())
    cats = preset["amazon"]["categories"]
    todo = targets("amazon", {"source": str(tmp_path), "categories": cats})
    assert [d.name for _, d in todo] == [f"{c}.jsonl" for c in cats]
    assert all(
        u == "https://huggingface.co/datasets/McAuley-Lab/Amazon-Reviews-2023/resolve/main/raw/"
        f"review_categories/{c}.jsonl"
        for (u, _), c in zip(todo, cats)
    )
    with pytest.raises(DriftError) as e:
        targets("arxiv", {"source": str(tmp_path / "snap.json")})
    msg = str(e.value)
    assert "kaggle.com/datasets/Cornell-University/arxiv" in msg and str(tmp_path / "snap.json") in msg
    assert "\n" not in msg
