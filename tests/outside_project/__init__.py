"""A small project outside the app that tests its jobs with the public testing helpers only.

``shop`` is its app (jobs, the code that enqueues them, a ``django.tasks`` task); the tests
beside it use ``django_leasejobs.testing`` from a ``TestCase`` and the pytest fixtures.
"""
