"""A module that fails on import, as one missing a dependency on a worker would."""

raise RuntimeError("the reports service is not configured")
