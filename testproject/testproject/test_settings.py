"""Settings for the test suite: the demo project's, without the demo's cron schedule.

Tests that need schedules declare them with ``override_settings`` or rows of their own; a
per-minute demo schedule firing mid-test would add jobs the test did not enqueue.
"""

from .settings import *  # noqa: F403

LEASEJOBS_SCHEDULES = {}

# Worker subprocesses of the shard tests get the test's routes through the environment.
LEASEJOBS_QUEUE_DATABASES = env.json(  # noqa: F405
    "LEASEJOBS_QUEUE_DATABASES", default={}
)
