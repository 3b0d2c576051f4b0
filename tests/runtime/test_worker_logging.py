"""The worker logs one line per outcome with what an operator needs to find the job."""

from __future__ import annotations

import logging
import re

import pytest
from testapp import jobs

from django_leasejobs.runtime.worker import Worker

pytestmark = pytest.mark.django_db(transaction=True)

LINE = re.compile(
    r"^job\.(?P<outcome>\w+) id=(?P<id>\d+) name=(?P<name>\S+) attempt=(?P<attempt>\d+) "
    r"queue=(?P<queue>\S+) duration=(?P<duration>[\d.]+)s worker=(?P<worker>\S+)$"
)


def test_each_outcome_is_one_line_with_name_queue_attempt_and_duration(caplog) -> None:
    quick = jobs.noop.enqueue()
    valued = jobs.add.enqueue(1, 2)
    dead = jobs.permanent.enqueue()
    with caplog.at_level(logging.INFO, logger="django_leasejobs"):
        Worker(queues=None, concurrency=2, poll=0.05, scheduler=False, worker_id="w-log").run(
            burst=True
        )
    lines = [m.groupdict() for r in caplog.records if (m := LINE.match(r.getMessage()))]
    by_id = {int(line["id"]): line for line in lines}
    assert len(lines) == 3 == len(by_id)
    assert by_id[quick.pk]["outcome"] == "succeeded"
    assert by_id[valued.pk]["outcome"] == "succeeded"
    assert by_id[dead.pk]["outcome"] == "dead"
    assert by_id[dead.pk]["name"] == "testapp.jobs.permanent"
    assert {line["queue"] for line in lines} == {"default"}
    assert {line["attempt"] for line in lines} == {"1"}
    assert {line["worker"] for line in lines} == {"w-log"}
    assert all(float(line["duration"]) >= 0 for line in lines)
