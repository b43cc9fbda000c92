"""Today's docs claims, checked against the code as a reader relying on them would.

docs/evaluation.md, quickstart.md "Without torch (numpy or JAX learners)", format.md (the index
cache, array-likes in v1 list-mode columns), api.md's rows for ``evaluate``, ``EpisodeTally``,
``sample`` keywords, ``add_rollouts``, ``load_episodes``, the converter's torch-free paragraph
and the runner's array-likes, replay.md's TorchRL row, deviations.md's evaluation row and
internals.md's new entries. Torch-free claims run in a subprocess whose imports refuse torch.
"""

from __future__ import annotations

import importlib
import inspect
import os
import signal
import textwrap
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    Dataset,
    DatasetMetadata,
    DatasetWriter,
    EpisodeWriter,
    dataset_info,
    filter_dataset,
    index_cache,
    load_episode,
    load_episodes,
)
from episodes.io.errors import EpisodeNotFoundError, UnstorableValueError
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.runner import EnvRunner, EpisodeTally, Evaluated, FinishedEpisode, evaluate
from episodes.runner.host_values import env_actions
from tests._torch_blocker import run_refusing


def run_script(code: str, missing: tuple[str, ...] = ("torch",)) -> str:
    """The output of ``code`` run where ``missing`` cannot be imported (torch, by default)."""
    done = run_refusing(textwrap.dedent(code), missing)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


# ---------------------------------------------------------------- names the docs give
NAMES = [
    ("episodes.runner", "evaluate Evaluated EpisodeTally FinishedEpisode RunnerMetrics"),
    ("episodes.runner.evaluation", "evaluate Evaluated _round"),
    ("episodes.runner.episode_tally", "EpisodeTally FinishedEpisode _running_sum"),
    ("episodes.runner.host_values", "env_actions"),
    (
        "episodes.io.index_cache",
        "v1_pieces lent_dataset LentDataset kept_datasets forget_datasets MAX_DATASETS SETTLED_NS",
    ),
    ("episodes.io.v1_manifest", "manifest_entries"),
    ("episodes.io.other_env", "other_env_problem"),
    ("episodes.io.tools", "other_env_problem"),
    ("episodes.io.torch_needed", "needed_torch"),
    (
        "episodes.replay.sample_keywords",
        "explains_sample_keywords refuse_sample_keywords SAMPLE_KEYWORDS taken_by",
    ),
    (
        "episodes.converter.column_refusals",
        "check_storable_extra storable_extra checked_obs_fn_output",
    ),
    (
        "episodes.converter.refusals",
        "check_storable_extra storable_extra checked_obs_fn_output obs_fn_input",
    ),
    (
        "episodes.converter",
        "episodes_to_batch bootstrap_truncated_rewards group_by_env time_major ColumnKeys",
    ),
    ("episodes.io", "filter_dataset load_episodes DatasetMetadata"),
]


@pytest.mark.parametrize(("module", "names"), NAMES, ids=[m for m, _ in NAMES])
def test_documented_names_exist(module: str, names: str) -> None:
    mod = importlib.import_module(module)
    missing = [n for n in names.split() if not hasattr(mod, n)]
    assert missing == []


def test_documented_members_constants_and_aliases() -> None:
    from episodes.converter import column_refusals, refusals
    from episodes.io import other_env, tools
    from episodes.replay.table import EpisodeTable

    assert hasattr(EpisodeTable, "close_oldest") and hasattr(EpisodeTable, "open_reserved")
    lent = index_cache.LentDataset
    assert hasattr(lent, "before_reading") and hasattr(lent, "after_reading")
    assert (index_cache.MAX_DATASETS, index_cache.SETTLED_NS) == (8, 3_000_000_000)
    assert tools.other_env_problem is other_env.other_env_problem
    params = list(inspect.signature(other_env.other_env_problem).parameters)
    assert params == ["path", "env_id", "observation_space", "action_space"]
    assert Evaluated._fields == ("episode", "finished")
    assert FinishedEpisode._fields == (
        "id_",
        "env_index",
        "ret",
        "length",
        "terminated",
        "t_started",
        "first_info",
        "last_info",
    )
    for name in ("check_storable_extra", "storable_extra", "checked_obs_fn_output"):
        assert getattr(refusals, name) is getattr(column_refusals, name)


def test_evaluate_signature_defaults() -> None:
    params = inspect.signature(evaluate).parameters
    assert params["num_steps"].default == 64
    assert params["max_vector_steps"].default == 100_000
    assert params["num_steps"].kind is inspect.Parameter.KEYWORD_ONLY


# ---------------------------------------------------------------- evaluate
class Seeded(gym.Env):
    """Length and float rewards drawn from the reset's seed; ends terminated and truncated."""

    observation_space = gym.spaces.Box(-1e9, 1e9, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.n, self.t = int(self.np_random.integers(2, 9)), 0
        return np.float32([self.n]), {"level": self.n}

    def step(self, action):
        self.t += 1
        end = self.t >= self.n
        reward = float(self.np_random.random()) / 7  # bits a pairwise sum may round otherwise
        info = {"is_success": np.bool_(self.n % 2 == 0)} if end else {}
        return np.float32([self.t + int(action)]), reward, end, end and self.n == 8, info


MODES = {
    "next": gym.vector.AutoresetMode.NEXT_STEP,
    "same": gym.vector.AutoresetMode.SAME_STEP,
    "disabled": gym.vector.AutoresetMode.DISABLED,
}


def policy(obs: Any) -> Any:
    return (np.asarray(obs)[:, 0] > 4).astype(np.int64), {}


def make_runner(n: int = 2, mode: str = "next", **kwargs: Any) -> EnvRunner:
    env = gym.vector.SyncVectorEnv([Seeded] * n, autoreset_mode=MODES[mode])
    return EnvRunner(env, policy, **kwargs)


def plain_loop(seed: int) -> tuple[list[float], float, int, bool, bool, dict]:
    env = Seeded()
    obs, _ = env.reset(seed=seed)
    observations, ret, length = [obs[0]], 0.0, 0
    while True:
        obs, reward, term, trunc, info = env.step(int(obs[0] > 4))
        observations.append(obs[0])
        ret += reward
        length += 1
        if term or trunc:
            return observations, ret, length, term, trunc, info


SEEDS = [11, 12, 13, 14, 15]
SHAPES = [  # (num_envs, num_steps, mode)
    (2, 3, "next"),
    (3, 1, "same"),
    (1, 64, "disabled"),
    (6, 2, "next"),
]


@pytest.mark.parametrize(("n", "num_steps", "mode"), SHAPES, ids=[str(s) for s in SHAPES])
def test_evaluate_gives_the_plain_loops_episodes_in_seed_order(n, num_steps, mode) -> None:
    out = evaluate(make_runner(n, mode), np.array(SEEDS), num_steps=num_steps)
    assert len(out) == len(SEEDS)
    for j, (seed, item) in enumerate(zip(SEEDS, out)):
        observations, ret, length, term, trunc, info = plain_loop(seed)
        ep, fin = item.episode, item.finished
        assert ep.custom_data == {"env_index": j % n, "seed": seed}
        assert type(ep.custom_data["seed"]) is int
        assert ep.t_started == 0 and fin.t_started == 0
        assert np.asarray(ep.get_observations())[:, 0].tolist() == observations
        assert fin.ret == ret  # to the last bit, as a plain ``ret += reward`` loop
        assert (fin.length, fin.terminated, ep.is_truncated) == (length, term, trunc)
        assert fin.last_info == info and fin.first_info == {"level": length}


def test_an_episode_ending_terminated_and_truncated_keeps_both_flags() -> None:
    # Seeded ends terminated and truncated at once where it draws 8 steps.
    seed = next(s for s in range(100) if plain_loop(s)[2] == 8)
    (item,) = evaluate(make_runner(2), [seed])
    assert item.finished.terminated and item.episode.is_truncated


BAD_INPUT = [  # (name, seeds, keywords, error, words)
    ("None seeds", None, {}, TypeError, "seeds must be a sequence of ints >= 0"),
    ("set", {1, 2}, {}, TypeError, "got set"),
    ("string", "12", {}, TypeError, "got str"),
    ("generator", (s for s in [1]), {}, TypeError, "got generator"),
    ("2-D array", np.zeros((2, 2), np.int64), {}, TypeError, "shape (2, 2)"),
    ("None seed", [1, None], {}, ValueError, "seeds[1] must be an int >= 0, got None"),
    ("negative seed", [-1], {}, ValueError, "seeds[0] must be an int >= 0, got -1"),
    ("bool seed", [True], {}, ValueError, "seeds[0]"),
    ("float seed", [1.5], {}, ValueError, "seeds[0]"),
    ("num_steps 0", [1], {"num_steps": 0}, ValueError, "num_steps"),
    ("max_vector_steps 0", [1], {"max_vector_steps": 0}, ValueError, "max_vector_steps"),
    ("max_vector_steps float", [1], {"max_vector_steps": 2.5}, TypeError, "max_vector_steps"),
]


@pytest.mark.parametrize(
    ("seeds", "kwargs", "error", "words"),
    [c[1:] for c in BAD_INPUT],
    ids=[c[0] for c in BAD_INPUT],
)
def test_evaluate_refuses_bad_input_before_anything_steps(seeds, kwargs, error, words) -> None:
    runner = make_runner(2, seed=5)
    first = runner.sample(3)
    metrics, before = runner.metrics, runner.get_metrics(reset=False)["num_env_steps"]
    with pytest.raises(error) as caught:
        evaluate(runner, seeds, **kwargs)
    assert words in str(caught.value)
    assert runner.seed == 5 and runner.metrics is metrics
    assert runner.get_metrics(reset=False)["num_env_steps"] == before
    going_on = [c for c in runner.sample(1) if c.t_started > 0]
    assert {c.id_ for c in going_on} <= {c.id_ for c in first} and going_on


def test_evaluate_refuses_a_runner_that_is_no_env_runner() -> None:
    with pytest.raises(TypeError, match="runner must be an EnvRunner"):
        evaluate("runner", [1])  # type: ignore[arg-type]


def test_empty_seeds_touch_nothing() -> None:
    runner = make_runner(2, seed=5)
    first = runner.sample(3)
    assert evaluate(runner, []) == [] and runner.seed == 5
    assert {c.id_ for c in runner.sample(1) if c.t_started > 0} <= {c.id_ for c in first}


def _failing_after(calls: int) -> Any:
    count = [0]

    def fails(obs: Any) -> Any:
        count[0] += 1
        if count[0] > calls:
            raise OSError("policy failed")
        return policy(obs)

    return fails


ENDINGS = [  # (name, evaluate's keywords, policy, error)
    ("returns", {}, policy, None),
    ("episode too long", {"max_vector_steps": 1}, policy, RuntimeError),
    ("policy fails", {"num_steps": 1}, _failing_after(1), OSError),
]


@pytest.mark.parametrize(
    ("kwargs", "pol", "error"), [c[1:] for c in ENDINGS], ids=[c[0] for c in ENDINGS]
)
def test_after_evaluate_the_runner_is_reset_and_its_metrics_as_they_were(
    kwargs, pol, error
) -> None:
    runner = make_runner(2, seed=5)
    seen = {c.id_ for c in runner.sample(20)}
    metrics, before = runner.metrics, runner.get_metrics(reset=False)
    runner.policy = pol
    if error is None:
        evaluate(runner, SEEDS, **kwargs)
    else:
        with pytest.raises(error):
            evaluate(runner, SEEDS, **kwargs)
    assert runner.metrics is metrics and runner.seed is None
    after = runner.get_metrics(reset=False)
    for key in ("num_episodes", "episode_returns", "episode_lengths", "num_env_steps"):
        assert after[key] == before[key], key
    runner.policy = policy
    fresh = runner.sample(2)
    assert all(c.t_started == 0 and c.id_ not in seen for c in fresh)


def test_an_episode_longer_than_max_vector_steps_names_its_seed_and_place() -> None:
    lengths = [plain_loop(s)[2] for s in SEEDS]
    bound = sorted(lengths)[2]
    rounds = [range(k, min(k + 2, len(SEEDS))) for k in range(0, len(SEEDS), 2)]
    first_late = next(r for r in rounds if any(lengths[j] > bound for j in r))
    named = [f"seeds[{j}]={SEEDS[j]}" for j in first_late if lengths[j] > bound]
    with pytest.raises(RuntimeError, match="did not end within max_vector_steps") as caught:
        evaluate(make_runner(2), SEEDS, max_vector_steps=bound, num_steps=1)
    assert all(x in str(caught.value) for x in named), (named, str(caught.value))
    # An episode exactly as long as the bound is kept.
    j = int(np.argmax(lengths))
    (item,) = evaluate(make_runner(2), [SEEDS[j]], max_vector_steps=lengths[j])
    assert item.finished.length == lengths[j]


class SeedSpy(gym.vector.SyncVectorEnv):
    def reset(self, *, seed=None, options=None):
        self.seeds.append(seed)
        return super().reset(seed=seed, options=options)


def test_a_short_last_round_leaves_the_other_sub_envs_unseeded() -> None:
    env = SeedSpy([Seeded] * 3)
    env.seeds = []
    evaluate(EnvRunner(env, policy), [5, 6, 7, 8], num_steps=4)
    assert env.seeds == [[5, 6, 7], [8, None, None]]


def test_the_same_seeds_give_the_same_episodes_whatever_num_envs_and_num_steps() -> None:
    runs = [evaluate(make_runner(n), SEEDS, num_steps=k) for n, k in [(1, 1), (4, 5), (2, 64)]]
    rets = [[item.finished.ret for item in run] for run in runs]
    assert rets[0] == rets[1] == rets[2]


def test_deviations_row_runner_sample_takes_no_num_episodes() -> None:
    with pytest.raises(TypeError, match="num_episodes"):
        make_runner(2).sample(num_episodes=3)  # type: ignore[call-arg]


# ---------------------------------------------------------------- EpisodeTally's ret
@pytest.mark.parametrize("num_steps", [1, 3, 7])
def test_tally_ret_is_the_sequential_float64_sum_whatever_the_cuts(num_steps) -> None:
    runner = make_runner(2, seed=3)
    tally, done = EpisodeTally(), []
    for _ in range(40 // num_steps):
        chunks = runner.sample(num_steps)
        done += tally.add(chunks)
    listed = runner.get_metrics()["episode_returns"]
    # get_metrics() may count an episode a call earlier: every tallied return is among its
    # returns, bit for bit (float64 adds one reward at a time in both).
    rets = [e.ret for e in done]
    assert len(rets) >= 5 and all(rets.count(r) <= listed.count(r) for r in rets)


# ---------------------------------------------------------------- evaluation.md's saving
def test_last_info_reads_back_from_disk_and_metadata_stays_the_first_writers(tmp_path) -> None:
    for mode in MODES:
        out = evaluate(make_runner(2, mode), SEEDS[:3])
        for k, item in enumerate(out):
            item.episode.custom_data["checkpoint_step"] = k % 2
        meta = DatasetMetadata(policy=mode)
        with DatasetWriter(tmp_path / "eval", metadata=meta) as w:
            w.write_many([item.episode for item in out])
        with Dataset(tmp_path / "eval") as ds:
            back = [ds.episode(len(ds) - 3 + k).get_infos(-1) for k in range(3)]
        assert back == [item.finished.last_info for item in out]
    # metadata is the creating writer's; later writers' is ignored
    assert dataset_info(tmp_path / "eval").metadata["policy"] == "next"
    copied = filter_dataset(tmp_path / "eval", tmp_path / "one", custom_data={"checkpoint_step": 1})
    assert copied == len(MODES)  # one of each three
    item = out[0]
    item.episode.custom_data["checkpoint_step"] = np.int64(3)  # JSON values only
    with pytest.raises(UnstorableValueError, match="numpy values are not allowed"):
        with DatasetWriter(tmp_path / "eval") as w:
            w.write(item.episode)


# ---------------------------------------------------------------- replay
SAMPLE_KEYWORDS = [  # (keyword, words of our name for it)
    ("batch_size", "batch_size_B"),
    ("num_samples", "batch_size_B"),
    ("return_info", "batch['indices']"),
    ("seq_len", "batch_length_T"),
    ("batch_size_T", "batch_length_T"),
    ("n_steps", "n_step="),
    ("discount", "gamma="),
    ("to_numpy", "numpy already"),
    ("min_batch_length_T", "batch_length_T steps"),
    ("batch_sze_B", "did you mean 'batch_size_B'"),
    ("colour", "it takes num_items, "),
]


def _filled(cls: type) -> Any:
    buf = cls(capacity=100, seed=0)
    buf.add_rollouts(np.zeros((2, 5, 2), np.float32), np.zeros((2, 4), np.int64), np.ones((2, 4)))
    return buf


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize(("keyword", "words"), SAMPLE_KEYWORDS, ids=[k for k, _ in SAMPLE_KEYWORDS])
def test_sample_names_our_keyword_before_drawing(cls, keyword, words) -> None:
    buf = _filled(cls)
    state = buf.rng.bit_generator.state
    with pytest.raises(TypeError) as caught:
        buf.sample(4, **{keyword: 1})
    assert f"takes no keyword argument {keyword!r}" in str(caught.value)
    assert words in str(caught.value)
    assert buf.rng.bit_generator.state == state


def test_beta_is_refused_on_the_uniform_buffer_only_and_batches_hold_indices_and_weights():
    with pytest.raises(TypeError, match="PrioritizedEpisodeReplayBuffer.sample's"):
        _filled(EpisodeReplayBuffer).sample(4, beta=0.5)
    for cls in (EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer):
        batch = _filled(cls).sample(batch_size_B=4)
        assert {"indices", "weights"} <= set(batch) and len(batch["indices"]) == 4


B, H = 2, 3
ROLLOUT_REFUSALS = [  # (name, keywords replacing the good ones, error, words)
    ("set of ids", {"ids": {"a", "b"}}, TypeError, "a set has no order"),
    ("0-d ids", {"ids": np.array("a")}, TypeError, "ids: expected a sequence of B = 2"),
    ("rewards [B, H, 1]", {"rewards": np.zeros((B, H, 1))}, ValueError, "rewards: expected"),
    ("terminated [B, H, 1]", {"terminated": np.zeros((B, H, 1), bool)}, ValueError, "[B, H]"),
    ("None id", {"ids": ["a", None]}, ValueError, "ids[1] is None"),
    ("repeated id", {"ids": ["a", "a"]}, ValueError, "needs an id of its own"),
    ("array id", {"ids": [np.array(1), "b"]}, TypeError, "ids[0]"),
]


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [c[1:] for c in ROLLOUT_REFUSALS],
    ids=[c[0] for c in ROLLOUT_REFUSALS],
)
def test_add_rollouts_refusals_leave_the_buffer_unchanged(kwargs, error, words) -> None:
    buf = _filled(EpisodeReplayBuffer)
    before = (buf.get_num_timesteps(), buf.get_num_episodes(), buf.get_added_timesteps())
    args = {
        "observations": np.zeros((B, H + 1, 2), np.float32),
        "actions": np.zeros((B, H), np.int64),
        "rewards": np.zeros((B, H)),
        **kwargs,
    }
    with pytest.raises(error) as caught:
        buf.add_rollouts(**args)
    assert words in str(caught.value)
    assert (buf.get_num_timesteps(), buf.get_num_episodes(), buf.get_added_timesteps()) == before


# ---------------------------------------------------------------- io
@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("docclaims")
    out = {}
    for name, writer in (("v1", EpisodeWriter), ("v2", DatasetWriter)):
        with writer(root / name) as w:
            w.write(SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0]))
        out[name] = root / name
    return out


@pytest.mark.parametrize("fmt", ["v1", "v2"])
@pytest.mark.parametrize(
    ("ids", "words"),
    [(np.array("a"), "a 0-d array holding the single id 'a'"), ("a", "pass ['a']"), (b"a", "")],
    ids=["0-d array", "str", "bytes"],
)
def test_load_episodes_refuses_one_id(datasets, fmt, ids, words) -> None:
    with pytest.raises(TypeError, match="ids must be a collection of ids") as caught:
        load_episodes(datasets[fmt], ids)
    assert words in str(caught.value)
    assert load_episodes(datasets[fmt], []) == []


# (format, kept after a failed read, kept after a verify=True read alone)
KEPT = [("v1", 1, 1), ("v2", 0, 0)]


@pytest.mark.parametrize(("fmt", "after_failure", "after_verify"), KEPT, ids=["v1", "v2"])
def test_what_a_failed_or_verified_read_leaves_kept(datasets, fmt, after_failure, after_verify):
    # format.md: a v2 read that raises drops its Dataset and verify reads keep none; a v1
    # parse is kept through both, compared with the manifest's bytes at every call.
    index_cache.forget_datasets()
    load_episode(datasets[fmt], "a")
    assert index_cache.kept_datasets() == 1
    with pytest.raises(EpisodeNotFoundError):
        load_episode(datasets[fmt], "missing")
    assert index_cache.kept_datasets() == after_failure
    index_cache.forget_datasets()
    load_episode(datasets[fmt], "a", verify=True)
    assert index_cache.kept_datasets() == after_verify
    index_cache.forget_datasets()
    assert index_cache.kept_datasets() == 0


class ObjectArrayLike:
    def __array__(self, dtype=None, copy=None):
        return np.array([1, "a"], object)


def _episode(obs0: Any, infos0: Any = None, id_: str = "t") -> SingleAgentEpisode:
    ep = SingleAgentEpisode(id_)
    ep.add_env_reset(obs0, infos=infos0 or {})
    ep.add_env_step(np.ones(2, np.float32), 1, 0.5, terminated=True)
    return ep


@pytest.mark.parametrize("writer", [EpisodeWriter, DatasetWriter], ids=["v1", "v2"])
def test_writers_store_array_likes_as_np_asarray_and_refuse_what_numpy_cannot(
    tmp_path, writer
) -> None:
    torch = pytest.importorskip("torch")
    ep = _episode(torch.zeros(2))
    with writer(tmp_path / "d") as w:
        w.write(ep)
    assert type(ep.observations[0]) is torch.Tensor  # the episode written keeps them
    back = load_episode(tmp_path / "d", "t")
    assert type(back.get_observations(0)) is np.ndarray
    assert back.get_observations(0).tolist() == [0.0, 0.0]
    refused = [  # (episode, words)
        (_episode(torch.zeros(2, requires_grad=True)), "observations[0]: numpy cannot read"),
        (_episode(ObjectArrayLike()), "observations[0]: numpy dtype object"),
        (_episode(np.zeros(2), {"x": torch.zeros(2)}), "infos[0]['x']"),
    ]
    for bad, words in refused:
        with pytest.raises(UnstorableValueError) as caught:
            with writer(tmp_path / "d") as w:
                w.write(bad)
        assert words in str(caught.value)


class ArrayLike:
    def __init__(self, a: Any) -> None:
        self._a = np.asarray(a)

    def __array__(self, dtype=None, copy=None):
        return self._a


HOST = np.array([1, 0])
ENV_ACTIONS = [  # (name, the policy's actions, whether the env gets the recorded host array)
    ("array-like", ArrayLike([1, 0]), True),
    ("list of array-likes", [ArrayLike(1), ArrayLike(0)], True),
    ("list judged by its first item", [1, ArrayLike(0)], False),
    ("dict leaf", {"a": ArrayLike([1, 0])}, True),
    ("tuple leaf", (np.array([1, 0]), ArrayLike([1, 0])), True),
    ("numpy array", np.array([1, 0]), False),
    ("numpy scalar", np.int64(1), False),
    ("list of ints", [1, 0], False),
]


@pytest.mark.parametrize(
    ("given", "host"), [c[1:] for c in ENV_ACTIONS], ids=[c[0] for c in ENV_ACTIONS]
)
def test_a_numpy_env_gets_the_recorded_arrays_of_array_likes(given, host) -> None:
    assert (env_actions(given, HOST) is HOST) is host
    assert (env_actions(given, HOST) is given) is not host


# ---------------------------------------------------------------- without torch
def test_torch_free_claims_hold_where_torch_cannot_be_imported() -> None:
    out = run_script("""
    import sys
    import gymnasium as gym
    import numpy as np
    from hypothesis import HealthCheck, given, settings
    import episodes.converter as converter
    from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
    from episodes.runner import EnvRunner, evaluate
    from episodes.testing import strategies as st

    try:
        converter.bootstrap_values
    except ImportError as error:
        assert "bootstrap_values needs torch" in str(error), error
    else:
        raise AssertionError("bootstrap_values loaded without torch")

    for cls in (EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer):
        buf = cls(capacity=100, seed=0)
        buf.add_rollouts(np.zeros((2, 4, 2), np.float32), np.zeros((2, 3), np.int64),
                         np.ones((2, 3)))
        for call in (lambda: buf.get_transitions([0, 1], device="cpu"),
                     lambda: buf.sample(2, device="cpu"),
                     lambda: buf.sample(2, batch_length_T=2, device="cpu")):
            state, counters = buf.rng.bit_generator.state, buf.get_counters()
            try:
                call()
            except ImportError as error:
                text = str(error)
                assert error.name == "torch" and "device='cpu' needs torch" in text, text
                assert "leave device out for numpy batches" in text, text
            else:
                raise AssertionError("device= worked without torch")
            assert buf.rng.bit_generator.state == state and buf.get_counters() == counters

    drawn = []
    # Derandomized, no health checks: a loaded machine must not fail this on timing.
    calm = dict(database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @settings(max_examples=3, **calm)
    @given(st.episodes(numpy=True))
    def draw(ep):
        drawn.append(type(ep.get_rewards()).__name__)
    draw()
    try:
        @settings(max_examples=1, **calm)
        @given(st.rollouts())
        def draw_rollouts(r):
            pass
        draw_rollouts()
    except ImportError as error:
        assert error.name == "torch", error
    else:
        raise AssertionError("rollouts drew without torch")

    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync", max_episode_steps=20)
    out = evaluate(EnvRunner(env, lambda o: (np.zeros(len(o), np.int64), {})), [1, 2, 3])
    print(sorted(set(drawn)), [e.finished.length for e in out], "torch" in sys.modules)
    """)
    drawn, rest = out.strip().splitlines()[-1].split("] ", 1)
    assert drawn == "['ndarray'" and rest.endswith(" False")


def test_replay_imports_torch_only_when_a_batch_is_asked_for_on_a_device() -> None:
    pytest.importorskip("torch")
    out = run_script(
        """
    import sys
    import numpy as np
    from episodes.replay import EpisodeReplayBuffer
    buf = EpisodeReplayBuffer(capacity=100, seed=0)
    buf.add_rollouts(np.zeros((2, 4, 2), np.float32), np.zeros((2, 3), np.int64),
                     np.ones((2, 3)))
    buf.sample(2)
    before = "torch" in sys.modules
    batch = buf.sample(2, device="cpu")
    print(before, "torch" in sys.modules, type(batch["rewards"]).__name__)
    """,
        missing=(),
    )
    assert out.split() == ["False", "True", "Tensor"]


def test_a_forked_child_keeps_the_v1_parse_and_none_of_the_v2_datasets(datasets) -> None:
    index_cache.forget_datasets()
    load_episode(datasets["v1"], "a")
    load_episode(datasets["v2"], "a")
    assert index_cache.kept_datasets() == 2 and index_cache.MAX_V1_BYTES == 16 << 20
    read, write = os.pipe()
    with index_cache._v2_lock:  # as another thread of the parent may hold it at the fork
        pid = os.fork()
        if pid == 0:  # the child: answer within 10 s, or be killed by the alarm
            signal.alarm(10)
            os.write(write, str(index_cache.kept_datasets()).encode())
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    answer = os.read(read, 16).decode()
    os.close(read)
    assert os.waitstatus_to_exitcode(status) == 0 and answer == "1"
    index_cache.forget_datasets()
