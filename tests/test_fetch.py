"""drift.fetch against a real HTTP server on 127.0.0.1 serving the fixture files (no network needed)."""
from __future__ import annotations

import hashlib
import http.server
import re
import threading
from pathlib import Path

import pytest

from drift import fetch as fetch_mod
from drift.datasets import amazon
from drift.errors import DriftError
from drift.fetch import fetch, fetch_dataset
from drift.ledger import Ledger

FIXTURES = Path(__file__).parent / "fixtures"
FILES = {
    "/amazon/Software.jsonl": (FIXTURES / "amazon2023" / "Software.jsonl").read_bytes(),
    "/amazon/Gift_Cards.jsonl.gz": (FIXTURES / "amazon2023" / "Gift_Cards.jsonl.gz").read_bytes(),
    "/arxiv/arxiv-metadata-oai-snapshot.json": (FIXTURES / "arxiv" / "arxiv-metadata-sample.json").read_bytes(),
}
SNAP = "/arxiv/arxiv-metadata-oai-snapshot.json"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Handler(http.server.BaseHTTPRequestHandler):
    """Serves FILES with Range support; the server's flags make it misbehave on purpose."""

    def do_GET(self):
        srv = self.server
        srv.requests.append((self.path, self.headers.get("Range")))
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
        self.end_headers()
        if srv.cut_after is not None:  # promise the whole body, send part of it, hang up
            self.wfile.write(body[: srv.cut_after])
            srv.cut_after = None
            self.close_connection = True
            return
        self.wfile.write(body)

    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.requests, srv.ignore_range, srv.cut_after = [], False, None
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
    cfg = {"source": str(src), "categories": ["Software"], "url": server.url + "/amazon/{category}.jsonl",
           "sha256": {"Software.jsonl": sha(FILES["/amazon/Software.jsonl"])}}
    assert fetch_dataset("amazon", cfg, progress=False) == [src / "Software.jsonl"]
    # the server has Gift_Cards only as .jsonl.gz: the template's file name is what is asked for
    with pytest.raises(DriftError, match="404"):
        fetch_dataset("amazon", {**cfg, "categories": ["Gift_Cards"]}, progress=False)
    gz = {**cfg, "categories": ["Gift_Cards"], "url": server.url + "/amazon/{category}.jsonl.gz"}
    assert fetch_dataset("amazon", gz, progress=False) == [src / "Gift_Cards.jsonl.gz"]
    # what fetch wrote is where the reader looks
    ledger = Ledger("amazon")
    rows = list(amazon.read({"source": str(src), "categories": ["Software", "Gift_Cards"]}, ledger))
    assert len(rows) == 300


def test_fetch_dataset_destinations(server, tmp_path):
    from drift.fetch import targets

    (u, d), = targets("arxiv", {"source": str(tmp_path / "snap.json"), "url": server.url + SNAP})
    assert d == tmp_path / "snap.json"
    (u, d), = targets("yearbook", {"source": str(tmp_path / "faces"), "url": "https://x/faces.tar.gz"})
    assert d == tmp_path / "faces.tar.gz"
    (u, d), = targets("yearbook", {"source": str(tmp_path / "faces.tar.gz"), "url": "https://x/y.tar.gz"})
    assert d == tmp_path / "faces.tar.gz"
    paths = fetch_dataset("arxiv", {"source": str(tmp_path / "snap.json"), "url": server.url + SNAP,
                                    "sha256": sha(FILES[SNAP])}, progress=False)
    assert paths[0].read_bytes() == FILES[SNAP]


@pytest.mark.parametrize("name", ["amazon", "arxiv", "yearbook"])
def test_fetch_dataset_without_url_names_the_param(name):
    with pytest.raises(DriftError) as e:
        fetch_dataset(name, {"categories": ["Software"]}, progress=False)
    assert f"{name}.url" in str(e.value) and "\n" not in str(e.value)


def test_fetch_dataset_sha_string_for_many_files(server, tmp_path):
    cfg = {"source": str(tmp_path), "categories": ["Software", "Gift_Cards"],
           "url": server.url + "/amazon/{category}.jsonl.gz", "sha256": "abc"}
    with pytest.raises(DriftError, match="file name -> sha256"):
        fetch_dataset("amazon", cfg, progress=False)
