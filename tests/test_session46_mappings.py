"""Mappings that are no dict (a TensorDict, a ``UserDict``) where items and outputs nest dicts.

A TorchRL user hands TensorDicts around. A TensorDict is a ``MutableMapping`` whose ``len`` is
its batch size and whose iteration yields rows (it raises for batch size ``[]``), with
``batch_size``, ``detach`` and ``cpu``: the runner took one for a torch tensor and recorded an
empty ``(rows, 0)`` column, dm-tree crashed the process (a segfault) walking two of them, and the
replay buffer read a ``UserDict``'s keys as strings. Each is now refused, naming where it was
and asking for ``dict(...)``. ``_TensorDictLike`` mimics those traits (tensordict is no
dependency); ``pytest.importorskip("tensordict")`` runs the real one where it is installed.
Also: swapped ``update_priorities`` arguments name the tensor's own dtype, and
``TorchCartPole`` refuses a device that is not there with a ``DeviceError``.
"""

from __future__ import annotations

import collections
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer
from episodes.runner import EnvRunner
from episodes.spaces import batch

torch = pytest.importorskip("torch")

from episodes.envs.torch_cartpole import TorchCartPole  # noqa: E402
from episodes.errors import DeviceError  # noqa: E402
from episodes.replay import PrioritizedEpisodeReplayBuffer  # noqa: E402
from tests._mapping_kinds import ReadOnlyMapping  # noqa: E402

N = 3


_Groups = ReadOnlyMapping


class _TensorDictLike(MutableMapping):  # type: ignore[type-arg]
    """What makes a TensorDict special: ``len`` is its batch size, iteration yields its rows
    (and raises for batch size ``[]``), ``keys`` names its entries, and it has ``shape``,
    ``batch_size``, ``detach`` and ``cpu`` as a tensor has."""

    def __init__(self, entries: dict[str, Any], batch_size: tuple[int, ...]):
        self._entries, self.batch_size = dict(entries), tuple(batch_size)
        self.shape = self.batch_size

    def __getitem__(self, key: Any) -> Any:
        return self._entries[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._entries[key] = value

    def __delitem__(self, key: str) -> None:
        del self._entries[key]

    def __len__(self) -> int:
        return self.batch_size[0] if self.batch_size else 0

    def __iter__(self) -> Iterator[Any]:
        if not self.batch_size:
            raise TypeError("iteration over a 0-d tensordict: use keys(), values() or items()")
        for i in range(self.batch_size[0]):
            yield _TensorDictLike({k: v[i] for k, v in self._entries.items()}, ())

    def keys(self) -> Any:  # type: ignore[override]
        return self._entries.keys()

    def values(self) -> Any:  # type: ignore[override]
        return self._entries.values()

    def items(self) -> Any:  # type: ignore[override]
        return self._entries.items()

    def detach(self) -> _TensorDictLike:
        return self

    def cpu(self) -> _TensorDictLike:
        return self


def _tensordict(entries: dict[str, Any], batch_size: tuple[int, ...]) -> Any:
    tensordict = pytest.importorskip("tensordict")
    return tensordict.TensorDict(entries, batch_size=list(batch_size))


# Each makes a batch of N rows under "loc", as a policy output.
OUTPUT_MAPPINGS = {
    "abc.Mapping": lambda loc: _Groups(loc=loc),
    "MappingProxyType": lambda loc: types.MappingProxyType({"loc": loc}),
    "TensorDict-like": lambda loc: _TensorDictLike({"loc": loc}, (N,)),
    "TensorDict": lambda loc: _tensordict({"loc": loc}, (N,)),
}


def _numpy_env() -> Any:
    return gym.make_vec("CartPole-v1", num_envs=N, vectorization_mode="sync")


def _torch_env() -> Any:
    return TorchCartPole(N, autoreset_mode="SameStep")


ENVS = {"numpy env": _numpy_env, "torch env": _torch_env}


class _SwitchingPolicy:
    """Plain outputs, or (while ``wrap`` is set) actions or an extra output wrapped by it."""

    def __init__(self, torch_env: bool, where: str):
        self.torch_env, self.where, self.wrap = torch_env, where, None
        self.calls = 0

    def __call__(self, obs: Any) -> Any:
        self.calls += 1
        if self.torch_env:
            actions: Any = torch.ones(N, dtype=torch.long)
            loc = torch.arange(N * 2, dtype=torch.float32).reshape(N, 2)
        else:
            actions, loc = np.ones(N, np.int64), np.arange(N * 2, dtype=np.float32).reshape(N, 2)
        extras = {"dist": {"loc": loc}}
        if self.wrap is not None and self.where == "actions":
            actions = self.wrap(actions)
        elif self.wrap is not None:
            extras = {"dist": self.wrap(loc)}
        return actions, extras


def _observations(chunks: Any) -> list[list[float]]:
    return [np.asarray(c.get_observations()).round(6).tolist() for c in chunks]


@pytest.mark.parametrize("where", ["actions", "extra output 'dist'"])
@pytest.mark.parametrize("env_name", ENVS)
@pytest.mark.parametrize("wrap_name", OUTPUT_MAPPINGS)
def test_a_policy_output_that_is_a_mapping_but_no_dict_is_refused_before_the_env_steps(
    wrap_name: str, env_name: str, where: str
) -> None:
    wrap = OUTPUT_MAPPINGS[wrap_name]
    policy = _SwitchingPolicy(env_name == "torch env", where)
    policy.wrap = wrap
    if wrap_name == "TensorDict":
        wrap(torch.zeros(N))  # skips here without tensordict
        policy.wrap = lambda v: wrap(torch.as_tensor(v))  # it holds tensors (a numpy env's too)
    runner = EnvRunner(ENVS[env_name](), policy, seed=0)
    with pytest.raises(TypeError, match=rf"the policy's {where}: got a \w+, a mapping .*dict\("):
        runner.sample(2)
    # Refused at the call's first step: the runner was left as it was (unstarted), so it
    # records what a fresh runner of the same seed records.
    policy.wrap = None
    fresh = EnvRunner(ENVS[env_name](), _SwitchingPolicy(env_name == "torch env", where), seed=0)
    assert _observations(runner.sample(2)) == _observations(fresh.sample(2))


@pytest.mark.parametrize("where", ["actions", "extra output 'dist'"])
@pytest.mark.parametrize("env_name", ENVS)
def test_such_an_output_at_a_later_calls_first_step_leaves_the_runner_usable(
    env_name: str, where: str
) -> None:
    policy = _SwitchingPolicy(env_name == "torch env", where)
    runner = EnvRunner(ENVS[env_name](), policy, seed=0)
    runner.sample(2)
    policy.wrap = OUTPUT_MAPPINGS["TensorDict-like"]
    with pytest.raises(TypeError, match=rf"the policy's {where}: got a _TensorDictLike"):
        runner.sample(2)
    policy.wrap = None  # the refused call left no trace: the next one goes on from the first
    fresh = EnvRunner(ENVS[env_name](), _SwitchingPolicy(env_name == "torch env", where), seed=0)
    fresh.sample(2)
    assert _observations(runner.sample(2)) == _observations(fresh.sample(2))


LATER_OUTPUTS = {
    "TensorDict-like extra output": (
        "extra output 'logp'",
        lambda logp: _TensorDictLike({"x": logp}, (N,)),
    ),
    "TensorDict-like of another shape": (
        "extra output 'logp'",
        lambda logp: _TensorDictLike({"x": logp}, ()),
    ),
    "MappingProxyType extra output": (
        "extra output 'logp'",
        lambda logp: types.MappingProxyType({"x": logp}),
    ),
    "TensorDict-like actions": ("actions", None),
}


@pytest.mark.parametrize("env_name", ENVS)
@pytest.mark.parametrize("case", LATER_OUTPUTS)
def test_a_mapping_output_later_in_a_call_is_named_not_recorded_as_no_values(
    case: str, env_name: str
) -> None:
    # A numpy env's outputs went through host_array, which took anything with .detach and .cpu
    # for a torch tensor (a TensorDict whose batch size matches passed the shape check); a torch
    # env's through torch.as_tensor, which makes a TensorDict a (rows, 0) tensor.
    where, make = LATER_OUTPUTS[case]
    torch_env = env_name == "torch env"
    state = {"step": 0}

    def policy(obs: Any) -> Any:
        state["step"] += 1
        logp = torch.full((N,), -0.5) if torch_env else np.full(N, -0.5, np.float32)
        actions = torch.zeros(N, dtype=torch.long) if torch_env else np.zeros(N, np.int64)
        if state["step"] < 2:
            return actions, {"logp": logp}
        if make is None:
            return _TensorDictLike({"action": actions}, (N,)), {"logp": logp}
        return actions, {"logp": make(logp)}

    runner = EnvRunner(ENVS[env_name](), policy, seed=0)
    shown = "mappingproxy" if "MappingProxy" in case else "_TensorDictLike"
    with pytest.raises(TypeError, match=rf"the policy's {where}: got a {shown}"):
        runner.sample(3)


# --- batch / to_numpy: a mapping that is no dict is refused before dm-tree walks it --------

ITEM_MAPPINGS = {
    "UserDict": collections.UserDict,
    "MappingProxyType": types.MappingProxyType,
    "abc.Mapping": lambda d: _Groups(**d),
}


@pytest.mark.parametrize("at", ["top", "nested in a dict", "in a tuple"])
@pytest.mark.parametrize("name", ITEM_MAPPINGS)
def test_batch_names_a_mapping_that_is_no_dict_in_the_first_item(name: str, at: str) -> None:
    make = ITEM_MAPPINGS[name]

    def item(t: int) -> Any:
        inner = make({"a": np.full(2, float(t))})
        return {"top": inner, "nested in a dict": {"o": inner}, "in a tuple": (1.0, inner)}[at]

    shown = type(make({})).__name__
    with pytest.raises(
        ValueError, match=rf"item 0 holds a {shown}, a Mapping that is no dict.*dict\(item\)"
    ):
        batch([item(t) for t in range(3)])


def test_batch_names_a_tensordict_like_item_after_a_dict() -> None:
    # dm-tree takes a dict and another mapping of the same keys alike (a UserDict after a dict
    # stacks); one whose iteration raises is a TypeError there, named here.
    items = [{"a": np.zeros(2)}, _TensorDictLike({"a": np.ones(2)}, ())]
    with pytest.raises(ValueError, match=r"^an item holds a _TensorDictLike, a Mapping that is no"):
        batch(items)


def test_dicts_and_their_subclasses_still_batch() -> None:
    items = [collections.OrderedDict(a=np.full(2, t), b=(t, [t, t])) for t in range(3)]
    out = batch(items)
    assert out["a"].tolist() == [[0, 0], [1, 1], [2, 2]]
    assert out["b"][0].tolist() == [0, 1, 2]


_CRASH_CHECK = textwrap.dedent(
    """
    import sys
    sys.path[:0] = {paths!r}
    import numpy as np
    from test_session46_mappings import _TensorDictLike
    from episodes import SingleAgentEpisode
    from episodes.converter import episodes_to_batch
    from episodes.replay import EpisodeReplayBuffer
    from episodes.spaces import batch

    def episode():
        rows = [_TensorDictLike({{"state": np.full(3, float(t))}}, ()) for t in range(4)]
        return SingleAgentEpisode("x", observations=rows, actions=[0] * 3, rewards=[1.0] * 3,
                                  len_lookback_buffer=0)

    calls = {{
        "batch": lambda: batch([_TensorDictLike({{"s": np.zeros(2)}}, ()) for _ in range(2)]),
        "to_numpy": lambda: episode().to_numpy(),
        "get_sample_batch": lambda: episode().get_sample_batch(),
        "episodes_to_batch": lambda: episodes_to_batch([episode()]),
        "add": lambda: EpisodeReplayBuffer(10).add(episode()),
    }}
    for name, call in calls.items():
        try:
            call()
            print(name, "ACCEPTED")
        except (TypeError, ValueError) as error:
            print(name, type(error).__name__, str(error).replace(chr(10), " "))
    """
)


def test_items_walked_as_a_tensordict_walks_are_refused_not_a_crash() -> None:
    # dm-tree crashed the process (SIGSEGV) on two such items: run in a child process.
    paths = [str(Path(__file__).parent), *sys.path]
    done = subprocess.run(
        [sys.executable, "-c", _CRASH_CHECK.format(paths=paths)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    words = "holds a _TensorDictLike, a Mapping that is no dict"
    assert words in said["batch"] and said["batch"].startswith("ValueError item 0")
    assert words in said["to_numpy"] and "observations" in said["to_numpy"]
    # Both name the column, and the mapping rather than numpy's words for it.
    assert said["get_sample_batch"].startswith("ValueError SampleBatch column 'obs': ")
    assert f"item 0 {words}" in said["get_sample_batch"]
    chunk = "observations of the chunk of episode 'x' starting at t=0"
    assert said["episodes_to_batch"] == f"ValueError {chunk}: item 0 {words}: items nest " + (
        "dicts, tuples and lists (as a Dict space's items are dicts); give dict(item)"
    )
    assert said["add"] == f"TypeError chunk 0 (episode 'x'): observations {words}: items nest " + (
        "dicts, tuples and lists (as a Dict space's items are dicts); give dict(item)"
    )


def test_a_real_tensordict_observation_is_refused_not_a_crash() -> None:
    pytest.importorskip("tensordict")
    code = textwrap.dedent(
        """
        import torch
        from tensordict import TensorDict
        from episodes import SingleAgentEpisode
        rows = [TensorDict({"s": torch.full((3,), float(t))}, batch_size=[]) for t in range(3)]
        e = SingleAgentEpisode("x", observations=rows, actions=[0, 0], rewards=[1.0, 1.0],
                               len_lookback_buffer=0)
        try:
            e.to_numpy()
        except ValueError as error:
            print(error)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "holds a TensorDict, a Mapping that is no dict" in done.stdout


# --- the replay buffer: the column named, the buffer unchanged ----------------------------


@pytest.mark.parametrize("column", ["observations", "actions", "extra_model_outputs['dist']"])
@pytest.mark.parametrize("name", ITEM_MAPPINGS)
def test_add_names_the_column_holding_a_mapping_that_is_no_dict(name: str, column: str) -> None:
    make = ITEM_MAPPINGS[name]
    obs: list[Any] = [{"state": np.full(3, t, np.float32)} for t in range(4)]
    actions: list[Any] = [0, 1, 0]
    extras: dict[str, list[Any]] = {"dist": [np.zeros(2, np.float32)] * 3}
    if column == "observations":
        obs = [make(o) for o in obs]
    elif column == "actions":
        actions = [make({"a": a}) for a in actions]
    else:
        extras = {"dist": [make({"loc": v}) for v in extras["dist"]]}
    episode = SingleAgentEpisode(
        "x",
        observations=obs,
        actions=actions,
        rewards=[1.0] * 3,
        extra_model_outputs=extras,
        len_lookback_buffer=0,
    )
    buffer = EpisodeReplayBuffer(10)
    shown = type(make({})).__name__
    pattern = rf"chunk 0 \(episode 'x'\): {column} holds a {shown}, a Mapping that is no dict"
    with pytest.raises(TypeError, match=pattern.replace("[", r"\[").replace("]", r"\]")):
        buffer.add(episode)
    assert buffer.get_num_timesteps() == 0 and buffer.get_num_episodes() == 0


# --- update_priorities with its arguments swapped -----------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_swapped_update_priorities_names_the_tensors_own_dtype(dtype: Any) -> None:
    episode = SingleAgentEpisode(
        "t",
        observations=[np.full(3, t, np.float32) for t in range(6)],
        actions=[0, 1, 0, 1, 0],
        rewards=[1.0] * 5,
        terminated=True,
        len_lookback_buffer=0,
    )
    buffer = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buffer.add(episode)
    sampled = buffer.sample(4, device="cpu")
    before = buffer.get_priorities(np.arange(5))
    with pytest.raises(
        ValueError,
        match=rf"indices must be integers, got dtype {dtype}: update_priorities takes the "
        "priorities first",
    ):
        buffer.update_priorities(sampled["indices"], torch.rand(4).to(dtype))
    np.testing.assert_array_equal(buffer.get_priorities(np.arange(5)), before)


# --- TorchCartPole's device --------------------------------------------------------------

DEVICES = {
    "cuda (none here)": ("cuda", DeviceError, "device='cuda' is not available here"),
    "an index (none here)": (0, DeviceError, "device=0 is not available here"),
    "meta": ("meta", DeviceError, "a meta device holds no data"),
    "unknown name": ("abc", DeviceError, "device must be a torch device, its name or index"),
    "a float": (3.5, TypeError, "device must be a torch device, its name or index"),
}


@pytest.mark.parametrize("case", DEVICES)
def test_torch_cartpole_refuses_a_device_it_cannot_use_as_the_converter_does(case: str) -> None:
    device, kind, words = DEVICES[case]
    if torch.cuda.is_available() and case.endswith("(none here)"):
        pytest.skip("a CUDA device is here")
    with pytest.raises(kind, match=words):
        TorchCartPole(2, device=device)
    assert TorchCartPole(2, device="cpu").device == torch.device("cpu")
