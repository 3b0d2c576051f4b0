"""The optional HTTP API: ``path("jobs/api/", include("django_leasejobs.api.urls"))``.

A face like the admin: it translates JSON into calls of the protocol and the runtime's read
models, and answers JSON. Modules: ``urls`` (the routes), ``endpoint`` (method routing,
authentication, permissions and the JSON error envelope around every view), ``auth`` (session
with CSRF, or a bearer token), ``tokens`` (``ApiToken`` secrets), ``inputs`` (request bodies
and query parameters), ``serialize`` (rows to JSON), ``jobs`` / ``operations`` (the views),
``schema``, ``schema_components``, ``schema_monitoring``, ``schema_workflows`` and
``schema_parts`` (the OpenAPI 3.1 document) and ``errors`` (the stable error codes). See
docs/api.md.
"""
