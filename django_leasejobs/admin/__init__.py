"""Admin for jobs, dead letters, schedules and workflow runs.

Thin by design: every state change is a call into :mod:`django_leasejobs.protocol`, made only
on POST, with its own permission, and written to the admin log.
"""

from .api_tokens import ApiTokenAdmin
from .dead_letters import DeadLetterAdmin
from .jobs import JobAdmin
from .schedules import ScheduleAdmin
from .workflows import WorkflowRunAdmin

__all__ = ["ApiTokenAdmin", "DeadLetterAdmin", "JobAdmin", "ScheduleAdmin", "WorkflowRunAdmin"]
