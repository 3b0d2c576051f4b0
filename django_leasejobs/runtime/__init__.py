"""The runtime: what runs jobs and watches them, on top of the protocol.

The worker (its loop, pool threads, heartbeat and shutdown), running one job and writing its
result (``execution``), the handler's ``context``, the cron ``schedules``, the numbers
(``stats``), the health verdict (``health``) and the LISTEN side of the fast path
(``listener``). Every state change goes through :mod:`django_leasejobs.protocol`; the faces
above call into this package.
"""
