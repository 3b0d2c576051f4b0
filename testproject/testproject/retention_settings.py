"""The test settings plus ``LEASEJOBS_RETENTION``: workers started with them prune by age."""

from .test_settings import *  # noqa: F403

LEASEJOBS_RETENTION = {"succeeded": "7d", "dead": "30d"}
