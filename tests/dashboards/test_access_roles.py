"""Logged in behind a real nginx (basic authentication, user and groups passed on in X-Forwarded-* headers),
each role sees what docs/deploy.md promises, in headless Chromium: the hand-made cluster's jobs of other
teams are masked for a team and a viewer (masking.show_other_teams_jobs = false), only admins get the
Operations and SQL pages, and a logged-in reader lands on their own preemptions."""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import duckdb
import fixture_cluster
import polars as pl
import pytest
from browser import Chromium, Dashboard, PageState, free_port
from nginx import Nginx

from preemptlens.analytics.alerts import VictimNotice
from preemptlens.config import load_config
from preemptlens.dashboards.views_common import WIDE_TABLE
from preemptlens.reading.masking import EVERYTHING, HIDDEN, Scope
from preemptlens.reading.words import MEASURES
from preemptlens.warehouse import Warehouse

PASSWORD = "correct horse"
# nginx users and their groups; the dashboard's [access] gives roles to some names and groups.
USERS = {"vision-user": "", "nlp-user": "nlp,staff", "ops": "platform", "guest": "staff"}
CONFIG = """
[masking]
show_other_teams_jobs = false
[access]
proxy_headers = true
proxy_secret = { "$file" = "SECRET_FILE" }
users = { "vision-user" = "team:vision" }
groups = { platform = "admin", nlp = "team:nlp" }
"""
NAV = """
JSON.stringify(Array.from(document.querySelectorAll('[data-testid="stSidebarNavLink"]'))
    .map(e => e.innerText.trim().split('\\n').pop().trim()))
"""


@pytest.fixture(scope="module")
def proxied(cluster_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Nginx, Chromium]]:
    root = tmp_path_factory.mktemp("roles")
    secret = secrets.token_urlsafe(24)
    (root / "proxy-secret").write_text(secret)
    config = root / "preemptlens.toml"
    config.write_text(CONFIG.replace("SECRET_FILE", str(root / "proxy-secret")))
    program = (sys.executable, "-m", "preemptlens.cli", "--config", str(config))
    with (
        Dashboard(cluster_warehouse, root / "streamlit.log", program=program) as dashboard,
        Nginx(root / "nginx", dashboard.port, dict.fromkeys(USERS, PASSWORD),
              {u: g for u, g in USERS.items() if g}, secret) as nginx,
        Chromium(width=1400, height=900) as browser,
    ):
        yield nginx, browser


def open_as(proxied: tuple[Nginx, Chromium], user: str, path: str = "", title: str | None = None,
            script: str | None = None) -> PageState:
    """A new tab logged in to nginx as `user` (basic authentication on every request, the WebSocket's too);
    `script` runs in it before the page's own."""
    nginx, browser = proxied
    browser.fresh_tab()
    if script:
        browser.call("Page.addScriptToEvaluateOnNewDocument", {"source": script})
    token = base64.b64encode(f"{user}:{PASSWORD}".encode()).decode()
    browser.call("Network.enable")
    browser.call("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {token}"}})
    browser.navigate(f"{nginx.url}/{path}")
    state, seconds = browser.wait_rendered(timeout_s=120, title=title)
    assert state.rendered and not state.exceptions, f"{user} /{path}: not rendered in {seconds:.1f} s: {state.text}"
    return state


def nav(browser: Chromium) -> list[str]:
    return list(json.loads(browser.call("Runtime.evaluate", {"expression": NAV, "returnByValue": True})["result"]
                           ["value"]))


def vision_truth(warehouse: Path) -> tuple[int, float, float]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        row = con.execute(
            "SELECT count(*), sum(lost_gpu_s + warmup_gpu_s) / 3600, sum(requeue_gpu_s) / 3600 "
            "FROM preemption_ledger WHERE victim_user = 'vision-user'"
        ).fetchone()
    finally:
        con.close()
    assert row is not None
    return int(row[0]), float(row[1]), float(row[2])


def test_a_team_member_lands_on_their_own_preemptions(proxied: tuple[Nginx, Chromium], cluster_warehouse: Path) -> None:
    state = open_as(proxied, "vision-user", title="My preemptions")
    count, thrown, waiting = vision_truth(cluster_warehouse)
    # The fixture's vision victims: train-w0..w2 and train-48b, 4 + 4 + 4 + 8 GPU-hours of lost progress.
    assert count == 4 and thrown == pytest.approx(20.0)
    own, team = state.text.split("Your team's other jobs (vision)")
    figures = r"(Preemptions|Jobs preempted|Work thrown away, GPU-h|Waiting, GPU-h)\s*\n+\s*([\d,.]+)"
    assert dict(re.findall(figures, own)) == {
        "Preemptions": "4", "Jobs preempted": "4", "Work thrown away, GPU-h": f"{thrown:,.1f}",
        "Waiting, GPU-h": f"{waiting:,.1f}"}
    assert dict(re.findall(figures, team.split("train-")[0]))["Preemptions"] == "0"
    assert re.match(r"My preemptions\s+vision-user \(vision\) ·", state.text), state.text[:200]
    # One card per job, each with every preemption of the job; train-48b's flags are kept. Their preemptors are
    # infer's jobs: masked (masking.show_other_teams_jobs).
    assert "**" not in state.text and "preempted by (another team #1)" in state.text.replace("\n", " ")
    assert "serve-w" not in state.text
    assert "A preemptor of another team reads “(another team #n)”" in state.text, "the page says what it hides"
    assert state.text.count("What would have protected it") == 4
    assert "avoidable: 8 idle hoarded GPUs were in the pool" in state.text


def test_a_team_sees_cluster_figures_but_not_other_teams_jobs(proxied: tuple[Nginx, Chromium]) -> None:
    state = open_as(proxied, "vision-user", "preemptions", title="Preemptions")
    browser = proxied[1]
    # the pilot's evaluation is cluster-level, public like the rules and reasons
    assert nav(browser) == ["My preemptions", "Overview", "Preemptions", "Idle hoarding", "Priority scope creep",
                            "Tuning", "Pilot"]
    # All five preemptions are counted; nlp's finetune-48 and its preemptor batch-48 are not named.
    assert re.search(r"Preemptions\s*\n+\s*5\b", state.text)
    assert fixture_cluster.WORST_W48 not in state.text and fixture_cluster.WORST_W48_PREEMPTOR not in state.text
    assert "train-48b" in state.text
    hoarding = open_as(proxied, "vision-user", "hoarding", title="Idle hoarding")
    assert fixture_cluster.HOARDER_JOB not in hoarding.text


def test_a_masked_team_member_reads_their_own_and_every_teams_figures(cluster_warehouse: Path) -> None:
    """Team-level tables (loss coverage, goodput, net per team) are figures summed over jobs: a masked team member
    gets them exactly as an admin does, their own team's row first of all (they were masked whole before)."""
    from preemptlens.dashboards import coverage, data

    def read(scope: Scope) -> dict[str, pl.DataFrame]:
        with data.reader(cluster_warehouse, scope=scope) as r:
            o = data.options(r)
            assert o.first is not None and o.last is not None
            f = data.Filters(start=o.first, end=o.last + timedelta(seconds=1))
            return {"coverage": data.coverage(r, f), "goodput": data.goodput(r, f), "team_net": data.team_net(r, f)}

    masked, admin = read(Scope(False, ("vision",))), read(EVERYTHING)
    for name, frame in masked.items():
        assert frame.equals(admin[name]), name
    assert "vision" in masked["coverage"]["breakdown"].to_list()
    rows = coverage.coverage_rows(masked["coverage"], "team")
    assert not [r for r in rows if HIDDEN[:-1] in str(r)], rows


def test_admin_only_pages_are_not_served_to_a_team(proxied: tuple[Nginx, Chromium]) -> None:
    for path in ("sql", "operations"):
        state = open_as(proxied, "nlp-user", path)
        assert state.title == "My preemptions", f"/{path} served {state.title} to a team member"
    assert "SQL" not in nav(proxied[1]) and "Operations" not in nav(proxied[1])


def test_a_viewer_sees_no_jobs_of_any_team(proxied: tuple[Nginx, Chromium]) -> None:
    state = open_as(proxied, "guest", "preemptions", title="Preemptions")
    assert re.search(r"Preemptions\s*\n+\s*5\b", state.text)
    for job in ("train-48b", "train-w0", fixture_cluster.WORST_W48):
        assert job not in state.text
    # No story offered after the ledger's counts without saying why: a viewer is in no team.
    assert "you are in no team" in state.text and "No victims in this window." not in state.text
    assert "“(another team #n)” in Victim job" in state.text, "the ledger says what it hides and why"


def test_an_admin_by_group_gets_sql_operations_and_every_job(proxied: tuple[Nginx, Chromium]) -> None:
    state = open_as(proxied, "ops", "preemptions", title="Preemptions")
    assert fixture_cluster.WORST_W48 in state.text and HIDDEN[:-1] not in state.text
    assert {"Operations", "SQL"} <= set(nav(proxied[1]))
    assert open_as(proxied, "ops", "operations", title="Operations").title == "Operations"


def test_a_forged_identity_header_does_not_get_past_nginx(proxied: tuple[Nginx, Chromium]) -> None:
    nginx, browser = proxied
    browser.fresh_tab()
    token = base64.b64encode(f"guest:{PASSWORD}".encode()).decode()
    browser.call("Network.enable")
    browser.call("Network.setExtraHTTPHeaders", {"headers": {
        "Authorization": f"Basic {token}", "X-Forwarded-User": "ops", "X-Forwarded-Groups": "platform"}})
    browser.navigate(f"{nginx.url}/sql")
    state, _ = browser.wait_rendered(timeout_s=120, title="Preemption overview")
    assert state.title == "Preemption overview" and "SQL" not in nav(browser)


def test_a_local_client_going_around_nginx_is_not_believed(proxied: tuple[Nginx, Chromium]) -> None:
    """Another user of the same host connects to the dashboard's loopback port directly, naming an admin."""
    nginx, browser = proxied
    browser.fresh_tab()
    browser.call("Network.enable")
    browser.call("Network.setExtraHTTPHeaders", {"headers": {
        "X-Forwarded-User": "ops", "X-Forwarded-Groups": "platform", "X-Preemptlens-Proxy-Secret": "guess"}})
    browser.navigate(f"{nginx.upstream}/sql")
    state, _ = browser.wait_rendered(timeout_s=120)
    assert state.errors == ["This connection does not come through the configured auth proxy "
                            "(access.proxy_secret)."], state.text
    assert "SQL" not in nav(browser)


class OnAddress(Dashboard):
    """`preemptlens dashboard` listening on `address` (dashboard.address in the configuration), reached
    through 127.0.0.1."""

    def __init__(self, address: str, program: tuple[str, ...], warehouse: Path, log: Path) -> None:
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREEMPTLENS_")}
        self.serve([*program, "--warehouse", str(warehouse), "dashboard", "--address", address,
                    "--port", str(self.port)], log, env)


def test_beyond_loopback_only_a_configured_proxy_vouches_for_a_reader(
    cluster_warehouse: Path, tmp_path: Path
) -> None:
    """The dashboard listening beyond loopback (every interface): a client that is not in access.proxy_addresses
    sending the identity headers (and a forged X-Forwarded-For naming the proxy) is refused; once its address is
    listed, it is believed. Only loopback traffic: the client is 127.0.0.1, the other "proxy" 127.0.0.2."""
    address = "0.0.0.0"
    config = tmp_path / "preemptlens.toml"
    settings = (f'[dashboard]\naddress = "{address}"\npublic_host = "127.0.0.1"\n'
                '[access]\nproxy_headers = true\ngroups = { platform = "admin" }\nproxy_addresses = ["{proxy}"]\n')
    config.write_text(settings.replace("{proxy}", "127.0.0.2"))
    program = (sys.executable, "-m", "preemptlens.cli", "--config", str(config))
    headers = {"X-Forwarded-User": "ops", "X-Forwarded-Groups": "platform", "X-Forwarded-For": "127.0.0.2"}
    with OnAddress(address, program, cluster_warehouse, tmp_path / "streamlit.log") as dashboard, \
            Chromium() as browser:
        browser.call("Network.enable")
        browser.call("Network.setExtraHTTPHeaders", {"headers": headers})
        browser.navigate(dashboard.url)
        state, _ = browser.wait_rendered(timeout_s=120)
        assert state.errors == ["This connection does not come through the configured auth proxy "
                                "(access.proxy_addresses)."], state.text
        # The dashboard reads its configuration on every run: this host is the proxy now.
        config.write_text(settings.replace("{proxy}", "127.0.0.1"))
        browser.fresh_tab()
        browser.call("Network.enable")
        browser.call("Network.setExtraHTTPHeaders", {"headers": headers})
        browser.navigate(f"{dashboard.url}/operations")
        state, _ = browser.wait_rendered(timeout_s=120, title="Operations")
        assert state.title == "Operations" and not state.errors


def test_admins_and_viewers_land_on_the_overview(proxied: tuple[Nginx, Chromium]) -> None:
    for user in ("ops", "guest"):
        state = open_as(proxied, user)
        assert state.title == "Preemption overview", f"{user} landed on {state.title}"
        assert "My preemptions" in nav(proxied[1])


def test_a_victim_notice_links_to_its_job_on_my_preemptions(
    proxied: tuple[Nginx, Chromium], cluster_warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The link a victim notice carries opens My preemptions on that job, for its team; another team is told
    it may not see it."""
    nginx, _ = proxied
    monkeypatch.delenv("PREEMPTLENS_CONFIG", raising=False)
    monkeypatch.setenv("PREEMPTLENS_ALERTS__DASHBOARD_URL", nginx.url)
    with Warehouse(cluster_warehouse, read_only=True) as wh:
        at = wh.query("SELECT time FROM preemption_ledger WHERE victim_job_id = 'train-48b'")["time"][0]
        notices = VictimNotice().evaluate(wh, load_config(None), at + timedelta(minutes=5))
    (text,) = [n.text for n in notices if "train-48b" in n.title]
    link = re.search(r"Details: (\S+)$", text)
    assert link is not None and link.group(1).startswith(f"{nginx.url}/mine?"), text
    path = link.group(1).removeprefix(f"{nginx.url}/")
    state = open_as(proxied, "vision-user", path, title="My preemptions")
    assert "job train-48b in c1, at any time" in state.text and state.text.count("What would have protected it") == 1
    assert "Run 1 preempted at 2026-11-25 11:00 UTC" in state.text
    state = open_as(proxied, "nlp-user", path, title="My preemptions")
    assert "No preemptions of job train-48b that you may see." in state.text and "Run 1 preempted" not in state.text


# What a reader should never meet: a raw column name or config key (snake_case), a number in e-notation.
RAW_NAME = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
E_NOTATION = re.compile(r"\b\d+(?:\.\d+)?e[+-]?\d+\b", re.IGNORECASE)
# The page's words as a reader meets them: its text outside code (a command or a setting to type is code), its
# charts' text and its tables' column labels and text cells; and every metric label or value cut off.
READING_JS = """
(() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const skip = 'code, pre, [data-testid="stCode"], .js-plotly-plot, [data-testid="stDataFrame"], svg, ' +
      '[data-testid="stIconMaterial"]';
  const words = [];
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.parentElement.closest(skip)) words.push(node.data);
  }
  const charts = Array.from(main.querySelectorAll('.js-plotly-plot svg text')).map(t => t.textContent);
  const headers = Array.from(main.querySelectorAll('[data-testid="stDataFrame"] th')).map(t => t.innerText);
  const clipped = Array.from(main.querySelectorAll(
      '[data-testid="stMetricValue"], [data-testid="stMetricLabel"]'))
    .filter(m => [m, ...m.querySelectorAll('*')].some(e => e.scrollWidth > e.clientWidth + 1))
    .map(m => m.innerText);
  // A table whose columns run past the page's edge: the columns the grid lists (those in view) and by how much.
  // (a grid in a closed expander has no scroller: it is not drawn until opened)
  const grids = Array.from(main.querySelectorAll('[data-testid="stDataFrame"]'))
    .filter(g => g.querySelector('.dvn-scroller')).map(g => {
      const s = g.querySelector('.dvn-scroller');
      return {columns: Array.from(g.querySelectorAll('th')).map(t => t.innerText), over: s.scrollWidth - s.clientWidth};
    });
  const metrics = Array.from(main.querySelectorAll('[data-testid="stMetricValue"]')).map(m => m.innerText.trim());
  return JSON.stringify({text: words.join('\\n'), charts: charts, headers: headers, clipped: clipped,
                         grids: grids, metrics: metrics});
})()
"""


# A table's cells are drawn on a canvas (Streamlit's grid): every text drawn into a 2D canvas is kept, so that the
# walk reads the cells as the reader sees them (a missing value is drawn as the table's placeholder, "None" by
# default). Only the rows in view are drawn: the walk reads them after the screenshot has grown the viewport.
CANVAS_TEXT_JS = """
(() => {
  const drawn = [];
  window.__drawnText = drawn;
  for (const kind of [window.CanvasRenderingContext2D, window.OffscreenCanvasRenderingContext2D]) {
    if (!kind) continue;
    const fill = kind.prototype.fillText;
    kind.prototype.fillText = function (text, ...rest) {
      if (drawn.length < 100000) drawn.push(String(text));
      return fill.call(this, text, ...rest);
    };
  }
})();
"""
DRAWN_JS = "JSON.stringify(window.__drawnText || [])"
FORGET_DRAWN_JS = "window.__drawnText && (window.__drawnText.length = 0)"

# What each chart's hover labels write, point by point, from the figure the page handed plotly: its hovertemplate
# with every field filled in, and its text, hovertext and customdata strings. A negative number a format of the
# template writes (d3-format) gets "-"; x or y without a format, or a trace without a template, is written by its
# axis, which puts U+2212 before a negative number.
HOVER_JS = r"""
(() => {
  const out = [];
  let traces = 0;
  const list = v => Array.isArray(v) || ArrayBuffer.isView(v);
  for (const gd of document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')) {
    for (const t of gd._fullData || []) {
      if (t.visible !== true || t.hoverinfo === 'skip' || t.hoverinfo === 'none') continue;
      traces += 1;
      const n = Math.min(2000, Math.max(...['x', 'y', 'text', 'customdata'].map(k => list(t[k]) ? t[k].length : 0)));
      const field = (name, i) => {
        const [head, ...rest] = name.split(/[.\[\]]+/).filter(Boolean);
        let v = list(t[head]) ? t[head][i] : t[head];
        for (const k of rest) v = v == null ? v : v[k];
        return v;
      };
      const write = (v, own) => typeof v === 'number' && v < 0 ? (own ? '-' : '\u2212') + String(-v) : String(v ?? '');
      for (let i = 0; i < n; i++) {
        for (const k of ['text', 'hovertext']) if (typeof field(k, i) === 'string') out.push(field(k, i));
        const template = list(t.hovertemplate) ? t.hovertemplate[i] : t.hovertemplate;
        if (!template) {
          out.push(['x', 'y'].map(k => write(field(k, i), false)).join(' '));
          continue;
        }
        out.push(template.replace(/%\{([^}:|]+)([:|][^}]*)?\}/g, (_, name, format) => {
          const v = field(name.trim(), i);
          return write(v, Boolean(format) || !['x', 'y'].includes(name.trim()));
        }));
      }
    }
  }
  return JSON.stringify({hover: out, traces: traces});
})()
"""

NONE = re.compile(r"\b(?:None|null|NaN|nan)\b")
ONE_GPUS = re.compile(r"(?<![\d,.])1 GPUs\b")
# A figure shown changing when it is the same on both sides ("0 -> 0"): no effect of the change.
SAME_BOTH_SIDES = re.compile(r"(?<![\w.,])(-?\d[\d,.]*(?: [a-zA-Z-]+)?) -> \1(?![\w.,])")
LAST_WEEKS = re.compile(r"\b(?:over the )?last (\d+) weeks\b")
TOP_TEAMS = re.compile(r"\b[Tt]op (\d+) teams\b")
# A measure's own name with spaces for underscores ("queued gpu wait") where its label belongs.
RAW_MEASURES = [name.replace("_", " ") for name, spec in MEASURES.items()
                if name.replace("_", " ") != spec[0].lower()]


def reading_problems(words: str, weeks: int, teams: int) -> list[str]:
    """What a reader should not meet in `words` (a page's or a report's): None or null, "1 GPUs", a minus written
    two ways, a measure's raw name, a span the data does not have, a figure shown changing that does not."""
    problems = [f"{found!r}" for found in NONE.findall(words) + ONE_GPUS.findall(words)]
    if "\u2212" in words and re.search(r"(?<![\w-])-\d", words):
        problems.append("two minus signs: U+2212 and -")
    lowered = words.lower()
    problems += [f"raw measure name {m!r}" for m in RAW_MEASURES if re.search(rf"\b{re.escape(m)}\b", lowered)]
    problems += [f"last {n} weeks over {weeks}" for n in LAST_WEEKS.findall(words) if int(n) > weeks]
    problems += [f"top {n} teams of {teams}" for n in TOP_TEAMS.findall(words) if int(n) > teams]
    problems += [f"{m} -> {m}" for m in SAME_BOTH_SIDES.findall(words)]
    return problems


def data_extent(warehouse: Path) -> tuple[int, int]:
    """The ISO weeks the fixture's runs span, and its teams."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        row = con.execute(
            "SELECT count(DISTINCT date_trunc('week', start_time)), (SELECT count(DISTINCT team) FROM jobs) "
            "FROM job_runs WHERE start_time IS NOT NULL").fetchone()
    finally:
        con.close()
    assert row is not None
    return int(row[0]), int(row[1])


TITLES = {"Overview": "Preemption overview", "My preemptions": "My preemptions", "Preemptions": "Preemptions",
          "Idle hoarding": "Idle hoarding", "Priority scope creep": "Priority scope creep",
          "Tuning": "Tuning suggestions", "Pilot": "Pilot evaluation", "Operations": "Operations", "SQL": "SQL"}


@pytest.mark.parametrize("user", ["ops", "guest", "vision-user"])
def test_every_page_reads_right(
    proxied: tuple[Nginx, Chromium], screenshots: Path, cluster_warehouse: Path, user: str
) -> None:
    """Each page the reader's role opens, at 1400x900: no raw column name, config key or e-notation in its words,
    charts or table labels, no None, "1 GPUs", minus written two ways, span the data lacks or figure shown changing
    that does not (reading_problems), no metric label or value cut off, no table of up to WIDE_TABLE columns
    running past the page's edge, and no large figure that says nothing changed."""
    weeks, teams = data_extent(cluster_warehouse)
    browser = proxied[1]
    open_as(proxied, user, script=CANVAS_TEXT_JS)
    pages = nav(browser)
    assert len(pages) >= 7
    for label in pages:
        browser.call("Runtime.evaluate", {"expression": FORGET_DRAWN_JS})
        browser.click_nav(label)
        state, _ = browser.wait_rendered(timeout_s=120, settle_s=0.5, title=TITLES[label])
        assert state.rendered and not state.exceptions and not state.errors, f"{user} {label}: {state.text[:300]}"
        # A table's grid draws its cells a moment after the page has run.
        deadline = time.monotonic() + 60
        while True:
            shown = json.loads(browser.call("Runtime.evaluate", {"expression": READING_JS, "returnByValue": True})
                               ["result"]["value"])
            # the ledger's grid, not the first grid to paint (the page has several); every grid with its columns
            painted = all(g["columns"] for g in shown["grids"])
            if ((painted and ("Preempted at (UTC)" in shown["headers"] or label != "Preemptions"))
                    or time.monotonic() > deadline):
                break
            time.sleep(0.2)
        browser.screenshot(screenshots / f"page-{user}-{label.lower().replace(' ', '-')}.png")
        cells = json.loads(browser.call("Runtime.evaluate", {"expression": DRAWN_JS, "returnByValue": True})
                           ["result"]["value"])
        charted = json.loads(browser.call("Runtime.evaluate", {"expression": HOVER_JS, "returnByValue": True})
                             ["result"]["value"])
        hover = charted["hover"]
        words = "\n".join([shown["text"], *shown["charts"], *shown["headers"]])
        # The SQL page names the tables and example queries one types (its raw names are what it is about).
        raw = [] if label == "SQL" else RAW_NAME.findall(words)
        assert raw == [], f"{user} {label}: raw names {raw}"
        assert E_NOTATION.findall(words) == [], f"{user} {label}"
        assert shown["clipped"] == [], f"{user} {label}: cut off {shown['clipped']}"
        # The SQL page shows the views' own definitions, which say where a figure is null.
        problems = reading_problems(words, weeks, teams) if label != "SQL" else []
        assert problems == [], f"{user} {label}: {problems}"
        # The tables' cells and the charts' hover labels: no None or null for a missing figure, and one minus sign
        # with the page's words (their names and ids are data, not words: the raw-name checks leave them be).
        assert hover or not charted["traces"], f"{user} {label}: charts drawn but no hover text read"
        if label != "SQL":
            missing = sorted({c for c in cells if NONE.search(c)})
            assert missing == [], f"{user} {label}: table cells {missing}"
            said = "\n".join([words, *cells, *hover])
            assert not ("\u2212" in said and re.search(r"(?<![\w-])-\d", said)), \
                f"{user} {label}: two minus signs in {[h for h in hover if chr(0x2212) in h][:5]}"
        assert all(g["columns"] for g in shown["grids"]), f"{user} {label}: a table not drawn in 60 s"
        cut = [g["columns"] for g in shown["grids"] if g["over"] > 1 and len(g["columns"]) <= WIDE_TABLE]
        assert cut == [], f"{user} {label}: columns past the page's edge in {cut}"
        unmoved = [m for m in shown["metrics"] if m in ("no change", "none", "not measured")]
        assert unmoved == [], f"{user} {label}: large figures that say nothing moved: {unmoved}"
        if label == "Preemptions":  # the tables' labels are read too (the grid lists the columns in view)
            assert {"Preempted at (UTC)", "Victim job", "Victim team"} <= set(shown["headers"]), shown["headers"]


REPORT_JS = """
(() => JSON.stringify({
  text: document.body.innerText,
  wide: Array.from(document.querySelectorAll('table')).filter(t => t.scrollWidth > t.parentElement.clientWidth + 1)
    .map(t => t.id),
  page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
}))()
"""


def test_both_reports_read_right(cluster_warehouse: Path, tmp_path: Path, screenshots: Path) -> None:
    """The weekly report as a reader opens it: the HTML in a browser at 1400x900 and the Markdown as text, held to
    the pages' rules (reading_problems, no raw names), with no table wider than the page."""
    from preemptlens.cli import main

    weeks, teams = data_extent(cluster_warehouse)
    assert main(["--warehouse", str(cluster_warehouse), "report", "--week", "2026-W48", "--out", str(tmp_path)]) == 0
    with Chromium(width=1400, height=900) as browser:
        browser.navigate((tmp_path / "preemptlens-2026-W48.html").as_uri())
        deadline = time.monotonic() + 30
        shown: dict = {}
        while time.monotonic() < deadline and not shown.get("text"):
            # before the document has a body the script throws and returns no value
            value = browser.call("Runtime.evaluate", {"expression": REPORT_JS, "returnByValue": True})["result"]
            shown = json.loads(value.get("value") or "{}")
            time.sleep(0.1)
        browser.screenshot_document(screenshots / "report-1400.png")
    markdown = (tmp_path / "preemptlens-2026-W48.md").read_text()
    for name, words in (("HTML", shown["text"]), ("Markdown", markdown)):
        # the suggestions' scheduler snippets are settings to copy, not words to read
        problems = reading_problems(words, weeks, teams)
        assert problems == [], f"{name}: {problems}"
        assert E_NOTATION.findall(words) == [], name
    assert shown["wide"] == [] and shown["page"] <= 0, shown

