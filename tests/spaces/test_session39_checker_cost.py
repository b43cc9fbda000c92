"""What an episode's space checkers cost to rebuild, and that rebuilt ones judge as before.

Unpickling, deep-copying or ``from_state`` gives an episode new space objects, so its checkers
are rebuilt. A big Box's checker compares arrays and keeps no Python lists of its bounds (an
84x84x3 image's would be 2 x 21k floats, built on every unpickling and held by every copy);
a small Box's compares Python numbers and needs no array reductions. Rebuilt checkers refuse
exactly what the original episode's refuse, with the same message, leaving the episode as it
was.
"""

from __future__ import annotations

import copy
import pickle
import tracemalloc
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.spaces import contains

pytestmark = pytest.mark.filterwarnings("ignore:.*Casting input x to numpy array")

F32, U8 = np.float32, np.uint8
IMAGE = gym.spaces.Box(-1.0, 1.0, (84, 84, 3), F32)
# Bounds differ per element (the numpy path's array comparisons), one of them unbounded.
RAMP_LOW = np.linspace(-3.0, 0.0, 20, dtype=F32)
RAMP_HIGH = RAMP_LOW + 2.0
RAMP_LOW[5] = -np.inf
RAMP = gym.spaces.Box(RAMP_LOW, RAMP_HIGH, (20,), F32)
INT_LIMITS = gym.spaces.Box(0, 255, (4, 5), U8)  # bounds at the dtype's limits: never violated
INT_INNER = gym.spaces.Box(np.int16(-3), np.int16(7), (5, 5), np.int16)
SMALL_INT = gym.spaces.Box(np.array([0, -2], np.int64), np.array([4, 2], np.int64), (2,), np.int64)
HALF_OPEN = gym.spaces.Box(np.array([0.0, -np.inf], F32), np.array([np.inf, 1.0], F32))
SCALAR = gym.spaces.Box(-1.0, 1.0, (), F32)
DISCRETE = gym.spaces.Discrete(3, start=-1)
MULTI = gym.spaces.MultiDiscrete([3, 4])
NESTED = gym.spaces.Dict(
    {"pos": gym.spaces.Box(-1.0, 1.0, (2,), F32), "pair": gym.spaces.Tuple((DISCRETE, SCALAR))}
)
TEXT = gym.spaces.Text(4, charset="abc")


def _filled(shape: tuple[int, ...], value: Any, dtype: Any, at: int = 0, odd: Any = None) -> Any:
    out = np.full(shape, value, dtype)
    if odd is not None:
        out.flat[at] = odd
    return out


# (space, items tried as observation and as action); each is in or out of the space.
TABLE: dict[str, tuple[gym.Space[Any], list[Any]]] = {
    "image": (
        IMAGE,
        [
            _filled((84, 84, 3), 0.5, F32),
            _filled((84, 84, 3), 0.5, F32, at=21167, odd=1.5),
            _filled((84, 84, 3), 0.5, F32, at=3, odd=np.nan),
            _filled((84, 84, 3), 0.5, np.float64),
            np.zeros((84, 84, 2), F32),
        ],
    ),
    "ramp": (
        RAMP,
        [
            RAMP_HIGH - 1.0,
            np.where(np.arange(20) == 5, -1e30, RAMP_HIGH - 1.0).astype(F32),
            np.where(np.arange(20) == 19, 5.0, RAMP_HIGH - 1.0).astype(F32),
            np.where(np.arange(20) == 0, -3.5, RAMP_HIGH - 1.0).astype(F32),
            np.full(20, np.nan, F32),
        ],
    ),
    "int_limits": (
        INT_LIMITS,
        [_filled((4, 5), 255, U8), _filled((4, 5), 0, np.int16), _filled((4, 5), 1, np.int64)],
    ),
    "int_inner": (
        INT_INNER,
        [
            _filled((5, 5), 7, np.int16),
            _filled((5, 5), 7, np.int16, at=24, odd=8),
            _filled((5, 5), 0, np.int16, at=0, odd=-4),
            _filled((5, 5), 0, np.int8),
            _filled((5, 5), 0, np.float32),
        ],
    ),
    "small_int": (
        SMALL_INT,
        [np.array([4, 2]), np.array([5, 0]), np.array([0, -3]), [1, 1], np.array([0.0, 0.0])],
    ),
    "half_open": (
        HALF_OPEN,
        [
            np.array([1e30, -1e30], F32),
            np.array([-0.1, 0.0], F32),
            np.array([0.0, 1.5], F32),
            np.array([np.inf, -np.inf], F32),
        ],
    ),
    "scalar": (SCALAR, [np.float32(1.0), 1.0 + 1e-9, 1.5, np.float64(-2.0), 1, np.array(0.5, F32)]),
    "discrete_start": (DISCRETE, [-1, 1, 2, -2, np.int64(0), np.int8(1), 0.0]),
    "multi_discrete": (MULTI, [np.array([2, 3]), np.array([3, 0]), np.array([0, -1]), [1, 1]]),
    "nested": (
        NESTED,
        [
            {"pos": np.array([0.5, -0.5], F32), "pair": (0, np.float32(0.25))},
            {"pos": np.array([0.5, -1.5], F32), "pair": (0, np.float32(0.25))},
            {"pos": np.array([0.5, 0.5], F32), "pair": (2, np.float32(0.25))},
            {"pos": np.array([0.5, 0.5], F32), "pair": (0, np.float32(2.0))},
            {"pos": np.array([0.5, 0.5], F32)},
        ],
    ),
    "text": (TEXT, ["ab", "abcd", "abd", "", "abcab"]),
}


def _episode(space: gym.Space[Any]) -> SingleAgentEpisode:
    space.seed(0)
    ep = SingleAgentEpisode(observation_space=space, action_space=space)
    ep.add_env_reset(space.sample())
    ep.add_env_step(space.sample(), space.sample(), 1.0)
    return ep.to_numpy()


def _from_state(ep: SingleAgentEpisode) -> SingleAgentEpisode:
    return SingleAgentEpisode.from_state(ep.get_state())


COPIES: dict[str, Callable[[SingleAgentEpisode], SingleAgentEpisode]] = {
    "pickle": lambda ep: pickle.loads(pickle.dumps(ep)),
    "deepcopy": copy.deepcopy,
    "from_state": _from_state,
}


def _step(ep: SingleAgentEpisode, as_action: bool, item: Any, valid: Any) -> tuple[str, str]:
    """('ok', '') or ('refused', message); a refusing episode is left as it was."""
    before = pickle.loads(pickle.dumps(ep))
    obs, action = (valid, item) if as_action else (item, valid)
    try:
        ep.add_env_step(obs, action, 1.0)
    except ValueError as err:
        assert ep == before
        return "refused", str(err)
    return "ok", ""


CASES = [
    pytest.param(name, i, as_action, how, id=f"{name}-{i}-{'act' if as_action else 'obs'}-{how}")
    for name, (_, values) in TABLE.items()
    for i in range(len(values))
    for as_action in (False, True)
    for how in COPIES
]


@pytest.mark.parametrize(("name", "index", "as_action", "how"), CASES)
def test_a_copied_episode_refuses_what_the_original_refuses(
    name: str, index: int, as_action: bool, how: str
) -> None:
    space, values = TABLE[name]
    item = values[index]
    original = _episode(space)
    copied = COPIES[how](_episode(space))
    assert copied.observation_space is not space  # its checkers were rebuilt
    valid = original.get_observations(-1)
    expected = _step(original, as_action, item, valid)
    assert _step(copied, as_action, item, valid) == expected
    if not space.contains(item):
        assert expected[0] == "refused"


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_copied_image_episode_keeps_no_lists_of_bounds(how: str) -> None:
    # A copy holds its observations and its space's bounds (about 0.47 MB here); before, it
    # also held its checker's 2 x 21168 bounds as Python floats (1.35 MB more).
    ep = _episode(IMAGE)
    COPIES[how](ep)  # warm whatever is built once
    tracemalloc.start()
    try:
        kept = [COPIES[how](ep) for _ in range(5)]
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(kept) == 5
    assert held / 5 < 800_000


@pytest.mark.parametrize(
    "space",
    [IMAGE, RAMP, INT_INNER, gym.spaces.Box(0, 255, (84, 84, 3), U8)],
    ids=["f32_image", "ramp", "int_inner", "u8_image"],
)
def test_a_big_box_checker_holds_no_python_bounds(space: gym.Box) -> None:
    check = contains.make_checker(space)
    cells = [cell.cell_contents for cell in check.__closure__ or ()]
    assert not [c for c in cells if isinstance(c, list) and c], "bounds kept as lists"
    tracemalloc.start()
    try:
        kept = contains.make_checker(space)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert kept(space.low) and held < 20_000


def test_a_space_shared_by_unpickled_episodes_builds_one_checker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    episodes = [_episode(IMAGE) for _ in range(8)]  # one space object, pickled once
    built: list[gym.Space[Any]] = []
    real = contains.make_checker

    def counting(space: gym.Space[Any]) -> Any:
        built.append(space)
        return real(space)

    monkeypatch.setattr(contains, "make_checker", counting)
    copies = pickle.loads(pickle.dumps(episodes))
    assert len(built) == 1 and built[0] is copies[0].observation_space
    assert all(c.observation_space is copies[0].observation_space for c in copies)


@pytest.mark.parametrize("shape", [(3,), (6, 6)], ids=["small", "big"])
def test_unpickled_episode_judges_by_the_bounds_it_was_pickled_with(shape: tuple[int, ...]) -> None:
    # A space changed in place after the episode was made: the unpickled episode's checker is
    # built from the bounds that travelled, as space.contains of its (unpickled) space judges.
    space = gym.spaces.Box(-1.0, 1.0, shape, F32)
    ep = _episode(space)
    space.low[...] = 0.5
    copied = pickle.loads(pickle.dumps(ep))
    valid = copied.get_observations(-1).clip(0.5)
    below = np.full(shape, 0.0, F32)
    assert copied.observation_space.contains(valid)
    assert _step(copied, False, below, valid)[0] == "refused"
    assert _step(copied, False, valid, valid) == ("ok", "")


def _closure(check: Callable[[Any], bool]) -> dict[str, Any]:
    cells = check.__closure__ or ()
    return dict(zip(check.__code__.co_freevars, (c.cell_contents for c in cells)))


INT_DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize(
    "tweak", ["at_limits", "one_low_inside", "one_high_inside", "all_inside", "last_elements"]
)
def test_a_big_int_box_skips_exactly_the_bounds_that_cannot_be_violated(
    dtype: Any, tweak: str
) -> None:
    # The flags come from max/min reductions; they must equal the element-wise any() they replace.
    info = np.iinfo(dtype)
    low, high = np.full((5, 4), info.min, dtype), np.full((5, 4), info.max, dtype)
    if tweak == "one_low_inside":
        low[2, 1] = info.min + 1
    elif tweak == "one_high_inside":
        high[0, 0] = info.max - 1
    elif tweak == "all_inside":
        low[...], high[...] = 0, 100
    elif tweak == "last_elements":
        low[-1, -1], high[-1, -1] = info.min + 3, info.max - 3
    space = gym.spaces.Box(low, high, dtype=dtype)
    flags = _closure(contains.make_checker(space))
    assert flags["check_low"] == bool(np.any(space.bounded_below) and np.any(low > info.min))
    assert flags["check_high"] == bool(np.any(space.bounded_above) and np.any(high < info.max))
    check = contains.make_checker(space)
    assert check(low) and check(high)
    if flags["check_low"]:
        below = low.copy()
        below[low > info.min] -= 1
        assert not check(below) and not space.contains(below)
    if flags["check_high"]:
        above = high.copy()
        above[high < info.max] += 1
        assert not check(above) and not space.contains(above)
