"""The test settings on a primary and its synchronous standby, through libpq's multi-host string.

``tests/acceptance/test_failover.py`` starts both servers on ports of its choosing and names
them in ``LEASEJOBS_FAILOVER_PORTS`` ("primary,standby"). libpq tries the hosts in order and
keeps the first that accepts writes (``target_session_attrs=read-write``), so once the standby
is promoted every new connection finds it. ``connect_timeout`` bounds a try at a host that
does not answer at all (a machine gone, rather than a refused port).
"""

import os
from typing import Any

from .test_settings import *  # noqa: F403


def pair_database(ports: str) -> dict[str, Any]:
    """The ``DATABASES`` entry of the servers on ``ports`` ("5433,5434") of this machine."""
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "leasejobs",
        "USER": "postgres",
        "HOST": ",".join("127.0.0.1" for _ in ports.split(",")),
        "PORT": ports,
        "OPTIONS": {"target_session_attrs": "read-write", "connect_timeout": 3},
    }


DATABASES = {"default": pair_database(os.environ["LEASEJOBS_FAILOVER_PORTS"])}
