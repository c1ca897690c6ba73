"""Admission alone: how an engine's slots are shared between requests (limits, progress, fairness, light load)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ik_layer import OPTION_SPECS
from ik_layer.server.admission import MAX_SEEDS, SHARE, AdmissionPolicy, Demand, smallest_capacity
from ik_layer.server.settings import Settings


def test_the_limits_derive_from_capacity_share_and_the_largest_num_seeds() -> None:
    assert MAX_SEEDS == OPTION_SPECS["num_seeds"].maximum == 64 and SHARE == 4
    assert smallest_capacity() == 256 and smallest_capacity(max_seeds=128) == 512 and smallest_capacity(3, 5) == 15
    served = AdmissionPolicy(capacity=4096)  # the server's default pool
    assert (served.request_limit, served.light_load, served.blocks(0)) == (1024, 64, 4)
    for capacity, max_seeds, share in [(256, 64, 4), (257, 64, 4), (4096, 64, 4), (512, 128, 4), (8, 2, 4), (7, 7, 1)]:
        policy = AdmissionPolicy(capacity=capacity, max_seeds=max_seeds, share=share)
        assert policy.request_limit == capacity // share
        assert policy.light_load == max_seeds <= policy.request_limit <= capacity


def test_settings_take_their_smallest_pool_from_the_policy() -> None:
    assert Settings(max_slots=smallest_capacity()).max_slots == 256
    with pytest.raises(ValidationError, match="greater than or equal to 256"):
        Settings(max_slots=smallest_capacity() - 1)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"capacity": 255}, "255 slots cannot give each of 4 requests one row of num_seeds=64 .* at least 256 slots"),
        ({"capacity": 256, "max_seeds": 128}, "at least 512 slots"),  # num_seeds' bound raised: the pool must grow
        ({"capacity": 16, "share": 3, "max_seeds": 6}, "at least 18 slots"),
        ({"capacity": 0}, "capacity must be a positive integer, got 0"),
        ({"capacity": 256, "share": 0}, "share must be a positive integer"),
        ({"capacity": 256, "light_blocks": True}, "light_blocks must be a positive integer, got True"),
        ({"capacity": 256.0}, "capacity must be a positive integer, got 256.0"),
    ],
)
def test_settings_that_cannot_work_are_refused_when_built(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AdmissionPolicy(**fields)


@pytest.mark.parametrize("seeds", [0, 65])
def test_a_request_wider_than_the_policy_is_refused_not_starved(seeds: int) -> None:
    policy = AdmissionPolicy(capacity=256)
    with pytest.raises(ValueError, match=rf"num_seeds={seeds} is outside this policy's \[1, 64\]"):
        policy.allot([Demand(rows=1, seeds=seeds, claimed=0)], claimed=0)


def test_a_lone_request_of_any_num_seeds_always_gets_a_row() -> None:
    for capacity, max_seeds in [(256, 64), (300, 64), (8, 2), (512, 128)]:
        policy = AdmissionPolicy(capacity=capacity, max_seeds=max_seeds)
        for seeds in range(1, max_seeds + 1):
            (rows,) = policy.allot([Demand(rows=10_000, seeds=seeds, claimed=0)], claimed=0)
            assert rows == policy.request_limit // seeds >= 1


def run_to_completion(policy: AdmissionPolicy, requests: list[tuple[int, int]]) -> list[list[int]]:
    """Rows handed to each ``(rows, seeds)`` request per round, every part finishing within the round it started."""
    left = [rows for rows, _ in requests]
    rounds = []
    while any(left):
        given = policy.allot([Demand(n, seeds, 0) for n, (_, seeds) in zip(left, requests, strict=True)], claimed=0)
        assert any(given), "no request made progress"
        assert sum(g * seeds for g, (_, seeds) in zip(given, requests, strict=True)) <= policy.capacity
        left = [n - g for n, g in zip(left, given, strict=True)]
        rounds.append(given)
    return rounds


def test_requests_progress_in_the_smallest_pool() -> None:
    policy = AdmissionPolicy(capacity=smallest_capacity())  # 256 slots: one row of 64 seeds per request
    rounds = run_to_completion(policy, [(3, 64)] * 5)
    assert rounds == [[1, 1, 1, 1, 0]] * 3 + [[0, 0, 0, 0, 1]] * 3  # the fifth finds room once the first four are done
    tiny = AdmissionPolicy(capacity=8, max_seeds=2)  # 2 slots per request
    assert run_to_completion(tiny, [(3, 2), (2, 1)]) == [[1, 2], [1, 0], [1, 0]]


def test_a_request_never_claims_more_than_its_share_nor_the_free_slots() -> None:
    policy = AdmissionPolicy(capacity=1000)  # limit 250
    assert policy.allot([Demand(rows=1000, seeds=3, claimed=0)], claimed=0) == [83]  # 249 slots, not 252
    assert policy.allot([Demand(rows=1000, seeds=3, claimed=200)], claimed=200) == [16]  # up to 248 of 250
    assert policy.allot([Demand(rows=1000, seeds=3, claimed=250)], claimed=250) == [0]  # at its limit
    assert policy.allot([Demand(rows=1000, seeds=3, claimed=0)], claimed=990) == [3]  # 10 slots free: 9 taken
    assert policy.allot([Demand(rows=1000, seeds=3, claimed=0)], claimed=1000) == [0]  # the pool is full
    assert policy.allot([Demand(rows=2, seeds=64, claimed=0)], claimed=0) == [2]  # no more rows than it has


def test_two_requests_share_the_pool_oldest_first() -> None:
    policy = AdmissionPolicy(capacity=4096)
    older, newer = Demand(rows=1000, seeds=8, claimed=0), Demand(rows=1000, seeds=8, claimed=0)
    assert policy.allot([older, newer], claimed=0) == [128, 128]  # each its limit, 1024 slots
    busy = Demand(rows=1000, seeds=8, claimed=1024)  # the older one is at its limit: the newer one still gets room
    assert policy.allot([busy, newer], claimed=1024 + 3000) == [0, 9]  # 72 of the 72 free slots
    assert policy.allot([older, newer], claimed=4096 - 100) == [12, 0]  # scarce room goes to the older one first
    wide, narrow = Demand(rows=10, seeds=64, claimed=0), Demand(rows=1000, seeds=1, claimed=0)
    assert policy.allot([wide, narrow], claimed=0) == [10, 1000]  # 640 + 1000 slots: both whole


def test_steps_are_longer_under_a_light_load() -> None:
    policy = AdmissionPolicy(capacity=4096)
    assert [policy.blocks(claimed) for claimed in (0, 1, 64, 65, 4096)] == [4, 4, 4, 1, 1]
    wider = AdmissionPolicy(capacity=4096, max_seeds=128, light_blocks=2)  # one row of the widest request
    assert [wider.blocks(claimed) for claimed in (128, 129)] == [2, 1]
