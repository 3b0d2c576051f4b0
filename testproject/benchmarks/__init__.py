"""The benchmark suite (SPEC §9): ``manage.py benchmark``. Not tests: nothing here is timed in CI.

Each section runs in its own process against a scratch PostgreSQL database that the command
creates and drops, so figures never depend on (or disturb) the project's own data.
"""
