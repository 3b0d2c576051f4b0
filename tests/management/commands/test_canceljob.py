"""``manage.py canceljob``: cancels waiting jobs, asks running jobs' workers, refuses the rest."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.models import Job, Status

pytestmark = pytest.mark.django_db


def run(*argv: str) -> str:
    out = io.StringIO()
    call_command("canceljob", *argv, stdout=out)
    return out.getvalue()


def test_waiting_is_cancelled_and_running_is_requested() -> None:
    waiting = jobs.noop.enqueue(delay=60)
    jobs.noop.enqueue()
    (running,) = protocol.claim("w1", batch=1)
    output = run(str(waiting.pk), str(running.pk))
    assert f"job {waiting.pk}: cancelled" in output
    assert f"job {running.pk}: cancel requested" in output
    assert Job.objects.get(pk=waiting.pk).status == Status.CANCELLED
    row = Job.objects.get(pk=running.pk)
    assert (row.status, row.cancel_requested_at is not None) == (Status.RUNNING, True)


def test_a_finished_or_missing_job_is_an_error_after_the_others_are_done() -> None:
    done = jobs.noop.enqueue()
    Job.objects.filter(pk=done.pk).update(status=Status.SUCCEEDED)
    waiting = jobs.noop.enqueue(delay=60)
    out = io.StringIO()
    with pytest.raises(CommandError, match=f"Not cancelled: {done.pk}, 999999."):
        call_command("canceljob", str(done.pk), str(waiting.pk), "999999", stdout=out)
    assert f"job {done.pk}: refused" in out.getvalue()
    assert Job.objects.get(pk=waiting.pk).status == Status.CANCELLED
    assert Job.objects.get(pk=done.pk).status == Status.SUCCEEDED


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: ID"),
        (["abc"], "invalid job id value: 'abc'"),
        (["0"], "invalid job id value: '0'"),
        (["-3"], "invalid job id value: '-3'"),
        (["+5"], "invalid job id value: '\\+5'"),
        ([" 5"], "invalid job id value: ' 5'"),
        (["\u00b2"], "invalid job id value: '\u00b2'"),
        (["9" * 30], f"invalid job id value: '{'9' * 30}'"),
    ],
)
def test_bad_ids_are_a_command_error(argv: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run(*argv)
