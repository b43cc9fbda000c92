"""Dataclasses whose ``==`` raises (one holding an array) compare by their fields.

Before, such an object was unequal even to its own copy: ``check_does_not_mutate`` reported a
no-op connector as changing ``custom_data`` or an info, and ``check_deterministic`` reported a
connector returning one as not deterministic.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.structs import data_equal
from episodes.testing import ConnectorContractError, check_deterministic, check_does_not_mutate


@dataclasses.dataclass
class Stats:
    mean: np.ndarray


@dataclasses.dataclass
class Other:
    mean: np.ndarray


@dataclasses.dataclass(eq=False)
class NoEq:
    mean: np.ndarray
    hidden: int

    def __eq__(self, other: object) -> bool:
        return bool((self.mean == other.mean) and self.hidden == other.hidden)  # type: ignore[attr-defined]


@dataclasses.dataclass
class Loose:
    mean: np.ndarray
    seen: int = dataclasses.field(compare=False)


@dataclasses.dataclass
class Lazy:
    mean: np.ndarray
    cache: int = dataclasses.field(init=False)


class Plain:
    def __init__(self, mean: np.ndarray) -> None:
        self.mean = mean

    def __eq__(self, other: object) -> bool:
        return bool(self.__dict__ == getattr(other, "__dict__", None))  # raises for arrays

    __hash__ = None  # type: ignore[assignment]


CASES = {  # name -> (a, b, equal)
    "dataclass copies": (Stats(np.zeros(2)), Stats(np.zeros(2)), True),
    "dataclass, NaN at the same place": (
        Stats(np.array([np.nan, 0.0])),
        Stats(np.array([np.nan, 0.0])),
        True,
    ),
    "dataclass, other values": (Stats(np.zeros(2)), Stats(np.ones(2)), False),
    "dataclass, other dtype": (Stats(np.zeros(2)), Stats(np.zeros(2, np.float32)), False),
    "other classes, same fields": (Stats(np.zeros(2)), Other(np.zeros(2)), False),
    "a plain class whose == raises: its state may hide": (
        Plain(np.zeros(2)),
        Plain(np.zeros(2)),
        False,
    ),
    "a dataclass without a generated ==": (NoEq(np.zeros(2), 1), NoEq(np.zeros(2), 2), False),
    "a field left out of the comparison": (Loose(np.zeros(2), 1), Loose(np.zeros(2), 2), True),
    "a plain class, other values": (Plain(np.zeros(2)), Plain(np.ones(2)), False),
}


@pytest.mark.parametrize("a, b, equal", CASES.values(), ids=CASES.keys())
def test_data_equal_compares_attributes_where_eq_raises(a, b, equal) -> None:
    assert data_equal(a, b) is equal
    assert data_equal({"x": [a]}, {"x": [b]}) is equal


def test_an_unset_field_or_an_object_holding_itself_is_unequal_not_a_crash() -> None:
    assert data_equal(Lazy(np.zeros(2)), Lazy(np.zeros(2))) is False
    a, b = Stats(np.zeros(2)), Stats(np.zeros(2))
    a.mean, b.mean = [a, np.zeros(2)], [b, np.zeros(2)]  # type: ignore[assignment]
    assert data_equal(a, b) in (True, False)


def _episode(where: str) -> SingleAgentEpisode:
    infos = [{"stats": Stats(np.zeros(2))} for _ in range(2)] if where == "infos" else None
    ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0], infos=infos)
    if where == "custom_data":
        ep.custom_data["stats"] = Stats(np.zeros(2))
    return ep


@pytest.mark.parametrize("where", ["custom_data", "infos"])
def test_a_connector_that_touches_nothing_does_not_mutate(where) -> None:
    check_does_not_mutate(lambda episodes, batch: dict(batch), [_episode(where)])


def test_a_change_inside_the_dataclass_is_still_found() -> None:
    def bump(episodes, batch):
        episodes[0].custom_data["stats"].mean += 1.0
        return dict(batch)

    with pytest.raises(ConnectorContractError, match="custom_data"):
        check_does_not_mutate(bump, [_episode("custom_data")])


def test_a_connector_returning_such_an_object_is_deterministic() -> None:
    check_deterministic(lambda episodes, batch: {"s": Stats(np.zeros(2))}, [_episode("none")])
    with pytest.raises(ConnectorContractError):
        check_deterministic(
            lambda episodes, batch: {"s": Stats(np.random.default_rng().random(2))},
            [_episode("none")],
        )
