"""The Prometheus collector against a real Prometheus 2.42 holding known DCGM history."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest
import requests

from preemptlens.collectors.prometheus import (
    MAX_POINTS,
    PrometheusSettings,
    normalise,
    options_from,
    plan_pages,
)
from preemptlens.config import Secret
from preemptlens.errors import ConfigError, SourceError, TransientSourceError
from preemptlens.warehouse import Warehouse
from tests.prometheus.conftest import History, PrometheusServer, backfill, free_port
from tests.prometheus.groundtruth import CLUSTER, GPUS, STYLES, expected
from tests.prometheus.helpers import KEY, collector, run, table, watermarks
from tests.prometheus.openmetrics import ExporterStyle, write_openmetrics

REPO = Path(__file__).resolve().parents[2]
# -- ground truth ----------------------------------------------------------------


def test_every_gpu_and_minute_once_with_the_values_written(history: History, reference: Path) -> None:
    got = table(reference)
    want = expected(history.raw, history.first, history.last)
    assert got.select(KEY).is_duplicated().sum() == 0
    assert got.select(KEY).sort(KEY).equals(want.select(KEY).sort(KEY)), "a GPU-minute is missing or extra"
    assert set(got["source"]) == {"prometheus"} and set(got["cluster"]) == {CLUSTER}
    both = want.join(got, on=KEY, suffix="_got")
    assert both.height == want.height
    for col in ("busy", "mem_used_mib", "power_w"):
        far = (pl.col(col) - pl.col(f"{col}_got")).abs().fill_null(0) > 1e-9
        diff = both.filter(far | (pl.col(col).is_null() != pl.col(f"{col}_got").is_null()))
        assert diff.height == 0, f"{col} differs:\n{diff.head()}"
    assert both.filter(pl.col("gpu_index") != pl.col("gpu_index_got")).height == 0
    # The GPU whose power went unreported still has busy and memory for those minutes.
    no_power = both.filter(pl.col("power_w_got").is_null())
    assert no_power.height > 30 and no_power["busy_got"].null_count() == 0


def test_job_attribution_for_every_label_variant(history: History, reference: Path) -> None:
    got = table(reference)
    want = expected(history.raw, history.first, history.last)
    both = want.join(got, on=KEY, suffix="_got")
    wrong = both.filter(pl.col("job_id").ne_missing(pl.col("job_id_got")))
    assert wrong.height == 0, f"jobs differ:\n{wrong.select('host', 'time', 'job_id', 'job_id_got')}"
    for host, style in STYLES.items():
        jobs = both.filter(pl.col("host") == host)["job_id_got"]
        if style.job_labels == "none":
            assert jobs.null_count() == jobs.len()
        else:
            # Allocated and unallocated stretches both occur on every attributed host.
            assert 0 < jobs.null_count() < jobs.len(), host
    # Steps where the job changed inside the step: two series share the GPU-minute.
    raw = history.raw.with_columns(((pl.col("time").dt.epoch("s") + 59) // 60).alias("m"))
    boundaries = raw.group_by("gpu_uuid", "gpu_instance", "m").agg(pl.col("job_id").n_unique().alias("n"))
    assert boundaries.filter(pl.col("n") > 1).height > 50


def test_silent_gpu_gets_no_phantom_points(
    history: History, prometheus: PrometheusServer, reference: Path
) -> None:
    gpu = GPUS[3]
    raw = history.raw.filter(pl.col("gpu_uuid") == gpu.uuid)
    gap = (
        raw.sort("time")
        .with_columns(pl.col("time").diff().alias("d"))
        .filter(pl.col("d") > timedelta(minutes=1))
    )
    assert gap.height == 1
    resumed = gap["time"][0]
    silent_from = resumed - gap["d"][0]
    got = table(reference).filter(
        (pl.col("gpu_uuid") == gpu.uuid)
        & (pl.col("time") > silent_from + timedelta(minutes=1))
        & (pl.col("time") < resumed)
    )
    assert got.height == 0
    # A plain instant selector would have answered for 5 more minutes (lookback, no staleness markers).
    answer = requests.get(
        f"{prometheus.url}/api/v1/query_range",
        params={
            "query": f'DCGM_FI_DEV_FB_USED{{UUID="{gpu.uuid}"}}',
            "start": (silent_from + timedelta(minutes=2)).timestamp(),
            "end": (silent_from + timedelta(minutes=4)).timestamp(),
            "step": 60,
        },
        timeout=10,
    ).json()
    assert sum(len(s["values"]) for s in answer["data"]["result"]) >= 3


def test_rerun_over_the_same_window_changes_nothing(
    history: History, prometheus: PrometheusServer, tmp_path: Path
) -> None:
    path = tmp_path / "w.duckdb"
    window = (history.first, history.first + timedelta(hours=3))
    first = run(path, collector(prometheus.url, *window, page_points=60))
    before = table(path)
    again = run(path, collector(prometheus.url, *window, page_points=45))
    assert sum(loaded for loaded, _ in first) == before.height > 0
    assert sum(loaded for loaded, _ in again) == 0
    assert sum(unchanged for _, unchanged in again) == before.height
    assert table(path).equals(before)


def test_incremental_run_resumes_from_the_watermark(
    history: History, prometheus: PrometheusServer, reference: Path, tmp_path: Path
) -> None:
    path = tmp_path / "w.duckdb"
    middle = history.first + timedelta(hours=5, minutes=7)
    run(path, collector(prometheus.url, history.first, middle, page_points=200))
    assert set(watermarks(path).values()) == {middle.isoformat().replace("+00:00", "Z")}
    # No --since: from the watermark on. Collecting up to the same `until` again does nothing.
    resumed = run(path, collector(prometheus.url, None, history.last, page_points=200))
    assert resumed and all(unchanged == 0 for _, unchanged in resumed)
    assert run(path, collector(prometheus.url, None, history.last)) == []
    assert table(path).equals(table(reference))


def test_backfill_does_not_move_the_watermark_over_a_gap(
    history: History, prometheus: PrometheusServer, tmp_path: Path
) -> None:
    path = tmp_path / "w.duckdb"
    early = history.first + timedelta(hours=1)
    run(path, collector(prometheus.url, history.first, early))
    run(path, collector(prometheus.url, early + timedelta(hours=2), early + timedelta(hours=3)))
    assert set(watermarks(path).values()) == {early.isoformat().replace("+00:00", "Z")}


# -- paging and labels ------------------------------------------------------------


def test_pages_cover_the_window_once_and_stay_under_the_point_limit() -> None:
    step = 60_000
    for start, end, points in [
        (0, 0, 1),
        (0, 59 * step, 10),
        (step * 7, step * 7 + 10_000 * step, MAX_POINTS),
        (0, 1000 * step, 3),
    ]:
        pages = plan_pages(start, end, step, points)
        evaluated = [t for first, last in pages for t in range(first, last + 1, step)]
        assert evaluated == list(range(start, end + 1, step))
        assert all((last - first) // step + 1 <= points for first, last in pages)
    with pytest.raises(ConfigError, match="11000"):
        options_from(PrometheusSettings(page_points=MAX_POINTS + 1), CLUSTER)


# dcgm-exporter scraped through the GPU operator's ServiceMonitor: pod and namespace name the exporter itself,
# so the workload is known only from the exported_* labels, when the exporter adds them. Written once because
# the two cases below differ only in those labels.
OPERATOR_SCRAPE = {
    "Hostname": "n1",
    "UUID": "U",
    "pod": "dcgm-x",
    "namespace": "gpu-operator",
    "service": "s",
    "endpoint": "e",
}


@pytest.mark.parametrize(
    ("labels", "host", "instance", "job"),
    [
        (
            {"Hostname": "n1", "UUID": "U", "gpu": "0", "pod": "p", "namespace": "ns", "container": "c"},
            "n1",
            "",
            "ns/p",
        ),
        (
            {"hostname": "n1", "UUID": "U", "gpu": "0", "pod_name": "p", "pod_namespace": "ns"},
            "n1",
            "",
            "ns/p",
        ),
        ({**OPERATOR_SCRAPE, "exported_pod": "p", "exported_namespace": "ns"}, "n1", "", "ns/p"),
        (OPERATOR_SCRAPE, "n1", "", None),
        (
            {"Hostname": "n1", "UUID": "U", "hpc_job": "123_4", "GPU_I_ID": "3", "GPU_I_PROFILE": "1g.10gb"},
            "n1",
            "3",
            "123_4",
        ),
        ({"uuid": "U", "minor_number": "2", "jobid": "77", "instance": "node7:9445"}, "node7", "", "77"),
        ({"Hostname": "n1", "UUID": "U", "pod": ""}, "n1", "", None),
    ],
)
def test_label_variants_normalise(labels: dict[str, str], host: str, instance: str, job: str | None) -> None:
    gpu = normalise(labels)
    assert not isinstance(gpu, tuple)
    assert (gpu.host, gpu.gpu_uuid, gpu.gpu_instance, gpu.job_id) == (host, "U", instance, job)


def test_series_without_a_gpu_identity_is_quarantined(history: History, tmp_path: Path) -> None:
    data = tmp_path / "data"
    raw = history.raw.filter(pl.col("gpu_uuid") == GPUS[0].uuid).with_columns(pl.lit("").alias("gpu_uuid"))
    om = tmp_path / "bad.om.txt"
    write_openmetrics(raw, om, STYLES)
    backfill(om, data)
    server = PrometheusServer(data)
    server.start()
    try:
        path = tmp_path / "w.duckdb"
        run(path, collector(server.url, history.first, history.first + timedelta(hours=1)))
        with Warehouse(path) as wh:
            q = wh.query("SELECT record, field, reason FROM quarantine")
            assert wh.query("SELECT count(*) AS n FROM gpu_samples")["n"][0] == 0
    finally:
        server.stop()
    assert q.height >= 1 and set(q["field"]) == {"UUID"}
    assert all("k8s-a" in r and "UUID" in why for r, why in zip(q["record"], q["reason"], strict=True))


# -- errors -------------------------------------------------------------------------


def test_unreachable_server_names_the_query_and_hides_secrets(
    history: History, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    col = collector(
        f"http://admin:pa55word@127.0.0.1:{port}",
        history.first,
        history.last,
        bearer_token=Secret("t0ken-s3cret"),
        password=Secret("pa55word"),
        username="admin",
        retries=1,
        backoff_s=0.01,
    )
    caplog.set_level(logging.DEBUG)
    with pytest.raises(TransientSourceError) as err:
        list(col.batches({}))
    text = str(err.value)
    assert f"127.0.0.1:{port}" in text and "prometheus.url" in text and "series lookup" in text
    for secret in ("t0ken-s3cret", "pa55word"):
        assert secret not in text and secret not in caplog.text


def test_bad_query_is_http_400_with_the_query_and_window(
    history: History, prometheus: PrometheusServer
) -> None:
    col = collector(
        prometheus.url, history.first, history.last, busy_query="avg_over_time(DCGM_FI_DEV_GPU_UTIL[$window]"
    )
    with pytest.raises(SourceError) as err:
        list(col.batches({}))
    text = str(err.value)
    assert "HTTP 400" in text and "bad_data" in text and "avg_over_time(DCGM_FI_DEV_GPU_UTIL[59999ms]" in text
    assert history.first.strftime("%Y-%m-%dT%H:%M") in text and "hint:" in text


def test_query_failing_on_the_server_is_http_422(history: History, prometheus: PrometheusServer) -> None:
    # Two metrics that become the same series once the name is dropped cannot be evaluated.
    clash = 'avg_over_time({__name__=~"DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_POWER_USAGE"}[$window])'
    col = collector(prometheus.url, history.first, history.last, power_query=clash)
    with pytest.raises(SourceError) as err:
        list(col.batches({}))
    assert "HTTP 422" in str(err.value) and "page_points" in str(err.value)


def test_no_series_is_an_error_and_moves_nothing(
    history: History, prometheus: PrometheusServer, tmp_path: Path
) -> None:
    path = tmp_path / "w.duckdb"
    with pytest.raises(SourceError) as err:
        run(
            path,
            collector(
                prometheus.url,
                history.first,
                history.last,
                busy_metric="DCGM_FI_NOT_EXPORTED",
                busy_fallback_metric="",
            ),
        )
    assert "no series of DCGM_FI_NOT_EXPORTED" in str(err.value) and "prometheus.busy_metric" in str(
        err.value
    )
    assert watermarks(path) == {} and table(path).height == 0


def test_window_before_the_first_sample_says_so_in_one_line(
    history: History, prometheus: PrometheusServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "w.duckdb"
    with caplog.at_level(logging.INFO, logger="preemptlens"):
        run(path, collector(prometheus.url, history.first - timedelta(hours=3), history.first - timedelta(hours=2)))
    said = [r.getMessage() for r in caplog.records if "nothing to collect" in r.getMessage()]
    assert len(said) == 1 and "ends before the first scraped sample" in said[0], caplog.text
    assert "\n" not in said[0]
    assert watermarks(path) == {} and table(path).height == 0


def test_window_inside_the_safety_lag_says_so_in_one_line(
    prometheus: PrometheusServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`--since 2m` with the default 5 m safety lag: nothing can be collected yet."""
    path = tmp_path / "w.duckdb"
    since = datetime.now(UTC) - timedelta(minutes=2)
    with caplog.at_level(logging.INFO, logger="preemptlens"):
        run(path, collector(prometheus.url, since, None))
    said = [r.getMessage() for r in caplog.records if "nothing to collect" in r.getMessage()]
    assert len(said) == 1 and "inside the safety lag" in said[0], caplog.text
    assert "prometheus.safety_lag = 300s" in said[0]
    assert watermarks(path) == {} and table(path).height == 0


class _Stub(BaseHTTPRequestHandler):
    """A server that answers like an overloaded or hanging Prometheus."""

    mode = "503"

    def do_POST(self) -> None:
        if self.mode == "hang":
            time.sleep(1.5)
        body = b'{"status":"error","errorType":"unavailable","error":"overloaded"}'
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[tuple[str, type[_Stub]]]:
    handler = type("Handler", (_Stub,), {"mode": "503"})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def test_503_is_retried_then_transient(history: History, stub: tuple[str, type[_Stub]]) -> None:
    url, _ = stub
    began = time.monotonic()
    with pytest.raises(TransientSourceError) as err:
        list(collector(url, history.first, history.last, retries=2, backoff_s=0.2).batches({}))
    assert time.monotonic() - began >= 0.2  # it backed off before giving up
    assert (
        "HTTP 503" in str(err.value) and "after 2 retries" in str(err.value) and "resumes" in str(err.value)
    )


def test_timeout_is_transient_and_says_what_to_change(
    history: History, stub: tuple[str, type[_Stub]]
) -> None:
    url, handler = stub
    handler.mode = "hang"
    with pytest.raises(TransientSourceError) as err:
        list(collector(url, history.first, history.last, timeout_s=0.3).batches({}))
    assert "did not answer" in str(err.value) and "prometheus.timeout_s" in str(err.value)


# -- interruptions ------------------------------------------------------------------


def test_kill_9_mid_collection_then_rerun_gives_the_same_table(
    history: History, prometheus: PrometheusServer, reference: Path, tmp_path: Path
) -> None:
    path = tmp_path / "w.duckdb"
    args = [
        sys.executable, "-m", "preemptlens.cli", "-v", "--warehouse", str(path), "collect", "prometheus",
        "--url", prometheus.url, "--page-points", "7", "--no-progress",
        "--since", history.first.isoformat(), "--until", history.last.isoformat(),
    ]  # fmt: skip
    env = {**os.environ, "PREEMPTLENS_CLUSTER__NAME": CLUSTER, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(args, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        # Page 12 is being handed over: pages 1-11 are committed, the rest is not.
        if "page 12/" in line:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    partial = watermarks(path)
    assert partial and max(partial.values()) < history.last.isoformat().replace("+00:00", "Z")
    assert 0 < table(path).height < table(reference).height
    # The re-run (no --since) resumes after the last committed page.
    rerun = subprocess.run(
        [*args[: args.index("--since")], "--until", history.last.isoformat()],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert table(path).equals(table(reference))


def test_prometheus_restarting_mid_collection_ends_in_the_same_table(
    history: History, own_prometheus: PrometheusServer, reference: Path, tmp_path: Path
) -> None:
    path = tmp_path / "w.duckdb"
    own_prometheus.start()
    col = collector(own_prometheus.url, history.first, history.last, page_points=97)
    batches = col.batches({})
    with Warehouse(path) as wh:
        for _ in range(3):
            wh.load_batch(next(batches))
        own_prometheus.stop()
        # A request the server took before it stopped is answered 503 while it shuts down; the next cannot reach it.
        with pytest.raises(TransientSourceError, match=r"cannot reach|answered HTTP 503"):
            # The collector fetches one page ahead: a page fetched before the stop still loads.
            for batch in batches:
                wh.load_batch(batch)
    own_prometheus.start()
    # A collector with retries rides out a second restart that happens while it runs. Its retries wait for
    # the server for as long as it takes to come back on a busy machine (20 retries, backing off up to
    # 2 minutes each: about 24 minutes in all), not for a fixed few seconds.
    restarted = threading.Timer(0.5, own_prometheus.start)
    with Warehouse(path) as wh:
        batches = collector(
            own_prometheus.url, None, history.last, page_points=97, retries=20, backoff_s=0.25, timeout_s=3600
        ).batches(wh.watermarks("prometheus"))
        wh.load_batch(next(batches))
        own_prometheus.stop()
        restarted.start()
        for batch in batches:
            wh.load_batch(batch)
    restarted.join()
    assert table(path).equals(table(reference))


# -- live scrape --------------------------------------------------------------------


def test_live_scrape_of_an_exporter(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    styles = {
        "live-a": ExporterStyle(job_labels="hpc_job"),
        "live-b": ExporterStyle(job_labels="pod", hostname_label="hostname"),
    }
    gpus = pl.DataFrame(
        {
            "host": ["live-a", "live-a", "live-b"],
            "gpu_uuid": ["GPU-live-0", "GPU-live-1", "GPU-live-2"],
            "gpu_instance": ["", "", ""],
            "gpu_index": [0, 1, 0],
            "busy": [0.25, 0.75, 0.5],
            "mem_used_mib": [1000.0, 2000.0, 3000.0],
            "power_w": [100.5, 200.25, 300.0],
            "job_id": ["555", None, "ml/trainer-0"],
        }
    )
    exposition = tmp_path / "metrics.txt"
    write_openmetrics(gpus, exposition, styles, timestamps=False)
    payload = exposition.read_bytes()

    class Exporter(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/openmetrics-text; version=1.0.0; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    exporter = ThreadingHTTPServer(("127.0.0.1", 0), Exporter)
    threading.Thread(target=exporter.serve_forever, daemon=True).start()
    target = f"127.0.0.1:{exporter.server_address[1]}"
    server = PrometheusServer(
        tmp_path / "data",
        config_text=(
            "global:\n  scrape_interval: 1s\n"
            f"scrape_configs:\n  - job_name: dcgm\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    server.start()
    try:
        # Eight scrapes before collecting, however long a busy machine takes to make them.
        deadline = time.monotonic() + 300
        while True:
            up = requests.get(
                f"{server.url}/api/v1/query", params={"query": "count_over_time(up[1m])"}, timeout=30
            ).json()
            if up["data"]["result"] and float(up["data"]["result"][0]["value"][1]) >= 8:
                break
            assert time.monotonic() < deadline, f"Prometheus scraped the exporter fewer than 8 times in 5 minutes: {up}"
            time.sleep(0.5)
        path = tmp_path / "w.duckdb"
        until = datetime.now(UTC) - timedelta(seconds=1)
        run(
            path, collector(server.url, until - timedelta(seconds=5), until, step="2s", selector='job="dcgm"')
        )
        got = table(path)
    finally:
        server.stop()
        exporter.shutdown()
    assert got.height >= 6 and got["time"].min() >= now - timedelta(seconds=1)
    per_gpu = (
        got.group_by("gpu_uuid")
        .agg(
            pl.col("busy").min().alias("lo"),
            pl.col("busy").max().alias("hi"),
            pl.col("job_id").unique().alias("jobs"),
            pl.col("power_w").mean(),
            pl.col("mem_used_mib").max(),
        )
        .sort("gpu_uuid")
    )
    assert per_gpu["lo"].to_list() == per_gpu["hi"].to_list() == [0.25, 0.75, 0.5]
    assert [j.to_list() for j in per_gpu["jobs"]] == [["555"], [None], ["ml/trainer-0"]]
    assert per_gpu["power_w"].to_list() == pytest.approx([100.5, 200.25, 300.0])
    assert per_gpu["mem_used_mib"].to_list() == [1000.0, 2000.0, 3000.0]
