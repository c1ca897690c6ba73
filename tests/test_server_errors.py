"""The error mapping alone: each exception of the family -> status, JSON body and headers."""

from __future__ import annotations

import json

import pytest

from ik_layer import IKLayerError, NonFiniteError, RobotNotFound
from ik_layer.server.errors import ERROR_STATUS, error_response
from ik_layer.server.exceptions import (
    FieldError,
    InvalidBody,
    ServiceUnavailable,
    TooManyRows,
    TooMuchWork,
    UnsupportedMediaType,
)

AVAILABLE = {"ur5e": object(), "planar3": object()}

CASES = [
    (RobotNotFound("kuka", AVAILABLE), 404, {"detail": "unknown robot 'kuka'", "available": ["planar3", "ur5e"]}),
    (
        FieldError(("body", "warm_start", 1), "warm_start[1] has 2 values"),
        422,
        {
            "detail": [{"type": "value_error", "loc": ["body", "warm_start", 1], "msg": "warm_start[1] has 2 values"}],
            "error_count": 1,
        },
    ),
    (
        NonFiniteError("the solver produced non-finite solutions"),
        422,
        {
            "detail": [{"type": "value_error", "loc": ["body"], "msg": "the solver produced non-finite solutions"}],
            "error_count": 1,
        },
    ),
    (
        InvalidBody([{"type": "int_type", "loc": ("max_iterations",), "msg": "Input should be a valid integer"}], 7),
        422,
        {
            "detail": [
                {"type": "int_type", "loc": ["body", "max_iterations"], "msg": "Input should be a valid integer"}
            ],
            "error_count": 7,
        },
    ),
    (
        TooMuchWork("this request may cost 1,000 row-iterations"),
        413,
        {"detail": "this request may cost 1,000 row-iterations"},
    ),
    (
        UnsupportedMediaType("the body must be JSON"),
        415,
        {"detail": "the body must be JSON"},
    ),
    (TooManyRows("targets has 9 entries", 8), 413, {"detail": "targets has 9 entries", "limit": 8}),
    (ServiceUnavailable("robot 'ur5e' has 4 requests waiting"), 503, {"detail": "robot 'ur5e' has 4 requests waiting"}),
    (RuntimeError("a bug"), 500, {"detail": "a bug"}),
]


@pytest.mark.parametrize(("err", "status", "body"), CASES, ids=[type(c[0]).__name__ for c in CASES])
def test_each_exception_gets_its_status_and_body(err: Exception, status: int, body: dict[str, object]) -> None:
    response = error_response(err, AVAILABLE, retry_after_s=7)
    assert response.status_code == status
    assert json.loads(response.body) == body
    assert response.headers.get("retry-after") == ("7" if status == 503 else None)


def test_bad_input_is_the_library_family_and_overload_is_not() -> None:
    assert issubclass(FieldError, IKLayerError) and issubclass(TooManyRows, IKLayerError)
    assert issubclass(TooManyRows, ValueError) and not issubclass(ServiceUnavailable, ValueError)
    kinds = [kind for kind, _ in ERROR_STATUS]
    assert max(kinds.index(RobotNotFound), kinds.index(TooManyRows)) < kinds.index(IKLayerError)
