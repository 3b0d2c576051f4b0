"""The ``django.tasks`` face: ``backend`` (what Django calls), ``execution`` and ``results``
(running a marked row, building its ``TaskResult``), ``framework`` (``django.tasks`` or the
``django_tasks`` package) and ``rows`` (the handler the app registers in
:mod:`django_leasejobs.core.task_rows`, through which the worker and the protocol reach it).

Imports nothing itself, so that loading the app does not import the framework until
``apps.ready`` registers the handler. Settings name ``django_leasejobs.backends.LeaseJobsBackend``,
a re-export of ``backend``.
"""
