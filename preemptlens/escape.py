"""Text from the data, made inert for each output format it is written into.

Job names, team names, users and the scheduler's reasons come from whoever
submitted a job. Written into a format as they are, they become markup: raw
HTML, links (`javascript:` ones too) and remote images in Markdown; mentions
and links in Slack; formulas in a spreadsheet opening a CSV; tags in a plotly
label. Each function here escapes for one format, so that such text always
reads as itself. The templates and writers call them on every value that comes
from the data: the weekly report's Markdown (its Jinja environment escapes every
value it prints), the dashboard's Markdown, Slack payloads, CSV cells, chart labels.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
from datetime import date, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

# CommonMark lets a backslash escape any ASCII punctuation; these start markup in the middle of a line
# (emphasis, code, links and images, HTML and autolinks, tables, strikethrough, entities, Streamlit's
# :color[] and $math$). A value never starts a line of the templates, so heading and list marks are safe.
_MARKDOWN = re.compile(r"([\\`*_\[\]<>!|~&$])")
# Links a renderer makes from plain text, escapes or not (GitHub's autolinks, linkify-it): a scheme's
# "://", "www." and an e-mail's "@" are broken apart by an invisible joiner.
_AUTOLINK = re.compile(r"(:)(//)|\b(www)(\.)|(@)()", re.IGNORECASE)
_WORD_JOINER = "\u2060"
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029]+")


def markdown(value: object) -> str:
    """`value` as Markdown text that renders as itself: no markup, link, image, HTML or line break."""
    text = _LINE_BREAKS.sub(" ", str(value))
    # Invisible, and breaks an address apart for renderers that link bare URLs after escapes are undone.
    return _MARKDOWN.sub(r"\\\1", _unlink(text))


def markdown_code(value: object) -> str:
    """`value` as a Markdown code span: backticks inside are outnumbered by the fence around it."""
    text = _LINE_BREAKS.sub(" ", str(value))
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def slack(value: object) -> str:
    """`value` for a Slack mrkdwn field: &, < and > are the characters Slack reads as markup (<!channel>,
    <url|label>); the formatting marks are broken apart with an invisible joiner, and so are URLs."""
    text = _unlink(str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))
    return re.sub(r"([*_~`])", "\\1" + _WORD_JOINER, text)


def _unlink(text: str) -> str:
    return _AUTOLINK.sub(lambda m: "".join(g or "" for g in m.groups()[0::2]) + _WORD_JOINER
                         + "".join(g or "" for g in m.groups()[1::2]), text)


def html_text(value: object) -> str:
    """`value` as HTML text (also what plotly's labels, which read a few tags, need)."""
    return html.escape(str(value), quote=True)


def html_prose(value: object) -> str:
    """A sentence of ours for HTML: escaped as `html_text`, its code spans (`preemptlens suggest`, a setting)
    written as <code> elements rather than as backticks a reader of the page would see."""
    return re.sub(r"`([^`\n]+)`", r"<code>\1</code>", html_text(value))


# A spreadsheet reads a cell starting with one of these as a formula (OWASP, CSV injection).
_FORMULA = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def csv_cell(value: object) -> object:
    """A CSV cell: text that a spreadsheet would run as a formula gets a leading apostrophe; numbers (a
    negative one too) and everything else are left as they are."""
    if isinstance(value, str) and value.startswith(_FORMULA):
        return "'" + value
    return value


def text_value(value: object) -> str:
    """A value as text for a cell: times in ISO 8601, lists and tables as JSON, a float in full."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, list | dict):
        return json.dumps(value, default=str)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def csv_text(frame: pl.DataFrame) -> str:
    """`frame` as CSV a spreadsheet opens as data (`preemptlens sql --format csv`, the SQL page's download): text
    it would run as a formula gets a leading apostrophe (`csv_cell`); numbers are written as they are."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([csv_cell(c) for c in frame.columns])
    writer.writerows([csv_cell(v) if isinstance(v, str) else text_value(v) for v in row] for row in frame.iter_rows())
    return buffer.getvalue().rstrip("\n")
