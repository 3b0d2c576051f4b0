"""PostgreSQL's replication status: a hot standby's replay lag, in one statement.

``now() - pg_last_xact_replay_timestamp()`` alone grows on an idle primary's standby that is
fully caught up (the last replayed transaction simply gets older), so a standby that has
replayed everything it received counts as 0 seconds behind. NULL replay timestamp on a standby:
nothing replayed since it started, so its lag is unknown. Not in recovery: a primary, 0.
"""

from __future__ import annotations

from django.db.backends.utils import CursorWrapper

from ..base.replication import NOT_A_STANDBY, Replication, ReplicationReader

# -- replication_status --
# Received = replayed: caught up, whatever the age of the last replayed transaction.
REPLICATION_STATUS = """
SELECT pg_is_in_recovery(),
       CASE
           WHEN pg_last_wal_receive_lsn() IS NOT NULL
                AND pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
           ELSE EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())
       END
"""


def status(cursor: CursorWrapper) -> Replication:
    """Whether the database is a standby, and its replay lag in seconds."""
    cursor.execute(REPLICATION_STATUS)
    in_recovery, lag = cursor.fetchone()
    if not in_recovery:
        return NOT_A_STANDBY
    return Replication(standby=True, lag=None if lag is None else max(float(lag), 0.0))


READER = ReplicationReader(status)
