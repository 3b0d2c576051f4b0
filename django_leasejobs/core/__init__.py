"""The layer below the models: settings, errors, validation, the job registry and
what it holds. Imports nothing of the package but ``core`` (and ``errors``)."""
