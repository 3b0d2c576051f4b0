"""MariaDB's and MySQL's replication status: ``SHOW REPLICA STATUS``.

The spelling both understand (MariaDB 10.5.1+, MySQL 8.0.22+; ``SHOW SLAVE STATUS`` is gone
from MySQL 8.4). No row: the server replicates from nobody, so it is its own primary (0 s).
The lag column is ``Seconds_Behind_Master`` on MariaDB, ``Seconds_Behind_Source`` on MySQL;
NULL when the replication threads are not running, so the lag is unknown. Reading it needs the
``SLAVE MONITOR`` (MariaDB) or ``REPLICATION CLIENT`` (MySQL) privilege: the caller says
"unknown" when it is refused.
"""

from __future__ import annotations

from django.db.backends.utils import CursorWrapper

from ..base.replication import NOT_A_STANDBY, Replication, ReplicationReader

LAG_COLUMNS = ("Seconds_Behind_Master", "Seconds_Behind_Source")


def status(cursor: CursorWrapper) -> Replication:
    """Whether the server is a replica, and how many seconds behind its primary it says."""
    cursor.execute("SHOW REPLICA STATUS")
    row = cursor.fetchone()
    if row is None:
        return NOT_A_STANDBY
    names = [column[0] for column in cursor.description]
    lag = next((row[names.index(c)] for c in LAG_COLUMNS if c in names), None)
    return Replication(standby=True, lag=None if lag is None else float(lag))


READER = ReplicationReader(status)
