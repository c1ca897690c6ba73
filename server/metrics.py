"""Prometheus metrics of one app, in a registry of its own (two apps in a process never clash)."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]

_ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
_TIME_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The server's counters, gauges and histograms.

    Attributes:
        registry: the registry :meth:`render` exports.
        requests: requests answered, by endpoint (route template), method and status.
        errors: requests answered with a 4xx or 5xx status, by endpoint and status.
        request_seconds: wall time per request [s], by endpoint.
        batch_rows: rows (targets) per solver call, by robot.
        batch_requests: requests coalesced into one solver call, by robot.
        queue_depth: requests waiting for the solver, by robot.
        solve_seconds: wall time of one batched solver call [s], by robot.
        rejected: requests refused because the queue was full, by robot.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        reg = self.registry
        self.requests = Counter(
            "ik_layer_requests", "Requests answered", ["endpoint", "method", "status"], registry=reg
        )
        self.errors = Counter("ik_layer_errors", "Requests answered with 4xx/5xx", ["endpoint", "status"], registry=reg)
        self.request_seconds = Histogram(
            "ik_layer_request_seconds", "Request wall time [s]", ["endpoint"], buckets=_TIME_BUCKETS, registry=reg
        )
        self.batch_rows = Histogram(
            "ik_layer_batch_rows", "Rows per batched solver call", ["robot"], buckets=_ROW_BUCKETS, registry=reg
        )
        self.batch_requests = Histogram(
            "ik_layer_batch_requests", "Requests per batched solver call", ["robot"], buckets=_ROW_BUCKETS, registry=reg
        )
        self.queue_depth = Gauge("ik_layer_queue_depth", "Requests waiting for the solver", ["robot"], registry=reg)
        self.solve_seconds = Histogram(
            "ik_layer_solve_seconds",
            "Batched solver call wall time [s]",
            ["robot"],
            buckets=_TIME_BUCKETS,
            registry=reg,
        )
        self.rejected = Counter("ik_layer_rejected", "Requests refused with 503 (queue full)", ["robot"], registry=reg)

    def render(self) -> bytes:
        """The registry in Prometheus' text exposition format."""
        return generate_latest(self.registry)
