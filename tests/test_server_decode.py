"""Stage decode alone: requests -> CPU tensors in the robot's dtype, options over the server defaults, robot checks."""

from __future__ import annotations

import math

import pytest
import torch

import ik_layer
from ik_layer import SolveOptions
from ik_layer.server.decode import fk_configurations, ik_job
from ik_layer.server.exceptions import FieldError, TooManyRows
from ik_layer.server.schemas import FKRequest, IKRequest
from ik_layer.server.settings import Settings

SETTINGS = Settings(robots=["planar3"], max_targets=2, num_seeds=3, max_iterations=50)


@pytest.fixture(scope="module")
def planar3() -> ik_layer.Robot:
    return ik_layer.load_robot("planar3", dtype=torch.float32)


def ik_request(**fields: object) -> IKRequest:
    targets = [
        {"position": [0.5, 0.25, 0.0], "orientation": [0.0, 0.0, 0.0, 2.0]},
        {"position": [0.1, -0.2, 0.0], "orientation": [0.0, 0.0, 1.0, 1.0]},
    ]
    return IKRequest.model_validate({"targets": targets, **fields})


def test_ik_job_holds_the_targets_with_normalised_quaternions(planar3: ik_layer.Robot) -> None:
    job = ik_job(planar3, ik_request(), SETTINGS)
    half = math.sqrt(0.5)
    expected = torch.tensor([[0.5, 0.25, 0.0, 0.0, 0.0, 0.0, 1.0], [0.1, -0.2, 0.0, 0.0, 0.0, half, half]])
    torch.testing.assert_close(job.targets, expected)
    assert job.targets.dtype == torch.float32 and job.targets.device.type == "cpu"
    assert job.rows == 2 and job.warm_start is None and job.gradient is False


def test_ik_job_options_are_the_server_defaults_with_the_request_changes(planar3: ik_layer.Robot) -> None:
    assert ik_job(planar3, ik_request(), SETTINGS).options == SolveOptions(num_seeds=3, max_iterations=50)
    job = ik_job(planar3, ik_request(max_iterations=0, position_tolerance=1, check_every=2), SETTINGS)
    assert job.options == SolveOptions(num_seeds=3, max_iterations=0, position_tolerance=1.0, check_every=2)
    assert hash(job.options) == hash(SolveOptions(num_seeds=3, max_iterations=0, position_tolerance=1.0, check_every=2))


def test_ik_job_warm_starts_and_gradient_flag(planar3: ik_layer.Robot) -> None:
    job = ik_job(planar3, ik_request(warm_start=[[0.1, 0.2, 0.3], [-0.1, 0.0, 1.5]], return_gradient=True), SETTINGS)
    assert job.warm_start is not None and job.gradient is True
    torch.testing.assert_close(job.warm_start, torch.tensor([[0.1, 0.2, 0.3], [-0.1, 0.0, 1.5]]))


def test_warm_start_rows_must_have_one_value_per_joint(planar3: ik_layer.Robot) -> None:
    with pytest.raises(FieldError, match=r"warm_start\[1\] has 2 values but planar3 has 3 joints") as caught:
        ik_job(planar3, ik_request(warm_start=[[0.1, 0.2, 0.3], [0.0, 0.0]]), SETTINGS)
    assert caught.value.loc == ("body", "warm_start", 1)


def test_too_many_targets_or_configurations(planar3: ik_layer.Robot) -> None:
    request = IKRequest.model_validate({"targets": ik_request().model_dump()["targets"] * 2})
    with pytest.raises(TooManyRows, match="targets has 4 entries; this server takes at most 2"):
        ik_job(planar3, request, SETTINGS)
    with pytest.raises(TooManyRows, match="q has 3 entries"):
        fk_configurations(planar3, FKRequest(q=[[0.0, 0.0, 0.0]] * 3), SETTINGS)


def test_fk_configurations(planar3: ik_layer.Robot) -> None:
    q = fk_configurations(planar3, FKRequest(q=[[0.0, 0.5, -1.0], [1.0, 2.0, 3.0]]), SETTINGS)
    torch.testing.assert_close(q, torch.tensor([[0.0, 0.5, -1.0], [1.0, 2.0, 3.0]]))
    assert q.dtype == torch.float32
    with pytest.raises(FieldError) as caught:
        fk_configurations(planar3, FKRequest(q=[[0.0, 0.5, -1.0], [1.0]]), SETTINGS)
    assert caught.value.loc == ("body", "q", 1)
