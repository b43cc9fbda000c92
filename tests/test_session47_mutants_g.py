"""Behaviour that hand-made mutants of ``episodes.runner.blocks``,
``episodes.runner.chunk_signature``, ``episodes.runner.first_outputs``,
``episodes.runner.infos``, ``episodes.runner.row_infos``, ``episodes.runner.sampled`` and
``episodes.runner.widening`` showed no test pinned (session 47, seventh batch).

Each test fails with a mutant (named beside it) applied, and passes on the code as it is. The
runner is driven through ``EnvRunner.sample`` on gymnasium vector envs; what its chunks hold is
compared with the values the policy and the env gave (a plain reference), or with the per-step
reference runner.
"""

from __future__ import annotations

import copy
import itertools
import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes.buffer import InfiniteLookbackBuffer
from episodes.buffer.list_store import ListStore
from episodes.runner import EnvRunner


def _cartpole(num_envs: int = 2) -> gym.vector.VectorEnv:
    return gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(num_envs)])


def _scripted_extras(script: list[np.ndarray]) -> Any:
    """A policy whose extra output ``x`` is the script's next batch, step by step."""
    batches = iter(script)

    def policy(obs: Any) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        return np.zeros(len(obs), np.int64), {"x": next(batches)}

    return policy


# ------------------------------------------------------------------ widening of an extra column

BIG = 2**53
WIDENS = [
    # (name, first step's batch, second step's batch)
    # mutant: kinds ("UU", "SS") only (a wider complex refused)
    ("complex64 then complex128", np.array([1 + 2j, 3j], np.complex64), np.array([1e300j, 0.5])),
    # mutant: `2 ** np.finfo(wide).nmant` (2**53 counted as rounded by float64)
    ("int64 at 2**53 then floats", np.array([BIG, -BIG]), np.array([0.5, 1.5])),
    # mutant: `not recorded.size` inverted (nothing recorded: no check, widened)
    ("small int64 then floats", np.array([3, -4]), np.array([0.25, 2.0])),
]


@pytest.mark.parametrize("first, second", [c[1:] for c in WIDENS], ids=[c[0] for c in WIDENS])
def test_an_extra_column_widens_keeping_every_value(first: np.ndarray, second: np.ndarray):
    """Values the column's dtype cannot hold widen it, and every recorded value stays exact."""
    runner = EnvRunner(_cartpole(), _scripted_extras([first, second]))
    chunks = runner.sample(2)
    for env in range(2):
        x = chunks[env].get_extra_model_outputs("x")
        assert x.dtype == np.result_type(first.dtype, second.dtype)
        assert x.tolist() == [first[env].item(), second[env].item()]


REFUSED = [
    # mutant: `set(kinds) <= set("biufc")` (floats rewritten as complex)
    ("floats then complex", np.array([0.5, 1.5]), np.array([1j, 2j])),
    # mutant: `dtype.kind in "u"` (an int64 column's big ints rounded by float64)
    ("int64 beyond 2**53 then floats", np.array([BIG + 1, 0]), np.array([0.5, 1.5])),
    # mutant: `> exact + 1`
    ("int64 at 2**53 + 1 then floats", np.array([0, BIG + 1]), np.array([0.5, 1.5])),
    # mutant: `< -exact - 1`
    ("int64 at -(2**53) - 1 then floats", np.array([-BIG - 1, 0]), np.array([0.5, 1.5])),
    # mutant: `or` -> `and` (one side beyond 2**53 only)
    ("int64 at 2**60 then floats", np.array([2**60 + 1, 1]), np.array([0.5, 1.5])),
]


@pytest.mark.parametrize("first, second", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_an_extra_column_refuses_a_widening_that_changes_values(
    first: np.ndarray, second: np.ndarray
):
    """Complex after floats, or floats after ints float64 would round: a ValueError naming the
    output, not a column whose earlier rows changed."""
    runner = EnvRunner(_cartpole(), _scripted_extras([first, second]))
    with pytest.raises(ValueError, match="extra output 'x'"):
        runner.sample(2)


F32_MAX = float(np.finfo(np.float32).max)
KEPT = [
    # (name, first step's batch, second step's batch): the second fits the first's dtype
    # mutant: `not largest >= float(np.finfo(dtype).max)` (the largest float32 widens)
    ("float32 max into float32", np.array([0.5, 1.5], np.float32), np.array([F32_MAX, -F32_MAX])),
    # mutant: `info.min < value.min()`
    ("int8 min into int8", np.array([1, 2], np.int8), np.array([-128, 0])),
    # mutant: `value.max() < info.max`
    ("int8 max into int8", np.array([1, 2], np.int8), np.array([0, 127])),
    ("uint8 range into uint8", np.array([1, 2], np.uint8), np.array([0, 255])),
]


@pytest.mark.parametrize("first, second", [c[1:] for c in KEPT], ids=[c[0] for c in KEPT])
def test_an_extra_column_keeps_its_dtype_for_values_it_holds(first: np.ndarray, second: Any):
    """A wider dtype whose values fit the column (its range's ends included) keeps the column's
    dtype, the values exact."""
    runner = EnvRunner(_cartpole(), _scripted_extras([first, second]))
    chunks = runner.sample(2)
    for env in range(2):
        x = chunks[env].get_extra_model_outputs("x")
        assert x.dtype == first.dtype
        assert x.tolist() == [first[env].item(), second[env].item()]


# mutant: `dtype.itemsize == 4` in ``new_leaf`` (an int64 leaf's unwritten rows not zeroed)
def test_floats_after_small_int64_outputs_widen_whatever_memory_the_column_reuses():
    """Rows of an int64 column not written yet are not read as recorded ints: freed memory
    full of big ints, reused by the column, does not refuse floats that follow small ints."""
    rows = 400
    script = itertools.chain([np.array([1, 2])], itertools.repeat(np.array([0.5, 1.5])))

    def policy(obs: Any) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        # Freed memory full of ints float64 would round, of sizes about the column's.
        junk = [np.full(n, 2**60 + 1, np.int64) for n in range(2 * rows, 8 * rows, rows // 4)]
        del junk
        return np.zeros(len(obs), np.int64), {"x": next(script)}

    chunks = EnvRunner(_cartpole(), policy).sample(rows)
    for env in range(2):
        x = np.concatenate([c.get_extra_model_outputs("x") for c in chunks.by_env()[env]])
        assert x.tolist() == [1.0 + env] + [0.5 + env] * (rows - 1)


# mutant: ``new_leaf`` without ``native_dtype`` (a big-endian column handed out)
@pytest.mark.parametrize("dtype", [">f4", ">i8", "<f8"])
def test_a_non_native_extra_output_is_recorded_native(dtype: str):
    """Outputs of a non-native byte order are recorded into a native column of their type."""
    values = [np.array([1, 2], dtype), np.array([3, 4], dtype)]
    chunks = EnvRunner(_cartpole(), _scripted_extras(values)).sample(2)
    x = chunks[0].get_extra_model_outputs("x")
    assert x.dtype == np.dtype(dtype).newbyteorder("=") and x.dtype.isnative
    assert x.tolist() == [1, 3]


class _MaskedObsAt(gym.vector.VectorWrapper):
    """Returns its env's step observations as a masked array, one entry masked, at step ``k``."""

    def __init__(self, env: gym.vector.VectorEnv, k: int):
        super().__init__(env)
        self.k, self.steps = k, 0

    def step(self, actions: Any) -> Any:
        obs, *rest = self.env.step(actions)
        self.steps += 1
        if self.steps == self.k:
            mask = np.zeros(obs.shape, bool)
            mask[1, 0] = True
            obs = np.ma.MaskedArray(obs, mask)
        return (obs, *rest)


# mutant: ``Column.put`` without ``check_unmasked`` on its single-leaf fast path
@pytest.mark.parametrize("k", [1, 3])
def test_masked_step_observations_are_refused(k: int):
    """A masked entry in a step's observations is refused (a row write would drop the mask)."""
    runner = EnvRunner(_MaskedObsAt(_cartpole(), k), lambda obs: (np.zeros(len(obs), np.int64), {}))
    with pytest.raises(ValueError, match="observations"):
        runner.sample(5)


# mutant: ``Column.put_leaves`` widens only leaves of the same dtype (a nested output cast)
def test_a_nested_extra_output_widens_leaf_by_leaf():
    """Each leaf of a nested extra output widens on its own: floats after ints keep their
    fractions, the other leaf keeps its dtype."""
    steps = [
        {"a": np.array([1, 2]), "b": np.array([0.5, 1.5], np.float32)},
        {"a": np.array([0.25, 3.75]), "b": np.array([2.5, 3.5], np.float32)},
    ]
    batches = iter(steps)

    def policy(obs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        return np.zeros(len(obs), np.int64), {"x": next(batches)}

    chunks = EnvRunner(_cartpole(), policy).sample(2)
    for env in range(2):
        x = chunks[env].get_extra_model_outputs("x")
        assert x["a"].dtype == np.float64 and x["b"].dtype == np.float32
        assert x["a"].tolist() == [s["a"][env].item() for s in steps]
        assert x["b"].tolist() == [s["b"][env].item() for s in steps]


def _float64_cartpole(num_envs: int, mode: str) -> gym.vector.VectorEnv:
    """CartPole sub-envs returning float64 observations (their space says float32): a same-step
    vector env batches them into float32, its final observations stay float64."""

    def make() -> gym.Env:
        env = gym.make("CartPole-v1")
        space = env.observation_space
        return gym.wrappers.TransformObservation(env, lambda o: o.astype(np.float64), space)

    return gym.vector.SyncVectorEnv([make] * num_envs, autoreset_mode=mode)


# mutant: ``Column.fitted`` returns the items uncast (a float64 final observation)
@pytest.mark.parametrize("mode", ["SameStep", "Disabled"])
def test_a_final_observation_kept_apart_has_the_column_dtype(mode: str):
    """An episode's final observation, kept apart from the blocks, has the dtype of its other
    observations (float32 here, where the env gave float64 ones)."""
    env = _float64_cartpole(2, mode)
    env.reset(seed=3)
    chunks = EnvRunner(env, lambda obs: (np.ones(len(obs), np.int64), {})).sample(40)
    ended = [c for c in chunks if c.is_done]
    assert ended
    for chunk in chunks:
        obs = chunk.get_observations()
        assert obs.dtype == np.float32


class _FloatResets(gym.vector.VectorEnv):
    """A disabled-autoreset vector env of int observations whose partial resets give floats;
    sub-env 0 ends every second step."""

    def __init__(self) -> None:
        self.num_envs = 2
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.DISABLED}
        self.single_observation_space = gym.spaces.Box(-100, 100, (1,), np.float64)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, 2)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, 2)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if options and "reset_mask" in options:
            return np.array([[0.5], [0.75]]), {}
        return np.zeros((2, 1), np.int64), {}

    def step(self, actions: Any) -> Any:
        self.t += 1
        obs = np.array([[self.t], [10 * self.t]], np.int64)
        terminated = np.array([self.t % 2 == 0, False])
        return obs, np.ones(2), terminated, np.zeros(2, bool), {}


# mutant: ``Column.put_rows`` writes without widening (reset floats cast into an int column)
def test_partial_reset_observations_widen_the_column():
    """Disabled mode: a partial reset's float observations widen the int observation column;
    every observation keeps the value the env gave."""
    chunks = EnvRunner(_FloatResets(), lambda obs: (np.zeros(len(obs), np.int64), {})).sample(4)
    env0 = [c.get_observations()[:, 0].tolist() for c in chunks.by_env()[0]]
    assert env0 == [[0, 1, 2], [0.5, 3, 4]]
    assert chunks[0].get_observations().dtype == np.float64
    assert chunks.by_env()[1][0].get_observations()[:, 0].tolist() == [0, 10, 20, 30, 40]


class _Rewards(gym.vector.VectorWrapper):
    """Gives the step's rewards through ``change`` (a malformed batch)."""

    def __init__(self, env: gym.vector.VectorEnv, change: Any):
        super().__init__(env)
        self.change = change

    def step(self, actions: Any) -> Any:
        obs, rewards, *rest = self.env.step(actions)
        return (obs, self.change(rewards), *rest)


# mutant: ``put_env_step`` without the rewards' shape check (one reward broadcast to all)
@pytest.mark.parametrize(
    "change",
    [lambda r: r[:1], lambda r: np.float64(r[0]), lambda r: np.concatenate([r, r])],
    ids=["one reward", "a scalar", "twice as many"],
)
def test_rewards_not_one_per_sub_env_are_refused(change: Any):
    runner = EnvRunner(_Rewards(_cartpole(), change), lambda o: (np.zeros(len(o), np.int64), {}))
    with pytest.raises(ValueError, match="the env's rewards"):
        runner.sample(3)


# mutants: ``Blocks.sharing`` keeping the actions' or the extras' column objects
@pytest.mark.parametrize("field", ["actions", "extra"])
def test_a_refused_call_that_widened_a_column_leaves_the_next_call_as_before(field: str):
    """A call whose first outputs widen a column (floats after ints) and are then refused (a
    later extra output of strings) leaves the runner as it was: the next call records ints
    as ints."""
    bad = {"now": False}
    ints = np.array([[1], [-1]])

    def policy(obs: Any) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        if not bad["now"]:
            return ints, {"x": ints, "y": ints}
        widened = np.full((2, 1), 0.5)
        strings = np.array([["a"], ["b"]])
        if field == "actions":
            return widened, {"x": ints, "y": strings}
        return ints, {"x": widened, "y": strings}

    pendulum = gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync")
    runner = EnvRunner(pendulum, policy)
    runner.sample(3)
    bad["now"] = True
    with pytest.raises(ValueError, match="'y'"):
        runner.sample(2)
    bad["now"] = False
    chunks = runner.sample(2)
    for chunk, value in zip(chunks, [1, -1]):
        for got in (chunk.get_actions(), chunk.get_extra_model_outputs("x")):
            assert got.dtype == np.int64 and got[:, 0].tolist() == [value, value]


def _rename_extra(ep: Any) -> None:
    outputs = ep.extra_model_outputs
    outputs["c"] = outputs.pop("a")  # same column objects, in the same order, another key
    outputs["b"] = outputs.pop("b")


def _set_lookback(ep: Any) -> None:
    ep.actions.lookback = 0


def _set_t_started(ep: Any) -> None:
    ep.t_started = 2


def _replace_infos(ep: Any) -> None:
    ep.infos = InfiniteLookbackBuffer(ListStore([{"k": i} for i in range(5)]), 1)


def _set_space(ep: Any) -> None:
    ep.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)


EDITS = [
    # (name, edit of a built chunk, what a copy of the sample must give back)
    ("lookback", _set_lookback, lambda ep: ep.actions.lookback),  # mutant: lookbacks left out
    ("extra key", _rename_extra, lambda ep: sorted(ep.extra_model_outputs)),  # mutant: keys
    ("t_started", _set_t_started, lambda ep: (ep.t_started, ep.t)),  # mutant: t_started
    ("infos buffer", _replace_infos, lambda ep: ep.get_infos()),  # mutant: infos left out
    ("space", _set_space, lambda ep: ep.observation_space),  # mutant: spaces left out
]


@pytest.mark.parametrize("edit, read", [c[1:] for c in EDITS], ids=[c[0] for c in EDITS])
@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_an_edited_chunk_counts_as_changed_and_travels_edited(edit: Any, read: Any, how: str):
    """An edit of a built chunk that its columns do not see makes ``unchanged()`` False, and
    a pickled or deep-copied sample gives the edited chunk back."""
    policy = lambda o: (np.zeros(len(o), np.int64), {"a": np.ones(len(o)), "b": np.zeros(len(o))})  # noqa: E731
    runner = EnvRunner(_cartpole(), policy)
    runner.sample(3)
    chunks = runner.sample(3)
    assert chunks.unchanged()
    edit(chunks[0])
    assert not chunks.unchanged()
    copied = pickle.loads(pickle.dumps(chunks)) if how == "pickle" else copy.deepcopy(chunks)
    assert read(copied[0]) == read(chunks[0])
    assert copied[0] == chunks[0]


# mutants: ``to_list_mode`` keeping the blocks' items (``owned_item`` / its ``leaf.copy()``)
@pytest.mark.parametrize("nested", [False, True], ids=["Box obs", "Dict obs"])
def test_list_mode_items_are_the_chunks_own(nested: bool):
    """A list-mode chunk's observation items are its own: written in place, they leave the
    sample's recorded window (what ``take`` reads for the converter) as recorded."""
    env: gym.vector.VectorEnv = _cartpole()
    if nested:
        env = gym.wrappers.vector.TransformObservation(
            env,
            lambda o: {"pos": o},
            gym.spaces.Dict({"pos": env.observation_space}),
            single_observation_space=gym.spaces.Dict({"pos": env.single_observation_space}),
        )
    runner = EnvRunner(env, lambda o: (np.zeros(2, np.int64), {}), numpy_episodes=False)
    chunks = runner.sample(3)
    recorded = copy.deepcopy(chunks.take("observations"))
    for chunk in chunks:
        for obs in chunk.get_observations():
            leaf = obs["pos"] if nested else obs
            leaf += 100.0  # in place
    window = chunks.take("observations")
    got, want = (window["pos"], recorded["pos"]) if nested else (window, recorded)
    assert got.tolist() == want.tolist()


# mutant: ``SampledChunks.__eq__`` without its length check (zip stops at the shorter)
def test_a_sample_equals_only_sequences_of_its_length():
    chunks = EnvRunner(_cartpole(), lambda o: (np.zeros(2, np.int64), {})).sample(3)
    chunks_list = list(chunks)
    assert chunks == chunks_list and chunks == tuple(chunks_list)
    assert chunks != chunks_list[:-1]
    assert chunks != chunks_list + [chunks_list[0]]
    assert chunks != []


class _StepInfos(gym.vector.VectorWrapper):
    """Reports ``{"n": step count per sub-env}`` at every reset and step."""

    def reset(self, **kwargs: Any) -> Any:
        self.n = 0
        obs, _ = self.env.reset(**kwargs)
        return obs, {"n": np.full(self.num_envs, 0.0)}

    def step(self, actions: Any) -> Any:
        self.n += 1
        obs, rewards, terminated, truncated, _ = self.env.step(actions)
        return obs, rewards, terminated, truncated, {"n": np.full(self.num_envs, float(self.n))}


# mutant: ``SampledChunks._state`` sends a chunk with a finalized infos column to be rebuilt
@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_a_chunk_with_finalized_infos_travels_as_it_is(how: str):
    runner = EnvRunner(_StepInfos(_cartpole()), lambda o: (np.zeros(2, np.int64), {}))
    chunks = runner.sample(3)
    chunks[0].infos.finalize()
    copied = pickle.loads(pickle.dumps(chunks)) if how == "pickle" else copy.deepcopy(chunks)
    assert copied[0].infos.finalized
    assert np.asarray(copied[0].get_infos()["n"]).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert copied[0] == chunks[0]


# mutant: ``SampledChunks._state`` keeps a built chunk's custom_data only when it is the default
@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_custom_data_of_a_built_chunk_travels(how: str):
    chunks = EnvRunner(_cartpole(), lambda o: (np.zeros(2, np.int64), {})).sample(3)
    chunks[1].custom_data["bootstrap_value"] = 0.5
    copied = pickle.loads(pickle.dumps(chunks)) if how == "pickle" else copy.deepcopy(chunks)
    assert copied[1].custom_data == {"env_index": 1, "bootstrap_value": 0.5}
    assert copied[0].custom_data == {"env_index": 0}


# mutant: ``SampledChunks.lengths`` reads the table only (a built chunk that grew)
def test_lengths_follow_a_built_chunk_that_grew():
    chunks = EnvRunner(_cartpole(), lambda o: (np.zeros(2, np.int64), {})).sample(3)
    grown = chunks[1]
    grown.add_env_step(observation=np.zeros(4, np.float32), action=0, reward=1.0)
    assert chunks.lengths().tolist() == [len(c) for c in chunks] == [3, 4]


# mutant: ``SampledChunks._state`` lets the infos a copy carried win over the chunk's newer ones
def test_infos_replaced_in_a_copy_travel_in_its_copy():
    """Infos replaced in a built chunk travel with a pickle; replaced again in the unpickled
    sample's chunk, its own pickle carries the newer ones."""
    chunks = EnvRunner(_cartpole(), lambda o: (np.zeros(2, np.int64), {})).sample(3)
    chunks[0].infos.set({"v": 1}, at_indices=0)
    once = pickle.loads(pickle.dumps(chunks))
    assert once[0].get_infos(0) == {"v": 1}
    once[0].infos.set({"v": 2}, at_indices=0)
    twice = pickle.loads(pickle.dumps(once))
    assert twice[0].get_infos(0) == {"v": 2}
    assert twice[1].get_infos() == once[1].get_infos()


def _step_numbers(chunk: Any) -> tuple[list[float], float | None]:
    """The ``n`` of a chunk's infos, and of its lookback info (None without lookback)."""
    own = [info["n"] for info in chunk.get_infos()]
    if not chunk.infos.lookback:
        return own, None
    return own, chunk.get_infos(-1, neg_index_as_lookback=True)["n"]


# mutants: ``RowInfos.moved`` leaving out row ``last``; ``RowInfos.ending_from`` leaving out
# row ``end`` or keeping every sub-env of a row
@pytest.mark.parametrize("how", ["as sampled", "pickle", "deepcopy"])
def test_infos_of_carried_and_compacted_rows_are_kept(how: str):
    """Every observation's info, the lookback's too, reaches the chunks of each call, whether
    read as sampled or from a copy (which keeps only the rows the chunks read)."""
    runner = EnvRunner(_StepInfos(_cartpole()), lambda o: (np.zeros(2, np.int64), {}))
    for call in range(2):  # 6 steps: the pole has not fallen yet
        chunks = runner.sample(3)
        if how == "pickle":
            chunks = pickle.loads(pickle.dumps(chunks))
        elif how == "deepcopy":
            chunks = copy.deepcopy(chunks)
        start = 3.0 * call
        lookback = None if call == 0 else start - 1
        for chunk in chunks:
            assert chunk.t_started == start
            assert _step_numbers(chunk) == ([start + i for i in range(4)], lookback)
