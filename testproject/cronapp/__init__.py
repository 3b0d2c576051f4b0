"""An app whose only job declares its schedule in code (``@job(cron=...)``).

Installed only by ``testproject.cron_settings``: the acceptance test of code-declared schedules
starts a worker with it (a new release) beside one without it (an old release).
"""
