"""Prometheus metrics. With several workers, `featurehash serve` sets
PROMETHEUS_MULTIPROC_DIR and /metrics aggregates the workers' files."""

from __future__ import annotations

import os

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client import REGISTRY, multiprocess

# tenant: the caller's (from the keys file; "default" without one), "other" before authentication (401s, health).
REQUESTS = Counter("featurehash_requests_total", "HTTP requests", ["method", "route", "status", "tenant"])
LATENCY = Histogram("featurehash_request_seconds", "HTTP request latency", ["method", "route", "tenant"],
                    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
BATCH_ROWS = Histogram("featurehash_batch_rows", "Vectors per transform/hash/kernel request", ["operation"],
                       buckets=(1, 2, 8, 32, 128, 512, 2048, 8192, 32768, 131072))
# limit: requests_per_second, concurrent_requests (429) or stored_bytes (507); tenant: one the keys file names.
QUOTA_REFUSALS = Counter("featurehash_quota_refusals_total", "Requests refused by a per-key or per-tenant limit",
                         ["tenant", "limit"])
# reason: header_timeout, body_timeout, send_timeout (the client took no byte of its answer), evicted (at the
# connection cap, to admit a new one), refused (at the cap, every connection busy); featurehash.service.connection_guard.
CONNECTIONS_CLOSED = Counter("featurehash_connections_closed_total", "Connections the server closed early, by reason",
                             ["reason"])


def render() -> tuple[bytes, str]:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
