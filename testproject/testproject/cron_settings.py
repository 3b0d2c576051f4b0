"""The test settings plus ``cronapp``, whose job declares a schedule with ``@job(cron=...)``."""

from .test_settings import *  # noqa: F403
from .test_settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "cronapp"]
