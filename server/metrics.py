"""Prometheus metrics of one app, in a registry of its own (two apps in a process never clash)."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from ik_layer.core.result import ROW_STATUS

__all__ = ["CONTENT_TYPE_LATEST", "Metrics", "RobotMetrics"]

_TIME_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The server's counters, gauges and histograms.

    Attributes:
        registry: the registry :meth:`render` exports.
        requests: requests answered, by endpoint (route template), method and status.
        errors: requests answered with a 4xx or 5xx status, by endpoint and status.
        request_seconds: wall time per request [s], by endpoint.
        rows_in_flight: rows handed to the engine and not yet retired, by robot.
        rows_admitted: rows handed to the engine, by robot.
        rows_retired: rows retired, by robot and status (solved, exhausted, deadline, cancelled).
        block_seconds: wall time of one engine step (one block of LM iterations) [s], by robot.
        queue_wait_seconds: time from a request's arrival to its first rows reaching the engine [s], by robot.
        rejected: requests refused with 503 because the line was full, by robot.
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
        self.rows_in_flight = Gauge("ik_layer_rows_in_flight", "Rows in the engine", ["robot"], registry=reg)
        self.rows_admitted = Counter("ik_layer_rows_admitted", "Rows handed to the engine", ["robot"], registry=reg)
        self.rows_retired = Counter(
            "ik_layer_rows_retired", "Rows retired, by status", ["robot", "status"], registry=reg
        )
        self.block_seconds = Histogram(
            "ik_layer_block_seconds", "Engine step wall time [s]", ["robot"], buckets=_TIME_BUCKETS, registry=reg
        )
        self.queue_wait_seconds = Histogram(
            "ik_layer_queue_wait_seconds",
            "Arrival to first rows in the engine [s]",
            ["robot"],
            buckets=_TIME_BUCKETS,
            registry=reg,
        )
        self.rejected = Counter("ik_layer_rejected", "Requests refused with 503 (line full)", ["robot"], registry=reg)

    def of_robot(self, robot: str) -> RobotMetrics:
        """The metrics of one robot: each labelled once (a label lookup takes a lock and costs microseconds: the
        worker updates several per request)."""
        return RobotMetrics(self, robot)

    def render(self) -> bytes:
        """The registry in Prometheus' text exposition format."""
        return generate_latest(self.registry)


class RobotMetrics:
    """The by-robot metrics of :class:`Metrics` for one robot (see its attributes), labelled once; ``rows_retired``
    by status name."""

    def __init__(self, metrics: Metrics, robot: str) -> None:
        self.rows_in_flight = metrics.rows_in_flight.labels(robot)
        self.rows_admitted = metrics.rows_admitted.labels(robot)
        self.rows_retired = {status: metrics.rows_retired.labels(robot, status) for status in ROW_STATUS.values()}
        self.block_seconds = metrics.block_seconds.labels(robot)
        self.queue_wait_seconds = metrics.queue_wait_seconds.labels(robot)
        self.rejected = metrics.rejected.labels(robot)
