"""The ``django.tasks`` backend: ``backend`` (the face), ``execution`` (run by the worker),
``results`` and ``framework`` (read by the protocol when it replays a task).

Deliberately imports nothing: ``protocol`` imports ``tasks.results``, and importing the backend
here would pull the protocol back in and import the framework in every process that loads the
app. Settings name ``django_leasejobs.backends.LeaseJobsBackend``, a re-export of ``backend``.
"""
