"""The lease protocol: every state change of a job, each one guarded statement.

Rules that hold for every function here:

* A worker's write carries its fencing token in the WHERE clause (``id = ? AND attempt = ? AND
  status = 'running'``); an operator's write carries the states it is allowed from. Nothing is
  read and then written unguarded.
* "Zero rows changed" is a result, not an exception: ``Outcome.STALE`` (or ``False`` for
  operator actions), logged, so a stale worker can never overwrite a newer result.
* All times come from the database clock (``DbNow()``), never from the worker's clock.
* No function holds a transaction open longer than its own statements; handlers run outside.
* No database is named here: what differs per database is a ``dialects`` method.

Modules: ``new_rows`` (a new job's row, validated before anything is written), ``enqueues``
(enqueue, bulk, dedupe: ``dedupe``), ``lease`` (claim, heartbeat),
``completions`` and ``workflow_completions`` (a batch's successes, workflow steps among them),
``failures`` (retry, dead letter, lease recovery, release), ``deferrals`` (a name the worker
cannot run: it waits for one that can), ``snoozes`` (the handler's ``Snooze``: waiting again
without spending an attempt), ``operator_actions`` (cancel, run now, retry now, replay,
effects), ``cancels`` (cancel a waiting job, or request it of a running job's worker; one job or
a batch), ``dead_letter_groups`` (dead letters grouped by fingerprint: replay or discard a group,
backfill fingerprints), ``pauses`` (pause, resume), ``occurrences`` (cron), ``progress`` (the
handler's progress updates, fenced like a completion), ``workflow_specs``, ``workflow_runs`` and
``workflow_steps`` (a workflow's rows, its steps released and counted), ``step_traces`` (a
step's process span kept on its job, for its children's spans to link to). Pruning, the live
workers' rows, the advisor's counters and the maintenance lease are ``upkeep``'s.
"""

from .base import Failure, Outcome, job_database
from .cancels import Cancel, CancelMany, cancel, cancel_attempt, cancel_many, request_cancel
from .completions import Upgraded, complete, complete_in_transaction, complete_many
from .dead_letter_groups import (
    Group,
    GroupDiscard,
    GroupReplay,
    check_fingerprint,
    discard_group,
    fingerprint_letters,
    groups,
    latest_errors,
    replay_group,
)
from .deferrals import (
    UNREGISTERED_JOB,
    defer,
    deferral_delay,
    deferred_names,
    waiting_unknown,
    wake_deferred,
)
from .enqueues import Inserted, enqueue, enqueue_inserted, enqueue_many, enqueue_task
from .failures import Recovered, fail, recover_expired, release
from .lease import Renewal, anything_due, claim, claim_job, heartbeat, renew
from .new_rows import ENQUEUE_OPTIONS
from .occurrences import emit_occurrence, pass_occurrences, skip_occurrences
from .operator_actions import record_effect, replay, retry_now, run_now
from .pauses import Paused, cover_aliases, pause, paused, resume
from .progress import ProgressUpdate, progress_update, record_progress
from .snoozes import SNOOZED_TOO_OFTEN, snooze
from .step_traces import parent_process_spans, record_process_span

__all__ = [
    "ENQUEUE_OPTIONS",
    "SNOOZED_TOO_OFTEN",
    "UNREGISTERED_JOB",
    "Cancel",
    "CancelMany",
    "Failure",
    "Group",
    "GroupDiscard",
    "GroupReplay",
    "Inserted",
    "Outcome",
    "Paused",
    "ProgressUpdate",
    "Recovered",
    "Renewal",
    "Upgraded",
    "anything_due",
    "cancel",
    "cancel_attempt",
    "cancel_many",
    "check_fingerprint",
    "claim",
    "claim_job",
    "complete",
    "complete_in_transaction",
    "complete_many",
    "cover_aliases",
    "defer",
    "deferral_delay",
    "deferred_names",
    "discard_group",
    "emit_occurrence",
    "enqueue",
    "enqueue_inserted",
    "enqueue_many",
    "enqueue_task",
    "fail",
    "fingerprint_letters",
    "groups",
    "heartbeat",
    "job_database",
    "latest_errors",
    "parent_process_spans",
    "pass_occurrences",
    "pause",
    "paused",
    "progress_update",
    "record_effect",
    "record_process_span",
    "record_progress",
    "recover_expired",
    "release",
    "renew",
    "replay",
    "replay_group",
    "request_cancel",
    "resume",
    "retry_now",
    "run_now",
    "skip_occurrences",
    "snooze",
    "waiting_unknown",
    "wake_deferred",
]
