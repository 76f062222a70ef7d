"""seqforecast-data download against a local HTTP server on 127.0.0.1 (no test reaches the
internet): the real bytes of a benchmark file where ../shared/data has them (else a file made
here, with its own entry), a truncated and a corrupted copy, a connection that breaks half way
and is resumed, a server that ignores Range, a missing file, a manual step."""

import dataclasses
import hashlib
import http.server
import threading
from pathlib import Path

import pytest

from seqforecast.datasets import DatasetError, entry
from seqforecast.datasets import cli as data_cli
from seqforecast.datasets.download import download

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


def _real_or_made(tmp_path_factory):
    """(entry, bytes): ETTh1's real bytes and entry where they are here, else a made file."""
    real = entry("etth1")
    if (SHARED / real.file).is_file():
        return real, (SHARED / real.file).read_bytes()
    rows = ["date,a,b,c,d,e,f,OT"] + [f"2016-07-01 {h:02d}:00:00,{','.join(['1.5'] * 7)}"
                                        for h in range(24)]
    body = ("\n".join(rows) + "\n").encode()
    return dataclasses.replace(real, rows=24, sha256=hashlib.sha256(body).hexdigest()), body


class Server(http.server.ThreadingHTTPServer):
    """Serves `files` (name -> bytes) with Range support; `break_after` (name -> n) sends the
    whole Content-Length but closes after n bytes; `no_range` ignores Range headers."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.files, self.break_after, self.no_range, self.requests = {}, {}, set(), []

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{name}"


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):
        server: Server = self.server
        name = self.path.lstrip("/")
        server.requests.append((name, self.headers.get("Range")))
        if name not in server.files:
            self.send_error(404, "Not Found")
            return
        body, start = server.files[name], 0
        wanted = self.headers.get("Range")
        if wanted and name not in server.no_range:
            start = int(wanted.removeprefix("bytes=").rstrip("-"))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        cut = server.break_after.pop(name, None)
        self.wfile.write(body[start:cut] if cut is not None else body[start:])
        if cut is not None:
            self.close_connection = True


@pytest.fixture
def server():
    srv = Server()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    return _real_or_made(tmp_path_factory)


def _entry(real_entry, server, name="good"):
    return dataclasses.replace(real_entry, url=server.url(name))


def test_a_download_is_verified_and_lands_atomically(server, real, tmp_path):
    dataset, body = real
    server.files["good"] = body
    path = download(_entry(dataset, server), tmp_path, progress=False, say=lambda line: None)
    assert path == tmp_path / dataset.file and path.read_bytes() == body
    assert not list(tmp_path.glob("*.part"))
    said = []
    download(_entry(dataset, server), tmp_path, progress=False, say=said.append)
    assert "already there, verified (SHA-256)" in said[0] and len(server.requests) == 1


@pytest.mark.parametrize("damage", ["truncated", "corrupted"])
def test_a_wrong_file_is_refused_and_the_good_one_kept(server, real, tmp_path, damage):
    dataset, body = real
    (tmp_path / dataset.file).write_bytes(body[:-7] + b"9999999")  # a damaged copy there
    bad = body[: len(body) // 2] if damage == "truncated" else body[:100] + b"X" + body[101:]
    server.files["good"] = bad
    with pytest.raises(DatasetError) as err:
        download(_entry(dataset, server), tmp_path, progress=False, say=lambda line: None)
    line = str(err.value)
    assert "is not the dataset's file" in line and "SHA-256" in line and "\n" not in line
    assert f"{tmp_path / dataset.file} is kept as it was" in line
    assert (tmp_path / dataset.file).read_bytes() == body[:-7] + b"9999999"  # untouched
    assert not list(tmp_path.glob("*.part"))


def test_a_broken_connection_resumes_where_it_stopped(server, real, tmp_path):
    dataset, body = real
    server.files["good"] = body
    server.break_after["good"] = len(body) // 3
    with pytest.raises(DatasetError, match=r"stopped after \d+ of \d+ bytes.*to resume"):
        download(_entry(dataset, server), tmp_path, progress=False, say=lambda line: None)
    part = tmp_path / (dataset.file + ".part")
    assert part.stat().st_size == len(body) // 3 and not (tmp_path / dataset.file).exists()
    download(_entry(dataset, server), tmp_path, progress=False, say=lambda line: None)
    assert (tmp_path / dataset.file).read_bytes() == body
    assert server.requests[-1] == ("good", f"bytes={len(body) // 3}-")


def test_a_server_that_ignores_range_sends_it_all_again(server, real, tmp_path):
    dataset, body = real
    server.files["good"], server.no_range = body, {"good"}
    (tmp_path / (dataset.file + ".part")).write_bytes(b"stale bytes of an earlier try")
    download(_entry(dataset, server), tmp_path, progress=False, say=lambda line: None)
    assert (tmp_path / dataset.file).read_bytes() == body


def test_a_missing_file_or_a_manual_step_is_one_line(server, real, tmp_path):
    dataset, _ = real
    with pytest.raises(DatasetError, match=r"answered HTTP 404"):
        download(_entry(dataset, server, "nothing"), tmp_path, progress=False)
    manual = entry("weather")
    with pytest.raises(DatasetError) as err:
        download(manual, tmp_path, progress=False)
    assert manual.source in str(err.value) and "seqforecast-data verify weather" in str(err.value)


def test_the_command_exits_2_with_one_line_and_keeps_the_good_file(server, real, tmp_path,
                                                                  monkeypatch, capsys):
    dataset, body = real
    server.files["good"] = body[:-1] + b"?"
    monkeypatch.setattr(data_cli, "entry", lambda name: _entry(dataset, server))
    (tmp_path / dataset.file).write_bytes(body)
    # A verified copy is not fetched again; a damaged one is replaced only by a good download.
    assert data_cli.main(["download", "etth1", f"data_dir={tmp_path}"]) == 0
    (tmp_path / dataset.file).write_bytes(body[:10])
    assert data_cli.main(["download", "etth1", f"data_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: etth1: the download from")
    assert (tmp_path / dataset.file).read_bytes() == body[:10]
