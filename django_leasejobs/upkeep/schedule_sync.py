"""``LEASEJOBS_SCHEDULES`` and ``@job(cron=...)``: each declaration validated, and synced to
``Schedule`` rows.

Every worker syncs at start (and ``manage.py syncschedules`` does on demand); several may at
once: rows are created insert-or-ignore on the unique name, and an operator's edit in the admin
stays until the declaration changes. A settings entry and a job's ``cron`` of the same name:
the settings entry wins (a system check warns). A row declared in code whose job this process
does not register is left alone: it may belong to a newer release than this process.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from django.db import IntegrityError, models, transaction
from django.db.models import Q

from ..core import registry
from ..core.conf import settings
from ..errors import ScheduleError
from ..models import Misfire, Schedule
from ..models.databases import job_database, queue_database

logger = logging.getLogger("django_leasejobs")

SPEC_KEYS = (
    "job",
    "cron",
    "timezone",
    "args",
    "kwargs",
    "queue",
    "priority",
    "max_attempts",
    "jitter",
    "misfire",
    "enabled",
    "catchup_window",
)
"""The keys of a ``LEASEJOBS_SCHEDULES`` entry; only ``job`` and ``cron`` are required."""


def _type_problems(spec: dict[str, Any]) -> list[str]:
    """Settings are code: refuse wrong types instead of coercing "5" to 5 like a form would."""
    found = []

    def kind(key: str, types: tuple[type, ...], label: str, nullable: bool = False) -> None:
        if key not in spec or (nullable and spec[key] is None):
            return
        value = spec[key]
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            found.append(f"{key} must be {label}, not {value!r}")

    kind("job", (str,), "a registered job name (a string)")
    kind("cron", (str,), "a cron expression (a string)")
    kind("timezone", (str,), "an IANA timezone name")
    kind("args", (list, tuple), "a list")
    kind("kwargs", (dict,), "a dict")
    kind("queue", (str,), "a queue name", nullable=True)
    kind("priority", (int,), "an integer", nullable=True)
    kind("max_attempts", (int,), "an integer", nullable=True)
    kind("jitter", (int,), "a whole number of seconds")
    kind("catchup_window", (int,), "a whole number of seconds")
    kind("enabled", (bool,), "True or False")
    jitter = spec.get("jitter", 0)
    if isinstance(jitter, int) and not isinstance(jitter, bool) and jitter < 0:
        found.append(f"jitter must be 0 or more seconds, not {jitter!r}")
    misfire = spec.get("misfire", Misfire.LATEST)
    if misfire not in Misfire.values:
        found.append(f"misfire must be one of {', '.join(Misfire.values)}, not {misfire!r}")
    return found


def _default(key: str) -> Any:
    model_field = Schedule._meta.get_field(key)
    assert isinstance(model_field, models.Field)
    return model_field.get_default()


def validate_schedule_spec(name: Any, spec: Any) -> dict[str, Any]:
    """Check one ``LEASEJOBS_SCHEDULES`` entry; return the ``Schedule`` field values it sets.

    Raises ``ScheduleError`` naming the schedule and every problem found (unknown keys, missing
    ``job``/``cron``, wrong types, invalid cron expression, unknown timezone or job, bad
    misfire, negative jitter, arguments that are not JSON).
    """
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise ScheduleError(
            f"Schedule name {name!r} is not valid: use a non-empty string of at most 200 "
            "characters as the key in LEASEJOBS_SCHEDULES."
        )
    if not isinstance(spec, dict):
        raise ScheduleError(
            f"Schedule {name!r}: the entry must be a dict with at least 'job' and 'cron', "
            f"not {type(spec).__name__}."
        )
    problems = []
    unknown = sorted(str(key) for key in set(spec) - set(SPEC_KEYS))
    if unknown:
        problems.append(f"unknown keys {', '.join(unknown)} (allowed: {', '.join(SPEC_KEYS)})")
    missing = [key for key in ("job", "cron") if key not in spec]
    if missing:
        problems.append(f"missing required {' and '.join(repr(key) for key in missing)}")
    problems.extend(_type_problems(spec))
    if not problems:
        fields = {key: spec[key] if key in spec else _default(key) for key in SPEC_KEYS}
        fields["args"] = list(fields["args"])
        fields["queue"] = fields["queue"] or ""
        candidate = Schedule(name=name, **fields)
        problems.extend(candidate.problems().values())
    if problems:
        raise ScheduleError(f"Schedule {name!r}: {'; '.join(problems)}.")
    return fields


@dataclass(frozen=True)
class SyncResult:
    """What ``sync_from_settings`` did, by schedule name."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    """Declared names that belong to a schedule made in the admin: left alone."""
    kept: list[str] = field(default_factory=list)
    """Schedules declared in code by a job this process does not register: left alone (an
    older release's worker must not disable a newer release's schedules)."""

    def __str__(self) -> str:
        parts = [
            f"{label} {len(names)}" + (f" ({', '.join(names)})" if names else "")
            for label, names in self.as_dict().items()
        ]
        return ", ".join(parts)

    def as_dict(self) -> dict[str, list[str]]:
        return asdict(self)


def _validated_settings() -> dict[str, dict[str, Any]]:
    specs = settings.SCHEDULES
    cleaned, errors = {}, []
    for name, spec in specs.items():
        try:
            cleaned[name] = validate_schedule_spec(name, spec)
        except ScheduleError as exc:
            errors.append(str(exc))
    if errors:
        raise ScheduleError(
            f"LEASEJOBS_SCHEDULES has {len(errors)} invalid schedule(s); nothing was synced.\n"
            + "\n".join(errors)
        )
    return cleaned


def declared_in_code(overridden: Any = ()) -> dict[str, dict[str, Any]]:
    """The schedules registered jobs declare (``@job(cron=...)``), by name (the job's), as
    ``Schedule`` field values; those whose name is in ``overridden`` (settings) are left out."""
    return {
        name: spec.schedule.fields(name)
        for name, spec in sorted(registry.registered().items())
        if spec.schedule is not None and name not in overridden
    }


def sync_from_settings(*, dry_run: bool = False) -> SyncResult:
    """Make the database's schedules match ``LEASEJOBS_SCHEDULES`` and the ``@job(cron=...)``
    declarations of the jobs this process registers; all or nothing.

    Creates missing schedules, updates those whose declaration changed since the last sync
    (so an operator's edit in the admin stays until the declaration changes), and disables
    schedules that were removed (never deletes them: their jobs and skips are their history).
    A settings entry takes over a code declaration of the same name. A schedule declared in
    code is disabled only by a process that registers its job without ``cron``: one that does
    not register the job at all leaves it alone. Schedules made in the admin are never
    touched. Cursors are never moved. Safe to run from several workers starting at once.
    Raises ``ScheduleError`` (nothing written) if any settings entry is invalid.
    """
    every = _validated_settings()
    declared = _here(declared_in_code(every))
    cleaned = _here(every)
    for attempt in range(3):
        try:
            return _sync(cleaned, declared, dry_run=dry_run)
        except IntegrityError:
            if attempt == 2:
                raise
            # Another worker created the same schedule at the same moment: read again.
    raise AssertionError("unreachable")


def _here(entries: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The declarations whose jobs are written in the database synced: with shards
    (``LEASEJOBS_QUEUE_DATABASES``) a schedule lives, and fires, where its queue's jobs are, so
    each queue database's workers sync and fire their own."""
    if not settings.QUEUE_DATABASES:
        return entries
    here = job_database()
    return {
        name: fields
        for name, fields in entries.items()
        if queue_database(_queue_of(fields)) == here
    }


def _queue_of(fields: dict[str, Any]) -> str:
    """A declared schedule's queue: its own, else its job's default."""
    if fields.get("queue"):
        return str(fields["queue"])
    spec = registry.lookup(fields["job"])
    return spec.get_queue() if spec is not None else settings.DEFAULT_QUEUE


class _DryRun(Exception):
    pass


def _origin(row: Schedule) -> str:
    return "settings" if row.from_settings else "code" if row.from_code else "admin"


def _apply(
    existing: dict[str, Schedule],
    origin: str,
    entries: dict[str, dict[str, Any]],
    result: SyncResult,
) -> None:
    """Create or update the rows of one kind of declaration (settings or code)."""
    marks = {"from_settings": origin == "settings", "from_code": origin == "code"}
    for name, fields in entries.items():
        record = json.loads(json.dumps(fields))
        row = existing.get(name)
        if row is None:
            Schedule.objects.using(job_database()).create(
                name=name, synced_spec=record, **marks, **fields
            )
            result.created.append(name)
        elif _origin(row) == "admin":
            result.conflicts.append(name)
        elif row.synced_spec == record and _origin(row) == origin:
            result.unchanged.append(name)
        else:
            for key, value in {**fields, **marks}.items():
                setattr(row, key, value)
            row.synced_spec = record
            row.save()
            result.updated.append(name)


def _retire(existing: dict[str, Schedule], declared: set[str], result: SyncResult) -> None:
    """Disable, once, the synced rows no declaration names any more (an operator may
    re-enable them); keep code-declared rows whose job this process does not register."""
    for name, row in existing.items():
        if name in declared or row.synced_spec is None or _origin(row) == "admin":
            continue
        if row.from_code and registry.lookup(name) is None:
            result.kept.append(name)
            continue
        row.enabled = False
        row.synced_spec = None
        row.save(update_fields=["enabled", "synced_spec", "updated_at"])
        result.disabled.append(name)


def _sync(
    cleaned: dict[str, dict[str, Any]],
    declared: dict[str, dict[str, Any]],
    *,
    dry_run: bool,
) -> SyncResult:
    result = SyncResult()
    try:
        with transaction.atomic(using=job_database()):
            rows = (
                Schedule.objects.using(job_database())
                .select_for_update()
                .filter(
                    Q(name__in=[*cleaned, *declared]) | Q(from_settings=True) | Q(from_code=True)
                )
            )
            existing = {row.name: row for row in rows}
            _apply(existing, "settings", cleaned, result)
            _apply(existing, "code", declared, result)
            _retire(existing, {*cleaned, *declared}, result)
            if dry_run:
                raise _DryRun
    except _DryRun:
        pass
    for name in result.conflicts:
        logger.warning(
            "schedule.sync_conflict name=%s: a schedule made in the admin has this name; "
            "the LEASEJOBS_SCHEDULES entry or @job(cron=...) is ignored until one of them is "
            "renamed",
            name,
        )
    if not dry_run:
        logger.info("schedule.synced %s", result)
    return result
