from __future__ import annotations

import pytest
from testapp import workflow_jobs as w
from testapp.models import Hit

from django_leasejobs import chain, group
from django_leasejobs.models import WorkflowRun
from django_leasejobs.testing.running import drain

pytestmark = pytest.mark.django_db(transaction=True)


def test_chain_smoke() -> None:
    run = chain(w.fetch.s("u"), w.parse.s(), w.store.s(where="x")).enqueue()
    drain()
    run.refresh_from_db()
    print(list(Hit.objects.values_list("label", flat=True)))
    assert run.status == "succeeded"


def test_group_smoke() -> None:
    run = group(w.square.s(i) for i in range(4)).then(w.total.s()).enqueue()
    drain()
    run.refresh_from_db()
    print(list(Hit.objects.values_list("label", flat=True)))
    assert run.status == "succeeded"
    assert WorkflowRun.objects.get().steps_finished == 5
