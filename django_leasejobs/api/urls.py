"""The API's routes: ``path("jobs/api/", include("django_leasejobs.api.urls"))``.

Each path lists its methods and the ``django_leasejobs`` permissions each needs: the same
ones as the admin action it mirrors (``view_*`` to read, ``cancel_job``, ``run_job_now``,
``replay_deadletter``, ``pause_queue``, ``cancel_workflowrun`` to act; a bulk action the
one its action needs on one job, ``delete_job`` to delete), and ``add_job`` to enqueue.
docs/api.md has the table. Every path but the enqueues and the document takes ``?database=``,
the queue database it works on (``endpoint``): the enqueues go where their queue lives.
"""

from __future__ import annotations

from django.urls import path, re_path

from . import bulk, jobs, operations, pauses, schema, workflows
from .endpoint import Action, not_found, resource

app_name = "leasejobs_api"

VIEW_JOB = ("view_job",)
VIEW_DEAD = ("view_deadletter",)
PAUSE = (*VIEW_JOB, "pause_queue")
VIEW_RUN = ("view_workflowrun",)

urlpatterns = [
    path("", resource(GET=Action(schema.document_view, public=True)), name="root"),
    path(
        "jobs/",
        resource(
            GET=Action(jobs.list_jobs, VIEW_JOB),
            POST=Action(jobs.enqueue, ("add_job",), database=False),
        ),
        name="jobs",
    ),
    path(
        "jobs/batch/",
        resource(POST=Action(jobs.enqueue_many, ("add_job",), database=False)),
        name="batch",
    ),
    # The action's own permission (cancel_job, replay_deadletter, delete_job) is checked by
    # the view once it has read which action; a dry run needs view_job only.
    path("jobs/bulk/", resource(POST=Action(bulk.bulk_action, VIEW_JOB)), name="bulk"),
    path("jobs/<int:job_id>/", resource(GET=Action(jobs.get_job, VIEW_JOB)), name="job"),
    path("jobs/<int:job_id>/logs/", resource(GET=Action(jobs.get_logs, VIEW_JOB)), name="logs"),
    path(
        "jobs/<int:job_id>/cancel/",
        resource(POST=Action(jobs.cancel, (*VIEW_JOB, "cancel_job"))),
        name="cancel",
    ),
    path(
        "jobs/<int:job_id>/retry/",
        resource(POST=Action(jobs.retry, (*VIEW_JOB, "run_job_now"))),
        name="retry",
    ),
    path(
        "dead-letters/",
        resource(GET=Action(operations.list_dead_letters, VIEW_DEAD)),
        name="dead_letters",
    ),
    path(
        "dead-letters/<int:dead_letter_id>/",
        resource(GET=Action(operations.get_dead_letter, VIEW_DEAD)),
        name="dead_letter",
    ),
    path(
        "dead-letters/<int:dead_letter_id>/replay/",
        resource(POST=Action(operations.replay, (*VIEW_DEAD, "replay_deadletter"))),
        name="replay",
    ),
    path(
        "schedules/",
        resource(GET=Action(operations.list_schedules, ("view_schedule",))),
        name="schedules",
    ),
    path(
        "schedules/<int:schedule_id>/occurrences/",
        resource(GET=Action(operations.occurrences, ("view_schedule", "view_job"))),
        name="occurrences",
    ),
    path("queues/", resource(GET=Action(operations.queue_stats, VIEW_JOB)), name="queues"),
    path(
        "pauses/",
        resource(
            GET=Action(pauses.list_pauses, VIEW_JOB),
            POST=Action(pauses.pause, PAUSE),
        ),
        name="pauses",
    ),
    path("pauses/resume/", resource(POST=Action(pauses.resume, PAUSE)), name="resume"),
    path(
        "workflows/",
        resource(GET=Action(workflows.list_workflows, VIEW_RUN)),
        name="workflows",
    ),
    path(
        "workflows/<int:run_id>/",
        resource(GET=Action(workflows.get_workflow, VIEW_RUN)),
        name="workflow",
    ),
    path(
        "workflows/<int:run_id>/cancel/",
        resource(POST=Action(workflows.cancel, (*VIEW_RUN, "cancel_workflowrun"))),
        name="cancel_workflow",
    ),
    path("health/", resource(GET=Action(operations.health, VIEW_JOB)), name="health"),
    # [\s\S], not ".": a path holding a newline is an unknown path too, answered in JSON. (An
    # inline (?s) flag would break reverse() for every URL of the project.)
    re_path(r"^[\s\S]*$", not_found),
]
