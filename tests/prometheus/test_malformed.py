"""Malformed answers end to end (issue 33.2): `collect prometheus` against a server that answers one query
badly. An answer that cannot be read at all ends the run with one line naming the query and what is wrong
(never a traceback); a series or point that cannot be read is quarantined naming the record and field, and
the rest loads."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest

from preemptlens.warehouse import Warehouse

REPO = Path(__file__).resolve().parents[2]
T0 = 1_796_018_460  # 2026-11-30T06:01:00Z
STEPS = 5
LABELS = {"Hostname": "n1", "gpu": "0", "hpc_job": "7", "instance": "n1:9400", "job": "dcgm"}


def matrix(*series: object, **extra: object) -> bytes:
    return orjson.dumps({"status": "success", "data": {"resultType": "matrix", "result": list(series)}, **extra})


def good(uuid: str, value: str = "0.5") -> dict[str, object]:
    return {"metric": dict(LABELS, UUID=uuid), "values": [[T0 + 60 * i, value] for i in range(STEPS)]}


class Server(BaseHTTPRequestHandler):
    """Answers the series lookup with one series and each query_range by the metric it names."""

    answers: ClassVar[dict[str, bytes]] = {}

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        params = parse_qs(parts.query)
        if parts.path.endswith("/series"):
            body = orjson.dumps({"status": "success", "data": [dict(LABELS, UUID="GPU-1")]})
        else:
            query = params["query"][0]
            body = next((b for metric, b in self.answers.items() if metric in query), matrix(good("GPU-1")))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[Server]]]:
    handler = type("Handler", (Server,), {"answers": {}})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    httpd.shutdown()
    httpd.server_close()


def collect(url: str, path: Path) -> subprocess.CompletedProcess[str]:
    args = [
        sys.executable, "-m", "preemptlens.cli", "--warehouse", str(path), "collect", "prometheus", "--url", url,
        "--no-progress", "--since", str(T0), "--until", str(T0 + 60 * (STEPS - 1)),
    ]  # fmt: skip
    env = {**os.environ, "PREEMPTLENS_CLUSTER__NAME": "c1", "PREEMPTLENS_PROMETHEUS__RETRIES": "0",
           "PYTHONPATH": str(REPO)}
    return subprocess.run(args, cwd=path.parent, env=env, capture_output=True, text=True, timeout=600)


DEEP = b'{"status":"success","data":{"resultType":"matrix","result":' + b"[" * 300 + b"]" * 300 + b"}}"
UNREADABLE = [
    (b"got", "is not JSON"),
    (b'{"status":"success"}', "has no data"),
    (b'{"data":5}', "has no status"),
    (b'{"status":"success","data":5}', "has data 5, not an object"),
    (b'{"status":"success","data":{"resultType":"vector","result":[]}}', "holds a vector where"),
    (b'{"status":"success","data":{"resultType":"matrix","result":{}}}', "has result {}, not a list"),
    (DEEP, "is not an object"),  # the series, 300 deep: the answer's one series is quarantined (see below)
]


@pytest.mark.parametrize(("body", "said"), UNREADABLE[:-1], ids=[s for _, s in UNREADABLE[:-1]])
def test_an_answer_that_cannot_be_read_is_one_line_naming_the_query(
    server: tuple[str, type[Server]], tmp_path: Path, body: bytes, said: str
) -> None:
    url, handler = server
    handler.answers["DCGM_FI_DEV_POWER_USAGE"] = body
    done = collect(url, tmp_path / "w.duckdb")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    line = next(x for x in done.stderr.splitlines() if "power_w query" in x)
    assert said in line and "DCGM_FI_DEV_POWER_USAGE" in line, done.stderr


def test_series_and_points_that_cannot_be_read_are_quarantined_and_the_rest_loads(
    server: tuple[str, type[Server]], tmp_path: Path
) -> None:
    url, handler = server
    bad_points = good("GPU-2")
    bad_points["values"] = [[T0, "x"], ["NaN", "0.5"], [T0 + 120, "0.5", 3], *bad_points["values"][3:]]
    handler.answers["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] = matrix(
        good("GPU-1", "0.25"),
        bad_points,
        {"metric": {"Hostname": {"nested": ["n3"]}, "UUID": "GPU-3"}, "values": [[T0, "1"]]},
        {"metric": dict(LABELS, UUID="GPU-4"), "values": "none"},
        {"metric": {"a": orjson.loads(b"[" * 200 + b"]" * 200)}, "values": [[T0, "1"]]},
        5,
    )
    done = collect(url, tmp_path / "w.duckdb")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    with Warehouse(tmp_path / "w.duckdb") as wh:
        busy = wh.query("SELECT gpu_uuid, count(busy) AS n FROM gpu_samples GROUP BY gpu_uuid ORDER BY gpu_uuid")
        rejects = wh.query("SELECT record, field, reason FROM quarantine ORDER BY record")
    # GPU-1 whole; GPU-2 the two points that read (the rest quarantined).
    assert busy.rows() == [("GPU-1", STEPS), ("GPU-2", STEPS - 3)]
    said = {record: (field, reason) for record, field, reason in rejects.rows()}
    assert all(record.endswith(" in the busy answer over [2026-11-30T06:01:00Z, 2026-11-30T06:05:00Z]")
               for record in said), said
    gpu2 = next(r for r in said if "GPU-2" in r)
    assert said[gpu2][0] == "values" and said[gpu2][1] == (
        "1 point(s) that are not a pair of a time and a value (such as [1796018580,\"0.5\",3]); "
        "1 point(s) whose value is not a number (such as 'x'); "
        "1 point(s) with a time that is not epoch seconds from 1970 to 2109 "
        "(busy query, [2026-11-30T06:01:00Z, 2026-11-30T06:05:00Z])"
    )
    for number, field in [(3, "metric"), (5, "metric"), (6, "series")]:
        assert said[next(r for r in said if r.startswith(f"series #{number} "))][0] == field
    gpu4 = next(r for r in said if "GPU-4" in r)
    assert said[gpu4] == ("values", "is not a list (busy query, [2026-11-30T06:01:00Z, 2026-11-30T06:05:00Z])")
