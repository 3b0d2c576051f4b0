"""Probes of a worker's metrics exporter, for the tests of ``metrics.serve`` and the command."""

from __future__ import annotations

import socket
import urllib.request
from typing import Any

import prometheus_client
from prometheus_client.parser import text_string_to_metric_families

from django_leasejobs import metrics
from django_leasejobs.models import Job

NOTHING: dict[str, Any] = {"receivers": [], "collectors": set()}
"""What :func:`leftovers` finds once nothing counts any more."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening(port: int) -> set[str]:
    """The local addresses a socket listens on at ``port``, read from the kernel's table of this
    network namespace (Linux's ``/proc/net/tcp``): what a scraper from elsewhere could reach."""
    found = set()
    for path, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            with open(path) as table:
                rows = [row.split() for row in table.read().splitlines()[1:]]
        except FileNotFoundError:
            continue
        for _, local, _, state, *_ in rows:
            host, hex_port = local.split(":")
            if state != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                continue
            # The address is written as 32-bit words, each in the host's (little-endian) order.
            words = (bytes.fromhex(host[i : i + 8])[::-1] for i in range(0, len(host), 8))
            found.add(socket.inet_ntop(family, b"".join(words)))
    return found


def scrape(port: int) -> dict[tuple[str, str], float]:
    """GET /metrics over HTTP and parse it: {(sample name, queue label): value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (sample.name, sample.labels.get("queue", "")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def leftovers() -> dict[str, Any]:
    """What counting leaves in the process: the signals still listened to (a receiver keeps
    counting, and makes every state change build its signal's arguments) and the leasejobs
    collectors still in the default registry (a new counter of the same name cannot register)."""
    names = set(prometheus_client.REGISTRY._names_to_collectors)
    return {
        "receivers": [event for event, signal, _ in metrics.COUNTERS if signal.has_listeners(Job)],
        "collectors": {name for name in names if name.startswith("leasejobs_")},
    }
