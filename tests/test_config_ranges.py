"""Every setting has a range, checked when the configuration is read, all problems at once, in one
clear line each; no value of any setting ends in a traceback or echoes what a reference resolved to."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from preemptlens.config import Setting, range_text, sections
from preemptlens.config import load_config as load
from preemptlens.errors import ConfigError

ALL = [(section.name, s) for section in sections() for s in section.settings]
NUMBERS = [(name, s) for name, s in ALL if s.bounds is not None]
# Text that is free by nature (names, paths, PromQL, claims); every other text setting has choices or a check.
FREE_TEXT = {
    "warehouse.path", "cluster.name", "cluster.default_tier", "prometheus.tenant", "prometheus.username",
    "prometheus.ca_file", "prometheus.selector", "prometheus.busy_metric", "prometheus.busy_fallback_metric",
    "prometheus.mem_metric", "prometheus.power_metric", "prometheus.busy_query", "prometheus.mem_query",
    "prometheus.power_query", "slurm.bin_dir", "slurm.slurm_conf", "slurm.ctld_log", "slurm_actions.protected_qos",
    "slurm_actions.fallback_qos", "kubernetes.kubeconfig", "kubernetes.context", "kubernetes.ca_file",
    "kubernetes.gpu_resource", "access.oidc_client_id", "access.oidc_groups_claim", "access.oidc_user_claim",
    "access.default_role", "report.folder", "lake.folder", "spark.master",
}


def where(name: str, s: Setting) -> str:
    return f"{name}.{s.key}"


def wrap(s: Setting, value: Any) -> Any:
    """`value` as the setting's kind holds a number: alone, as a list's member, or as a table's."""
    if s.kind is list:
        return [value]
    if s.kind is dict:
        return {"member": value}
    return value


def problems(overrides: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        load(overrides=overrides)
    return str(caught.value)


def test_every_number_has_a_range_that_holds_its_default() -> None:
    for name, s in ALL:
        numeric = s.kind in (int, float) or s.member in (int, float)
        assert numeric == (s.bounds is not None), f"{where(name, s)}: a number without a range"
        if s.bounds is None or s.default is None:
            continue
        low, high = s.bounds
        values = s.default if isinstance(s.default, list) else list(s.default.values()) \
            if isinstance(s.default, dict) else [s.default]
        assert all(low <= v <= high for v in values), f"{where(name, s)}: default {s.default} outside {s.bounds}"


@pytest.mark.parametrize(("name", "s"), NUMBERS, ids=[where(n, s) for n, s in NUMBERS])
def test_every_number_out_of_its_range_is_refused_by_name(name: str, s: Setting) -> None:
    assert s.bounds is not None
    low, high = s.bounds
    kind = int if (s.kind is int or s.member is int) else float
    above = int(high) + 1 if kind is int else high * 1.5 + 1
    below = int(low) - 1 if kind is int else low - abs(low) * 0.5 - 1
    hostile = [above, below, 10**20 if kind is int else 1e300]
    if kind is float:
        hostile += [math.nan, math.inf]
    for value in hostile:
        text = problems({where(name, s): wrap(s, value)})
        assert f"{where(name, s)}" in text and "Traceback" not in text, (value, text)
        if isinstance(value, float) and not math.isfinite(value):
            assert "expected a finite number" in text, text
        else:
            assert f"out of range: expected a value {range_text(s)}" in text, text


def test_every_out_of_range_number_is_reported_at_once() -> None:
    overrides = {}
    for name, s in NUMBERS:
        assert s.bounds is not None
        overrides[where(name, s)] = wrap(s, int(s.bounds[1]) + 1 if int in (s.kind, s.member) else s.bounds[1] * 2 + 1)
    text = problems(overrides)
    assert text.startswith(f"{len(NUMBERS)} configuration problem(s)"), text[:200]
    for key in overrides:
        assert f"- {key}" in text, key


def test_every_text_setting_has_choices_a_check_or_is_free_text_by_nature() -> None:
    for name, s in ALL:
        if s.kind is str and not s.secret:
            assert s.choices or s.check or where(name, s) in FREE_TEXT, (
                f"{where(name, s)}: a text setting with neither choices nor a check; give it a check= "
                "(duration_text, size_text, cron_text, http_url, listen_address ...) or, if any text will do, "
                "add it to FREE_TEXT")


@pytest.mark.parametrize("value", ["not a valid value \x01", "9" * 400, "", "99999999999999999999d", "-4GB"])
def test_every_checked_text_refuses_hostile_text_without_a_traceback(value: str) -> None:
    checked = [(name, s) for name, s in ALL if s.kind is str and s.check is not None]
    for name, s in checked:
        assert s.check is not None
        try:
            expected = s.check(value)
        except Exception as exc:  # noqa: BLE001 -- the point: a check answers, it never raises
            raise AssertionError(f"{where(name, s)}: the check of {value[:20]!r} raised {exc!r}") from None
        if "\x01" in value or len(value) > 300:
            assert expected is not None, (where(name, s), value[:40])


@pytest.mark.parametrize(("text", "expected"), [
    ("0 6 * * 1", None), ("*/5 * * * *", None), ("0 0 30 2 *", "never fires"), ("61 * * * *", "not a crontab"),
    ("0 6 * *", "five fields"), ("@weekly", "five fields"), ("0 6 * * 1; rm -rf /", "five fields"),
])
def test_report_cron(text: str, expected: str | None) -> None:
    if expected is None:
        assert load(overrides={"serve.report_cron": text})
    else:
        assert expected in problems({"serve.report_cron": text})


def test_durations_sizes_and_addresses_have_ranges() -> None:
    text = problems({
        "prometheus.step": "0s", "prometheus.initial_window": "99999999999d", "prometheus.safety_lag": "5 minutes",
        "sql.memory_limit": "1000", "sql.max_result_bytes": "1e20GB", "sql.address_space_limit": "99TB",
        "serve.metrics_address": "my host", "dashboard.address": "300.1.1.1", "dashboard.public_host": "a b",
        "access.proxy_user_header": "X-User: admin", "slurm.log_timezone": "Mars/Olympus",
        "spark.driver_memory": "lots",
    })
    assert text.startswith("12 configuration problem(s)"), text
    for fragment in ("prometheus.step: '0s' is out of range: expected from 1s to 1d",
                     "prometheus.initial_window: '99999999999d' is out of range",
                     "prometheus.safety_lag: expected a duration", "sql.memory_limit: expected a size",
                     "sql.address_space_limit: '99TB' is out of range", "serve.metrics_address: expected",
                     "access.proxy_user_header: expected an HTTP header name", "slurm.log_timezone: expected a time"):
        assert fragment in text, fragment


def test_what_the_environment_or_a_file_gave_is_never_quoted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "tok3n-9f8e7d"
    monkeypatch.setenv("HOOK", f"http://[{secret}/hooks")
    monkeypatch.setenv("PREEMPTLENS_PROMETHEUS__STEP", f"{secret}m")
    monkeypatch.setenv("PREEMPTLENS_SERVE__REPORT_CRON", f"0 {secret} * * *")
    (tmp_path / "url").write_text(f"https://{secret}@host:99999/x")
    config = tmp_path / "c.toml"
    config.write_text(
        '[alerts]\nwebhook_url = { "$env" = "HOOK" }\ndashboard_url = { "$env" = "HOOK" }\n'
        f'[kubernetes]\napi_url = {{ "$file" = "{tmp_path / "url"}" }}\n'
    )
    with pytest.raises(ConfigError) as caught:
        load(str(config))
    text = str(caught.value)
    assert text.startswith("5 configuration problem(s)"), text
    assert secret not in text and "Traceback" not in text, text
    for key in ("alerts.webhook_url", "alerts.dashboard_url", "kubernetes.api_url", "prometheus.step",
                "serve.report_cron"):
        assert key in text


@pytest.mark.parametrize("value", ["١٢", "²", "1e3", "0x10", " ", "7.5", "+-3"])
def test_whole_numbers_from_the_environment_are_ascii_digits(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREEMPTLENS_SQL__MAX_ROWS", value)
    assert "sql.max_rows: expected a whole number, got str" in problems({})


def test_a_check_across_fields_is_reported_at_start_with_the_rest() -> None:
    text = problems({"kai_protect.near_completion_low": 0.95, "kai_protect.near_completion_high": 0.9,
                     "sql.max_rows": 0})
    # The range is checked first; once every setting has its kind and range, the sections are built.
    assert "sql.max_rows: 0 is out of range" in text
    text = problems({"kai_protect.near_completion_low": 0.95, "kai_protect.near_completion_high": 0.9})
    assert "near_completion_low: must not exceed near_completion_high" in text


# -- bounds set by what works ----------------------------------------------------------------------------------
# The [sql] limits whose lower bound is what a query needs to run at all: at the bound an ordinary query runs (on
# the real query process, whatever else loads this machine), below it the configuration is refused by name.
SQL_AT_FLOOR = {"sql.address_space_limit": "1GiB", "sql.memory_limit": "64MiB", "sql.timeout_s": "5",
                "sql.max_result_bytes": "1KiB", "sql.max_rows": "1"}
SQL_BELOW_FLOOR = {"sql.address_space_limit": "1023MiB", "sql.memory_limit": "63MiB", "sql.timeout_s": "4.9",
                   "sql.max_result_bytes": "0.999KiB", "sql.max_rows": "0"}


@pytest.fixture(scope="module")
def small_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.people.people_seed import jobs_warehouse

    return jobs_warehouse(tmp_path_factory.mktemp("floor"))


@pytest.mark.parametrize("name", sorted(SQL_AT_FLOOR))
def test_each_sql_limit_works_at_its_lower_bound_and_is_refused_below(name: str, small_warehouse: Path) -> None:
    from preemptlens.readonly import Limits, query

    limits = load(overrides={name: SQL_AT_FLOOR[name]}).of(Limits)
    # A scan and a grouping of a few million rows: what an operator's query does, not only `SELECT 1`.
    grouped = query(small_warehouse, "SELECT x % 7 AS k, count(*) AS n FROM range(5000000) t(x) GROUP BY k "
                    "ORDER BY k", limits)
    if name == "sql.max_rows":
        assert grouped.truncated and grouped.frame.rows() == [(0, 714_286)]
    else:
        assert grouped.frame["n"].sum() == 5_000_000 and grouped.frame.height == 7
    assert query(small_warehouse, "SELECT count(*) AS n FROM jobs", limits).frame.item() == 3
    below = SQL_BELOW_FLOOR[name]
    shown = below if name in ("sql.max_rows", "sql.timeout_s") else repr(below)  # a number as read, a size as written
    assert f"{name}: {shown} is out of range" in problems({name: below})


def test_the_query_process_runs_as_many_threads_as_fit_its_address_space() -> None:
    from preemptlens.readonly import MIN_ADDRESS_SPACE, query_threads

    mapped = 760 * 2**20  # what the fork server's child maps before DuckDB starts (measured)
    assert query_threads(MIN_ADDRESS_SPACE, mapped, 64) == 1
    # The default 4GB on a 64-core node: 20 threads, not 64 (which may reserve 4.5 GiB: a stack and an arena each).
    assert query_threads(4 * 10**9, mapped, 64) == 20
    assert query_threads(4 * 10**9, mapped, 2) == 2
    assert query_threads(4 * 2**40, mapped, 256) == 256


def test_an_address_space_below_what_the_process_maps_is_a_clear_error_not_an_abort(small_warehouse: Path) -> None:
    """Limits made in code skip the configuration's range: the query process says what it needs instead of dying
    with DuckDB's threads unable to start."""
    from preemptlens.readonly import Limits, QueryError, query

    with pytest.raises(QueryError, match=r"sql.address_space_limit \(512MB\) is below what the query's process "
                                         r"needs: it maps [\d,]+ MiB before DuckDB starts"):
        query(small_warehouse, "SELECT 1", Limits(address_space_limit="512MB"))
