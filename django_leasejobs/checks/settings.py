"""System checks of the ``LEASEJOBS_*`` settings' values, and of Django settings they rely on.

Every value is read through :mod:`django_leasejobs.core.conf`, so a bad one is reported with
the message a read would raise (``leasejobs.E001``); the rest are settings that are each valid
alone but wrong together, or wrong for the deployment: E002, W002, W003, E008, E009, E011,
W007, W015 (described in :mod:`django_leasejobs.checks`).
"""

from __future__ import annotations

import difflib
import importlib.util
from functools import cached_property
from typing import Any

from django.conf import settings as django_settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from ..core.conf import PREFIX, Settings, settings

Messages = list[checks.CheckMessage]


def setting_names() -> list[str]:
    """The names ``conf.Settings`` knows, without the prefix."""
    return sorted(
        name for name, value in vars(Settings).items() if isinstance(value, cached_property)
    )


def check_settings(app_configs: Any = None, **kwargs: Any) -> Messages:
    messages: Messages = []
    known = setting_names()
    values: dict[str, Any] = {}
    for name in known:
        try:
            values[name] = getattr(settings, name)
        except ImproperlyConfigured as exc:
            messages.append(
                checks.Error(
                    str(exc), hint="See docs/settings.md for each setting.", id="leasejobs.E001"
                )
            )
    for name in sorted(dir(django_settings)):
        if name.startswith(PREFIX) and name.removeprefix(PREFIX) not in known:
            close = difflib.get_close_matches(name.removeprefix(PREFIX), known, n=1)
            messages.append(
                checks.Warning(
                    f"{name} is not a django-leasejobs setting; it is ignored.",
                    hint=f"Did you mean {PREFIX}{close[0]}?" if close else None,
                    id="leasejobs.W003",
                )
            )
    messages += _heartbeat(values.get("LEASE_SECONDS"), values.get("HEARTBEAT_SECONDS"))
    page, most = values.get("API_PAGE_SIZE"), values.get("API_MAX_PAGE_SIZE")
    if page is not None and most is not None and page > most:
        messages.append(
            checks.Error(
                f"{PREFIX}API_PAGE_SIZE ({page}) is larger than {PREFIX}API_MAX_PAGE_SIZE "
                f"({most}): a list without a limit would ask for more than is allowed.",
                hint=f"Lower {PREFIX}API_PAGE_SIZE or raise {PREFIX}API_MAX_PAGE_SIZE.",
                id="leasejobs.E011",
            )
        )
    messages += _time_zone(django_settings.USE_TZ, django_settings.TIME_ZONE)
    messages += _partition_span(values.get("HISTORY_PARTITION"), values.get("RETENTION"))
    if values.get("EAGER") and not django_settings.DEBUG:
        # A test setting: in production every enqueue would run its job inside the web
        # request that made it, with no worker, lease, retry or timeout.
        messages.append(
            checks.Warning(
                f"{PREFIX}EAGER is True with DEBUG = False: each enqueue runs its job in the "
                "process that made it (a web request waits for it), with no worker, retry, "
                "lease or timeout.",
                hint=f"{PREFIX}EAGER is for tests; leave it unset in production settings.",
                id="leasejobs.W007",
            )
        )
    if values.get("METRICS") and importlib.util.find_spec("prometheus_client") is None:
        messages.append(
            checks.Error(
                f"{PREFIX}METRICS is True but prometheus-client is not installed.",
                hint="pip install 'django-leasejobs[metrics]', or set it to False.",
                id="leasejobs.E008",
            )
        )
    return messages


def _time_zone(use_tz: bool, time_zone: str | None) -> Messages:
    """Database time is compared with stored times as UTC instants (SQLite's clock is UTC).

    With ``USE_TZ = False`` Django stores naive local times: outside UTC every delay, lease and
    backoff would be off by the zone's offset (a job delayed 10 minutes in Paris ran 50 minutes
    late or early), so that combination is refused rather than left to misbehave.
    """
    if use_tz or time_zone in (None, "UTC", "Etc/UTC"):
        return []
    return [
        checks.Error(
            f"USE_TZ = False with TIME_ZONE = {time_zone!r}: django-leasejobs compares the "
            "database clock with stored times as UTC, so run_at, leases and backoff would be "
            "off by the zone's offset.",
            hint="Set USE_TZ = True (Django's default), or TIME_ZONE = 'UTC'.",
            id="leasejobs.E009",
        )
    ]


def _heartbeat(lease: float | None, heartbeat: float | None) -> Messages:
    if lease is None or heartbeat is None:
        return []
    if heartbeat >= lease:
        return [
            checks.Error(
                f"{PREFIX}HEARTBEAT_SECONDS ({heartbeat:g}) is not shorter than "
                f"{PREFIX}LEASE_SECONDS ({lease:g}): every lease would expire before it is "
                "renewed, and running jobs would be taken again while they run.",
                hint=f"Renew at most every {lease / 3:g} s (a third of the lease).",
                id="leasejobs.E002",
            )
        ]
    if heartbeat > lease / 3:
        return [
            checks.Warning(
                f"{PREFIX}HEARTBEAT_SECONDS ({heartbeat:g}) is more than a third of "
                f"{PREFIX}LEASE_SECONDS ({lease:g}): one late or failed heartbeat loses the "
                "lease and the job runs twice.",
                hint=f"Renew at most every {lease / 3:g} s, or lengthen the lease.",
                id="leasejobs.W002",
            )
        ]
    return []


def _partition_span(span: Any, ages: dict[str, Any] | None) -> Messages:
    """On PostgreSQL retention drops whole history partitions: a job is kept for its age plus
    up to one partition's span, so a span longer than an age keeps jobs more than twice as long
    as asked (the span applies on other databases too, where it changes nothing)."""
    if span is None or not ages:
        return []
    state, age = min(ages.items(), key=lambda item: item[1])
    if span <= age:
        return []
    return [
        checks.Warning(
            f"{PREFIX}HISTORY_PARTITION ({span}) is longer than the shortest retention age "
            f"({state}: {age}): on PostgreSQL retention drops whole partitions, so those jobs "
            f"are kept up to {span + age}.",
            hint=f"Set {PREFIX}HISTORY_PARTITION to at most {age} (a fraction of it keeps "
            "retention closer to the age).",
            id="leasejobs.W015",
        )
    ]
