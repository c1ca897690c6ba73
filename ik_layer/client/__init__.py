"""A Python client for the ik-layer HTTP service: :class:`Client` (blocking) and :class:`AsyncClient` (asyncio).

Both speak the same API with the same logic: every call is written once, as a flow of requests and waits
(:mod:`ik_layer.client._core`), and the two faces only differ in how they run it (:mod:`ik_layer.client.sync`,
:mod:`ik_layer.client.aio`); :mod:`ik_layer.client.wire` is the wire format (JSON fields <-> arrays, refusals
<-> exceptions).

The client takes targets in every form the library takes ((..., 4, 4) transforms or (..., 7) poses, any
batch shape, tensors, arrays or nested lists; (..., F, 4, 4) or (..., F, 7) for a robot with F end-effector
frames, in the order of its ``ee_frames``), splits a batch larger than the server's ``--max-targets``
into several requests (the limit is read from the server's 413 answer once, then remembered), retries
503 answers as ``Retry-After`` says (a bounded number of times and seconds), and raises the library's
exception classes for refused requests. Results have the shapes :func:`ik_layer.solve` and
:meth:`ik_layer.Robot.fk` give for the same robot: torch tensors for tensor input, numpy arrays otherwise.

It needs numpy and httpx only: the ``ik-layer-client`` distribution (``pip install ./client-packaging`` in a checkout)
installs this package without torch, Pinocchio or warp.

Example::

    from ik_layer.client import Client

    with Client("http://127.0.0.1:8000") as client:
        result = client.solve("ur5e", targets)  # (..., 7) or (..., 4, 4)
        result.q, result.success, result.status
        feet = client.solve("solo", feet_targets, weights=[1, 1, 1, 0, 0, 0])  # (..., 4, 4, 4): four feet
        clip = client.trajectory("ur5e", clip_targets, dt=0.01, warm_start=q0)  # (T, 7): q (T, nq), max_step (T,)
"""

from __future__ import annotations

try:
    import httpx  # noqa: F401 - checked first, for the message below
except ImportError as err:  # pragma: no cover - depends on the install
    raise ImportError("the client needs httpx (the client extra, or pip install httpx)") from err

from ik_layer.client._core import RetryPolicy
from ik_layer.client.aio import AsyncClient
from ik_layer.client.sync import Client
from ik_layer.client.wire import (
    InvalidRequest,
    RemoteIKResult,
    RemoteRobotNotFound,
    RemoteTrajectoryResult,
    RequestTooLarge,
    RobotInfo,
    ServiceError,
    ServiceUnavailable,
)

__all__ = [
    "AsyncClient",
    "Client",
    "InvalidRequest",
    "RemoteIKResult",
    "RemoteRobotNotFound",
    "RemoteTrajectoryResult",
    "RequestTooLarge",
    "RetryPolicy",
    "RobotInfo",
    "ServiceError",
    "ServiceUnavailable",
]
