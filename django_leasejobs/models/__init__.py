"""The tables, one module per concern: jobs, their statuses, dead letters and recorded effects,
cron schedules, flow control (pauses, limiters), API tokens, runtime statistics (the lease
advisor's), queue samples (the dashboard's history), live workers, maintenance leases,
workflows.

Every state change of a ``Job`` is made by :mod:`django_leasejobs.protocol`; nothing else writes
``status``, ``attempt`` or the lease columns. The models only describe the rows.
"""

from .api import ApiToken
from .dead_letters import DeadLetter
from .effects import Effect
from .flow import Limiter, Pause, PauseKind
from .job_logs import JobLog
from .jobs import Job
from .maintenance import MaintenanceLease
from .runtimes import RuntimeStat
from .samples import RUN_TIME_EDGES, QueueSample
from .schedules import Misfire, Schedule, ScheduleSkip
from .statuses import CLAIMABLE, FINAL, IS_FINAL, IS_RUNNING, IS_WAITING, LIVE, Status
from .workers import Worker
from .workflows import (
    Policy,
    RunStatus,
    StepState,
    TakesResult,
    WorkflowEdge,
    WorkflowRun,
    WorkflowStep,
)

__all__ = [
    "CLAIMABLE",
    "FINAL",
    "IS_FINAL",
    "IS_RUNNING",
    "IS_WAITING",
    "LIVE",
    "RUN_TIME_EDGES",
    "ApiToken",
    "DeadLetter",
    "Effect",
    "Job",
    "JobLog",
    "Limiter",
    "MaintenanceLease",
    "Misfire",
    "Pause",
    "PauseKind",
    "Policy",
    "QueueSample",
    "RunStatus",
    "RuntimeStat",
    "Schedule",
    "ScheduleSkip",
    "Status",
    "StepState",
    "TakesResult",
    "Worker",
    "WorkflowEdge",
    "WorkflowRun",
    "WorkflowStep",
]
