"""HTML fragments for job data. Everything that comes from a row is escaped here.

Arguments, results, error messages and tracebacks are user data (or worse, an attacker's): each
helper builds its markup with ``format_html``/``format_html_join``, which escape every value, and
never calls ``mark_safe`` on row data.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from ..core import registry
from ..core.error_history import DROPPED, FIRST, LAST, is_dropped
from .databases import with_database

LIST_PREVIEW_CHARS = 80
"""Arguments longer than this are cut in change lists (the detail page shows them in full)."""


def compact_json(value: Any) -> str:
    """One-line JSON, as the arguments were given."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def truncated(text: str, limit: int = LIST_PREVIEW_CHARS) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis: a huge payload keeps lists small."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def version_text(name: str, version: int, task_backend: str = "") -> str:
    """A row's argument version beside what this process's handler runs (``@job(version=)``),
    and the job it runs on when ``name`` is a former name (``@job(aliases=)``)."""
    if task_backend:
        return "\u2014 (a django.tasks task: versions are for @job)"
    spec = registry.lookup(name)
    if spec is None:
        return f"{version} (no job is registered as {name!r} in this process)"
    renamed = (
        f"; runs on {spec.name!r}, which lists this name in its aliases"
        if (spec.name != name)
        else ""
    )
    if version == spec.version:
        return f"{version} (the handler's version){renamed}"
    if version < spec.version:
        return (
            f"{version} (the handler runs version {spec.version}: a worker upgrades the "
            f"arguments before the call and stores them when the job succeeds){renamed}"
        )
    return (
        f"{version} (newer than version {spec.version} that this process's handler runs: it "
        f"waits for a worker that runs it){renamed}"
    )


def call_preview(args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """``(1, 2, key="x")``-like preview of a job's arguments, truncated for lists."""
    parts = [compact_json(a) for a in args]
    parts += [f"{k}={compact_json(v)}" for k, v in kwargs.items()]
    return truncated("(" + ", ".join(parts) + ")")


def pretty_json(value: Any) -> SafeString:
    """Indented JSON in a ``<pre>``, escaped."""
    text = json.dumps(value, ensure_ascii=False, indent=2, default=str)
    return format_html('<pre class="leasejobs-json">{}</pre>', text)


def progress_percent(progress: Any) -> str:
    """The list's column: ``37%`` of the total, ``12 done`` when the total is unknown."""
    if not isinstance(progress, dict):
        return "\u2014"
    done, total = progress.get("done") or 0, progress.get("total")
    if total is None:
        return f"{done:g} done"
    return f"{int(100 * done / total) if total else 100}%"


def progress_bar(progress: Any) -> SafeString | str:
    """The job page's bar: ``<progress>`` (without a value when the total is unknown) and
    the same figures, message and time as text; the message is escaped."""
    if not isinstance(progress, dict):
        return "\u2014"
    done, total = progress.get("done") or 0, progress.get("total")
    figures = progress_percent(progress)
    if total is None:
        bar = format_html('<progress class="leasejobs-progress">{}</progress>', figures)
    else:
        figures = f"{done:g} / {total:g} ({figures})"
        bar = format_html(
            '<progress class="leasejobs-progress" value="{}" max="{}">{}</progress>',
            f"{done:g}",
            f"{total or 1:g}",
            figures,
        )
    return format_html(
        '{} <span class="leasejobs-progress-text">{}</span>{}{}',
        bar,
        figures,
        format_html(" \u2014 {}", progress["message"]) if progress.get("message") else "",
        format_html(' <span class="quiet">at {}</span>', progress.get("at") or ""),
    )


def preformatted(text: str) -> SafeString:
    return format_html('<pre class="leasejobs-text">{}</pre>', text or "\u2014")


def human_duration(seconds: float | None) -> str:
    """``1.25 s``, ``3 min 4 s``, ``2 h 5 min``: compact, for tables."""
    if seconds is None:
        return "\u2014"
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min"
    return f"{hours // 24} d {hours % 24} h"


def duration(start: dt.datetime | None, end: dt.datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return (end - start).total_seconds()


def admin_link(obj: Any, text: str | None = None) -> SafeString | str:
    """A link to ``obj``'s admin page (escaped text), or an em dash for ``None``."""
    if obj is None:
        return "\u2014"
    opts = obj._meta
    url = with_database(reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk]))
    return format_html('<a href="{}">{}</a>', url, text if text is not None else str(obj))


def error_history(errors: Any) -> SafeString:
    """The attempt history (``Job.errors``/``DeadLetter.errors``) as a table, tracebacks folded;
    the attempts a long history dropped (``django_leasejobs.core.error_history``) are one row that
    counts them."""
    if not isinstance(errors, list) or not errors:
        return format_html("<p>{}</p>", "No failed attempt recorded.")
    body = format_html_join("", "{}", ((_history_row(entry),) for entry in errors))
    return format_html(
        '<table class="leasejobs-history"><thead><tr><th>attempt</th><th>worker</th>'
        "<th>at</th><th>kind</th><th>error</th><th>traceback</th></tr></thead>"
        "<tbody>{}</tbody></table>",
        body,
    )


def _history_row(entry: Any) -> SafeString:
    if is_dropped(entry):
        count = entry[DROPPED]
        return format_html(
            '<tr class="leasejobs-dropped"><td colspan="6"><em>{}</em></td></tr>',
            f"\u2026 {count} attempt{'' if count == 1 else 's'} between these not kept: the "
            f"history keeps the first {FIRST} and the last {LAST}.",
        )
    item = entry if isinstance(entry, dict) else {"error": entry}
    return format_html(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        '<td><pre class="leasejobs-text">{}</pre></td>'
        '<td><details><summary>traceback</summary><pre class="leasejobs-text">{}</pre>'
        "</details></td></tr>",
        str(item.get("attempt", "")),
        str(item.get("worker", "")),
        str(item.get("at", "")),
        str(item.get("kind", "")),
        str(item.get("error", "")),
        str(item.get("traceback", "")) or "\u2014",
    )


def job_logs(logs: list[dict[str, Any]], errors: Any) -> SafeString:
    """A job's logs (``Job.logs()``) by attempt, each failed attempt's error beside its own."""
    if not logs:
        return format_html("<p>{}</p>", "No logs kept (docs/observability.md).")
    failures = {
        entry.get("attempt"): entry
        for entry in (errors if isinstance(errors, list) else [])
        if isinstance(entry, dict) and not is_dropped(entry)
    }
    by_attempt: dict[int, list[dict[str, Any]]] = {}
    for entry in logs:
        by_attempt.setdefault(entry["attempt"], []).append(entry)
    return format_html_join(
        "",
        "{}",
        ((_attempt_logs(n, entries, failures.get(n)),) for n, entries in by_attempt.items()),
    )


def _attempt_logs(attempt: int, entries: list[dict[str, Any]], failure: Any) -> SafeString:
    error = (
        format_html(
            '<p class="leasejobs-attempt-error">{} <pre class="leasejobs-text">{}</pre></p>',
            f"Failed ({failure.get('kind', 'error')}):",
            str(failure.get("error", "")),
        )
        if failure
        else ""
    )
    rows = format_html_join("", "{}", ((_log_row(entry),) for entry in entries))
    return format_html(
        '<h3>Attempt {}</h3>{}<table class="leasejobs-logs"><thead><tr><th>at</th>'
        "<th>level</th><th>logger</th><th>message</th></tr></thead><tbody>{}</tbody></table>",
        attempt,
        error,
        rows,
    )


def _log_row(entry: dict[str, Any]) -> SafeString:
    if "dropped" in entry:
        count = entry["dropped"]
        return format_html(
            '<tr class="leasejobs-dropped"><td colspan="4"><em>{}</em></td></tr>',
            f"\u2026 {count} record{'' if count == 1 else 's'} dropped here by the caps.",
        )
    return format_html(
        '<tr><td>{}</td><td>{}</td><td>{}</td><td><pre class="leasejobs-text">{}</pre></td></tr>',
        entry.get("at", ""),
        entry.get("level", ""),
        entry.get("logger", ""),
        entry.get("message", ""),
    )
