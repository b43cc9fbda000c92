"""Session 17 fixes of episodes.distributed: a num_steps no runner could allocate is refused on
the driver (never a lost sample), timeouts beyond what Ray's waits take mean no limit (no
OverflowError after a request started), an actor start that fails in any way kills the actors,
and a factory or config that cannot be pickled is a plain TypeError before write_to exists."""

from __future__ import annotations

import functools
import sys
import threading

import pytest
from gymnasium.spaces import Box, Dict, Discrete, Text, Tuple

ray = pytest.importorskip("ray")

from episodes.distributed import RunnerGroup  # noqa: E402
from episodes.distributed.checks import check_picklable, check_timeout  # noqa: E402
from episodes.distributed.slots import start_actors  # noqa: E402
from episodes.distributed.steps import check_num_steps, least_step_bytes  # noqa: E402
from tests.distributed._envs import cartpole, random_policy  # noqa: E402

LOCK = threading.Lock()


# ------------------------------------------------------------------- pure helpers (no Ray)
@pytest.mark.parametrize(
    "value, expected",
    [
        (5, 5.0),
        (0, 0.0),
        (1e8, 1e8),
        (None, None),
        (float("inf"), None),
        (1e9, None),  # NO_LIMIT_S: about 31 years
        (1e16, None),  # Ray's waits overflow above about 9.2e15 s
        (sys.float_info.max, None),
        (10**400, None),  # beyond floats: no OverflowError
    ],
    ids=["five", "zero", "1e8", "none", "inf", "1e9", "1e16", "float-max", "huge-int"],
)
def test_check_timeout_caps_what_ray_cannot_wait(value, expected):
    assert check_timeout(value, "timeout_s") == expected


@pytest.mark.parametrize("value", [-1, float("nan"), True, "5"], ids=["neg", "nan", "bool", "str"])
def test_check_timeout_still_refuses(value):
    with pytest.raises(ValueError, match="timeout_s"):
        check_timeout(value, "timeout_s")


@pytest.mark.parametrize(
    "obs, act, expected",
    [
        (Box(0, 1, (4,)), Discrete(2), 4 + 1 + 3),
        (
            Dict({"a": Box(0, 1, (2, 3)), "b": Discrete(4)}),
            Tuple((Discrete(2), Box(0, 1, (2,)))),
            6 + 1 + 3 + 3,
        ),
        (Text(5), Discrete(2), 0 + 1 + 3),  # no fixed size: counted 0
    ],
    ids=["cartpole", "nested", "text"],
)
def test_least_step_bytes(obs, act, expected):
    assert least_step_bytes(obs, act) == expected


@pytest.mark.parametrize(
    "num_steps, memory",
    [(2**40, 2**36), (2**70, None), (2**61, None)],
    ids=["beyond-memory", "beyond-arrays", "beyond-arrays-times-envs"],
)
def test_check_num_steps_refuses_what_no_runner_allocates(num_steps, memory):
    with pytest.raises(ValueError, match=rf"num_steps={num_steps}: too many steps"):
        check_num_steps(num_steps, 1, num_envs=2, step_bytes=8, memory=memory)


def test_check_num_steps_takes_what_fits_and_keeps_the_least():
    assert check_num_steps(1000, 1, num_envs=2, step_bytes=8, memory=2**20) == 1000
    with pytest.raises(ValueError, match="num_steps must be an int >= 2"):
        check_num_steps(1, 2, num_envs=2, step_bytes=8, memory=None)


def test_check_picklable_names_the_argument_without_colour_codes():
    with pytest.raises(TypeError, match=r"^config cannot be pickled") as info:
        check_picklable({"env_factory": cartpole, "config": {"lock": LOCK}})
    assert "\x1b[" not in str(info.value) and "_thread.lock" in str(info.value)
    check_picklable({"env_factory": functools.partial(cartpole), "config": {"n": 1}})


class _FakeRay:
    """A ``ray`` whose ``get`` raises a non-Ray error; records the kills."""

    class exceptions:  # noqa: N801 - ray.exceptions
        GetTimeoutError = type("GetTimeoutError", (Exception,), {})
        RayError = type("RayError", (Exception,), {})

    def __init__(self):
        self.killed = []

    def get(self, refs, timeout=None):
        raise OverflowError("timeout too large")

    def kill(self, handle):
        self.killed.append(handle)


class _Handle:
    class info:  # noqa: N801 - handle.info.remote()
        @staticmethod
        def remote():
            return "ref"


def test_start_actors_kills_every_actor_on_any_error():
    fake, handles = _FakeRay(), [_Handle(), _Handle()]
    with pytest.raises(OverflowError):
        start_actors(fake, handles, 1.0, "2 x 1.0")
    assert fake.killed == handles


# ------------------------------------------------------------------------------- on Ray
def test_group_refuses_a_huge_num_steps_before_any_request(ray_local):
    group = RunnerGroup(
        cartpole,
        random_policy,
        num_runners=1,
        seed=0,
        config={"num_envs": 2},
        num_cpus_per_runner=0.5,
        start_timeout_s=sys.float_info.max,  # no OverflowError: no limit
    )
    try:
        for _ in range(3):  # three refusals: never "failed 3 times in a row"
            with pytest.raises(ValueError, match=r"num_steps=1099511627776: too many steps"):
                group.sample(2**40)
            with pytest.raises(ValueError, match=r"num_steps=1180591620717411303424"):
                group.sample_async(2**70)
        assert group.num_in_flight == 0 and group.generations == [0]
        metrics = group.get_metrics()
        assert metrics["num_lost_samples"] == 0 and metrics["num_restarts"] == 0
        out = group.sample_async(4, timeout_s=1e16)  # waits without a limit, no OverflowError
        assert len(out.samples) == 1 and out.env_steps == 8
        assert group.sample(4).env_steps == 8
    finally:
        group.stop()


def test_unpicklable_factory_is_a_type_error_before_write_to(ray_local, tmp_path):
    path = tmp_path / "data"

    def make_env(ctx, _lock=LOCK):  # captures a lock: cannot be pickled
        return cartpole(ctx)

    with pytest.raises(TypeError, match=r"^env_factory cannot be pickled") as info:
        RunnerGroup(make_env, random_policy, num_runners=1, write_to=path)
    assert "\x1b[" not in str(info.value)
    with pytest.raises(TypeError, match=r"^config cannot be pickled"):
        RunnerGroup(cartpole, random_policy, num_runners=1, config={"l": LOCK}, write_to=path)
    assert not path.exists()
