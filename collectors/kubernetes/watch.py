"""List-then-watch over the official client, with resourceVersion resumption.

`ListWatch.run(since)` yields what one resource stream says, in order:
`Change`s (listed objects, then watch events), `Mark`s (a resourceVersion up
to which everything has been delivered: the end of a list, a watch event, a
BOOKMARK), `BadLine`s (a watch line that is not a watch event) and a
`Listing` where a list begins (the objects it shows up to its Mark are all
the stream holds then: one missing was deleted).

- No `since`: list (paged with `limit` / `continue`), then watch from the
  list's resourceVersion.
- `since`: watch from it directly, so that nothing between two collections
  is missed; if the server has compacted past it (410 Gone, as an ERROR event
  or an HTTP status), list again and watch from the new list. Listing again
  re-delivers objects already loaded, which the load API's upserts absorb.
- A watch that drops mid-stream is resumed from the last resourceVersion
  delivered; an expired `continue` token restarts the list.
- It stops when `watch_seconds` have passed (sent as the watch's
  `timeoutSeconds`, so the server ends the stream cleanly) or when the stream
  has been quiet for `idle_seconds` (the read timeout): a one-shot collection
  ends once the server has nothing more to say.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, replace
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from preemptlens import outbound
from preemptlens.errors import SourceError, TransientSourceError

log = logging.getLogger(__name__)

WATCH_TYPES = ("ADDED", "MODIFIED", "DELETED")


@dataclass(frozen=True)
class WatchBounds:
    """How far one stream's list-then-watch goes (the kubernetes.page_size, watch_seconds, idle_seconds and
    max_retries settings): objects per list page, how long it watches in all, how long a quiet stream is waited
    on, and how many failures in a row it retries."""

    page_size: int
    watch_seconds: float
    idle_seconds: float
    max_retries: int

    def list_only(self) -> WatchBounds:
        """The same bounds for a list that is not watched afterwards."""
        return replace(self, watch_seconds=0.0)


@dataclass(frozen=True)
class Change:
    type: str  # LISTED for an object from a list, else the watch event type
    object: Any
    resource_version: str | None  # None for listed objects: only the list's end is a safe cursor


@dataclass(frozen=True)
class Listing:
    pass


@dataclass(frozen=True)
class Mark:
    resource_version: str


@dataclass(frozen=True)
class BadLine:
    line: str
    reason: str


class _Gone(Exception):
    pass


class _Dropped(Exception):
    pass


class _Idle(Exception):
    pass


# Bounds on what the API server sends (preemptlens.outbound): a list page (its size and its whole time), and
# one watch event's line.
MAX_LIST_BYTES = 512 * 2**20
LIST_DEADLINE_S = 70.0
MAX_LINE_BYTES = 64 * 2**20


def _lines(resp: Any) -> Iterator[str]:
    """Complete lines of a chunked watch body; a partial last line (a cut connection) is never yielded."""
    buffer = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        buffer += chunk if isinstance(chunk, bytes) else str(chunk).encode()
        if len(buffer) > MAX_LINE_BYTES and b"\n" not in buffer[-len(chunk) - 1:]:
            raise _Dropped(f"a watch line longer than {MAX_LINE_BYTES:,} bytes")
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.strip():
                yield line.decode("utf-8", errors="replace")
    if buffer.strip():
        yield buffer.decode("utf-8", errors="replace")


def status_text(exc: ApiException) -> str:
    """The Status message of an API error, without headers (they may echo credentials)."""
    try:
        body = json.loads(exc.body) if exc.body else {}
        message = body.get("message") if isinstance(body, dict) else None
    except (ValueError, TypeError):
        message = None
    return f"HTTP {exc.status} {exc.reason or ''}".strip() + (f": {message}" if message else "")


class ListWatch:
    def __init__(
        self,
        what: str,
        call: Callable[..., Any],
        bounds: WatchBounds,
        *,
        connect_seconds: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.what = what
        self.call = call
        self.bounds = bounds
        self.connect_seconds = connect_seconds
        self.sleep = sleep
        self.answered = False  # whether the server ever answered this stream

    def run(self, since: str | None) -> Iterator[Change | Mark | BadLine | Listing]:
        deadline = time.monotonic() + self.bounds.watch_seconds
        rv = since
        failures = 0
        while True:
            try:
                if rv is None:
                    rv = yield from self._list()
                    failures = 0
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                watched: str = rv
                for item in self._watch(watched, remaining):
                    if isinstance(item, Mark):
                        rv = item.resource_version
                        failures = 0
                    elif isinstance(item, Change) and item.resource_version is not None:
                        rv = item.resource_version
                        failures = 0
                    yield item
                if deadline - time.monotonic() <= 0:
                    return
            except _Gone:
                log.info("%s: resourceVersion %s is too old (410 Gone); listing again", self.what, rv)
                rv = None
            except _Idle:
                return
            except _Dropped as exc:
                failures += 1
                if failures > self.bounds.max_retries:
                    raise TransientSourceError(
                        f"{self.what}: gave up after {self.bounds.max_retries} retries: {exc}",
                        "check the API server's health; a re-run resumes from the last committed cursor",
                    ) from None
                log.warning("%s: %s; retrying from resourceVersion %s", self.what, exc, rv)
                self.sleep(min(0.2 * 2 ** (failures - 1), 5.0))

    def _request(self, **kwargs: Any) -> Any:
        try:
            resp = self.call(_preload_content=False, **kwargs)
        except ApiException as exc:
            if exc.status == 410:
                raise _Gone() from None
            if exc.status in (429, 500, 502, 503, 504):
                raise _Dropped(status_text(exc)) from None
            hints = {
                401: "the token was rejected: check kubernetes.token or the kubeconfig's credentials",
                403: "the credentials may not list/watch this resource: grant it in RBAC or drop the stream",
                404: "the API server does not serve this resource (is its CRD installed, is the version right?)",
            }
            raise SourceError(f"{self.what}: {status_text(exc)}", hints.get(exc.status or 0, "")) from None
        except (urllib3.exceptions.MaxRetryError, urllib3.exceptions.NewConnectionError,
                urllib3.exceptions.ProtocolError, urllib3.exceptions.TimeoutError) as exc:
            deadline = outbound.current()
            if deadline is not None and deadline.expired:
                raise _Dropped(f"{deadline.what.removeprefix(self.what + ': ')} took longer than "
                               f"{deadline.seconds:g} s") from None
            if not self.answered:
                reason = getattr(exc, "reason", None) or exc
                raise SourceError(
                    f"{self.what}: API server unreachable ({type(reason).__name__})",
                    "check kubernetes.api_url / the kubeconfig and that the server is up",
                ) from None
            raise _Dropped(f"connection failed ({type(exc).__name__})") from None
        self.answered = True
        return resp

    def _list(self) -> Generator[Change | Mark | BadLine | Listing, None, str]:
        token: str | None = None
        yield Listing()
        while True:
            kwargs: dict[str, Any] = {"limit": self.bounds.page_size, "_request_timeout": (self.connect_seconds, 60.0)}
            if token:
                kwargs["_continue"] = token
            deadline = outbound.Deadline(LIST_DEADLINE_S, f"{self.what}: a list page")
            try:
                with deadline.current():
                    resp = self._request(**kwargs)
                body = json.loads(outbound.read_capped(resp.stream(1 << 20), MAX_LIST_BYTES, deadline))
            except outbound.CallTimedOut:
                raise _Dropped(f"a list page took longer than {deadline.seconds:g} s") from None
            except outbound.AnswerTooLarge:
                raise _Dropped(f"a list page larger than {MAX_LIST_BYTES:,} bytes") from None
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise _Dropped(f"list response broke off ({type(exc).__name__})") from None
            except ValueError:
                raise _Dropped("list response is not JSON") from None
            finally:
                deadline.close()
                if "resp" in locals():
                    resp.release_conn()
            meta = body.get("metadata") if isinstance(body, dict) else None
            items = body.get("items") if isinstance(body, dict) else None
            if not isinstance(meta, dict) or not isinstance(items, list) or not meta.get("resourceVersion"):
                raise _Dropped("list response lacks items or metadata.resourceVersion")
            for obj in items:
                yield Change("LISTED", obj, None)
            token = meta.get("continue") or None
            if not token:
                rv = str(meta["resourceVersion"])
                yield Mark(rv)
                return rv

    def _watch(self, rv: str, remaining: float) -> Iterator[Change | Mark | BadLine]:
        # The server ends the watch at timeoutSeconds; one that keeps it open by trickling bytes is cut off.
        deadline = outbound.Deadline(remaining + self.bounds.idle_seconds + self.connect_seconds + 5.0, self.what)
        try:
            with deadline.current():
                resp = self._request(
                    watch=True,
                    resource_version=rv,
                    allow_watch_bookmarks=True,
                    timeout_seconds=max(1, math.ceil(remaining)),
                    _request_timeout=(self.connect_seconds, self.bounds.idle_seconds),
                )
        except BaseException:
            deadline.close()
            raise
        try:
            for line in _lines(resp):
                try:
                    event = json.loads(line)
                except ValueError:
                    yield BadLine(line, "is not JSON")
                    continue
                if not isinstance(event, dict) or not isinstance(event.get("type"), str):
                    yield BadLine(line, "is not a watch event (no type)")
                    continue
                obj = event.get("object")
                if event["type"] == "ERROR":
                    code = obj.get("code") if isinstance(obj, dict) else None
                    if code == 410:
                        raise _Gone()
                    message = obj.get("message") if isinstance(obj, dict) else None
                    raise _Dropped(f"watch ERROR {code}: {message}")
                meta = obj.get("metadata") if isinstance(obj, dict) else None
                new_rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
                new_rv = str(new_rv) if new_rv not in (None, "") else None
                if event["type"] == "BOOKMARK":
                    if new_rv is None:
                        yield BadLine(line, "BOOKMARK without metadata.resourceVersion")
                    else:
                        yield Mark(new_rv)
                elif event["type"] in WATCH_TYPES:
                    yield Change(event["type"], obj, new_rv)
                else:
                    yield BadLine(line, f"unknown watch event type {event['type']!r}")
        except urllib3.exceptions.ReadTimeoutError:
            raise _Idle() from None
        except (urllib3.exceptions.ProtocolError, urllib3.exceptions.HTTPError) as exc:
            if deadline.expired:
                # Past timeoutSeconds and the idle time: what the server still trickles is not waited for.
                raise _Idle() from None
            raise _Dropped(f"watch stream broke ({type(exc).__name__})") from None
        finally:
            deadline.close()
            resp.close()
            resp.release_conn()
