"""NaN-aware equality: tensors written in place with equal values are no mutation, and
complex values holding a NaN compare part by part (contract §6.3: NaNs only at the same places).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.structs import arrays_equal, data_equal, numbers_equal
from episodes.testing import check_does_not_mutate, outputs_equal

NAN = float("nan")


# ------------------------------------------------ check_does_not_mutate: tensors written in place
def _episode_with(value: Any) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        "e", observations=[0, 1], actions=[0], rewards=[0.0], len_lookback_buffer=0
    )
    ep.custom_data["h"] = value
    return ep


def _in_place(write: Callable[[Any], None]) -> Any:
    def connector(eps: list[SingleAgentEpisode], batch: Any) -> Any:
        for ep in eps:
            write(ep.custom_data["h"])
        return batch

    return connector


def _add_zero(h: Any) -> None:
    h += 0.0  # -0.0 becomes 0.0: equal by value


def _nan_again(h: Any) -> None:
    h[h != h] = NAN


def _write_four(h: Any) -> None:
    h[-1] = 4.0


VALUE_EQUAL_WRITES = [("add_zero", _add_zero), ("nan_rewritten", _nan_again)]


@pytest.mark.parametrize("kind", ["tensor", "numpy"])
@pytest.mark.parametrize(
    ("name", "write"), VALUE_EQUAL_WRITES, ids=[n for n, _ in VALUE_EQUAL_WRITES]
)
def test_value_equal_in_place_write_is_no_mutation(kind: str, name: str, write: Any) -> None:
    check_does_not_mutate(_in_place(write), [_episode_with(_divided(kind))])


def _divided(kind: str) -> Any:
    """``[-0.0, NaN, 3.0]``, the NaN made by 0/0 (its bits differ from ``float("nan")``'s)."""
    if kind == "tensor":
        torch = pytest.importorskip("torch")
        return torch.tensor([-0.0, 0.0, 3.0]) / torch.tensor([1.0, 0.0, 1.0])
    with np.errstate(invalid="ignore"):
        return np.float32([-0.0, 0.0, 3.0]) / np.float32([1.0, 0.0, 1.0])


@pytest.mark.parametrize("kind", ["tensor", "numpy"])
def test_in_place_value_change_names_the_field_with_both_values(kind: str) -> None:
    with pytest.raises(AssertionError) as caught:
        check_does_not_mutate(_in_place(_write_four), [_episode_with(_divided(kind))])
    message = str(caught.value)
    assert "Storage" not in message
    found = message.split("custom_data['h']: values differ:")[1]
    before, after = found.split("\nvs\n")
    assert "3." in before and "4." not in before and "4." in after


def test_write_through_a_view_is_found_on_the_tensor_sharing_its_memory() -> None:
    torch = pytest.importorskip("torch")
    base = torch.tensor([1.0, 2.0, 3.0])
    ep = _episode_with(base)
    ep.custom_data["view"] = base[1:]

    def connector(eps: list[SingleAgentEpisode], batch: Any) -> Any:
        eps[0].custom_data["view"][0] = 9.0
        return batch

    with pytest.raises(AssertionError, match=r"custom_data\['h'\]: values differ"):
        check_does_not_mutate(connector, [ep])
    check_does_not_mutate(lambda eps, batch: batch, [ep])  # untouched: no change


# ------------------------------------------------------------- complex values holding a NaN
COMPLEX_CASES = [
    ("same_nan_imag", complex(1, NAN), complex(1, NAN), True),
    ("other_real_nan_imag", complex(1, NAN), complex(2, NAN), False),
    ("other_imag_nan_real", complex(NAN, 1), complex(NAN, 2), False),
    ("nan_in_other_part", complex(NAN, 1), complex(1, NAN), False),
    ("both_parts_nan", complex(NAN, NAN), complex(NAN, NAN), True),
    ("float_nan_vs_complex_nan_zero", NAN, complex(NAN, 0), True),
    ("float_nan_vs_complex_nan_one", NAN, complex(NAN, 1), False),
    ("int_vs_complex", 1, complex(1, 0), True),
]
IDS = [c[0] for c in COMPLEX_CASES]


@pytest.mark.parametrize(("name", "a", "b", "equal"), COMPLEX_CASES, ids=IDS)
def test_python_numbers(name: str, a: Any, b: Any, equal: bool) -> None:
    assert numbers_equal(a, b) is equal and numbers_equal(b, a) is equal
    assert data_equal(a, b) is equal and data_equal(b, a) is equal
    assert outputs_equal(a, b) is equal


@pytest.mark.parametrize(("name", "a", "b", "equal"), COMPLEX_CASES, ids=IDS)
def test_arrays_and_numpy_scalars(name: str, a: Any, b: Any, equal: bool) -> None:
    x, y = np.array([a, 0j]), np.array([b, 0j])  # complex128 both
    assert arrays_equal(x, y) is equal and data_equal(x, y) is equal
    assert data_equal(x[0], y[0]) is equal  # np.complex128 scalars
    assert data_equal(x.astype(object), y.astype(object)) is equal
    assert outputs_equal({"o": x}, {"o": y}) is equal


@pytest.mark.parametrize(("name", "a", "b", "equal"), COMPLEX_CASES, ids=IDS)
def test_tensors(name: str, a: Any, b: Any, equal: bool) -> None:
    torch = pytest.importorskip("torch")
    x, y = torch.tensor([complex(a), 0j]), torch.tensor([complex(b), 0j])
    assert data_equal(x, y) is equal
    assert data_equal(x, y.numpy()) is equal  # a tensor against an array
    assert outputs_equal(x, y) is equal


def test_float_arrays_keep_nan_equality() -> None:
    a = np.array([1.0, NAN, -0.0])
    assert arrays_equal(a, np.array([1.0, NAN, 0.0])) and data_equal(a, a.copy())
    assert not arrays_equal(a, np.array([NAN, 1.0, 0.0]))


def test_episodes_with_different_complex_observations_differ() -> None:
    def make(first: complex) -> SingleAgentEpisode:
        return SingleAgentEpisode(
            "a", observations=[first, 0j], actions=[0], rewards=[0.0], len_lookback_buffer=0
        )

    assert make(complex(1, NAN)) != make(complex(2, NAN))
    assert make(complex(1, NAN)) == make(complex(1, NAN))


def test_concat_refuses_a_successor_whose_complex_nan_observation_differs() -> None:
    ep = SingleAgentEpisode(
        "x", observations=[0j, complex(1, NAN)], actions=[0], rewards=[0.0],
        len_lookback_buffer=0,
    )  # fmt: skip
    successor = SingleAgentEpisode(
        "x", observations=[complex(5, NAN), 1j], actions=[0], rewards=[0.0], t_started=1,
        len_lookback_buffer=0,
    )  # fmt: skip
    with pytest.raises(AssertionError, match="first observation differs"):
        ep.concat_episode(successor)
    assert data_equal(ep.get_observations(), [0j, complex(1, NAN)])
