"""``dialects.replication``: what the database under test says of its replication.

The suite's database is a primary (PostgreSQL not in recovery, MariaDB replicating from
nobody) or SQLite, which has no replication: each answers "not a standby, 0 s behind". A real
standby's lag is read in tests/acceptance/test_read_replicas.py where the server allows one.
"""

from __future__ import annotations

import pytest
from django.db import transaction

from django_leasejobs import dialects

pytestmark = pytest.mark.django_db


def test_the_test_database_is_no_standby() -> None:
    assert dialects.replication("default") == dialects.Replication(standby=False, lag=0.0)


def test_inside_a_transaction_it_leaves_the_transaction_usable() -> None:
    with transaction.atomic():
        assert not dialects.replication("default").standby
        assert dialects.replication("default").lag == 0.0
