"""Session 50: one tiny env per gymnasium space kind, through every layer a user runs.

Each case records with a small vector env that logs every observation, action and reward it
produced, then checks what each layer gives back against that log (the runner, the getters,
cut/slice/concat, state and pickle, the disk format, replay, connectors, the converter), or
the refusal the docs name (docs/contract.md §12 lists which layers take which spaces).
"""

from __future__ import annotations

import pickle
import warnings
from functools import cache

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces as gs

from episodes import SingleAgentEpisode
from episodes.connectors import (
    AddLearnerColumns,
    FlattenObservations,
    FrameStack,
    PrevActionsPrevRewards,
)
from episodes.replay import EpisodeReplayBuffer
from episodes.runner import EnvRunner, RandomPolicy

pytest.importorskip("pyarrow")

_B2 = gs.Box(-1, 1, (2,), np.float32)
SPACES = {
    "box_f32": gs.Box(-1, 1, (3,), np.float32),
    "box_f64": gs.Box(-2, 2, (2, 2), np.float64),
    "box_uint8_image": gs.Box(0, 255, (4, 4, 3), np.uint8),
    "box_int": gs.Box(-5, 5, (2,), np.int64),
    "box_scalar": gs.Box(-1, 1, (), np.float32),
    "box_empty": gs.Box(-1, 1, (0,), np.float32),
    "discrete_start": gs.Discrete(4, start=-2),
    "multidiscrete_2d_start": gs.MultiDiscrete(
        np.array([[2, 3], [4, 5]]), start=np.array([[1, -1], [0, 2]])
    ),
    "multibinary_n": gs.MultiBinary(4),
    "multibinary_2x3": gs.MultiBinary((2, 3)),
    "text": gs.Text(5, min_length=1),
    "dict_nested": gs.Dict(
        {"a": gs.Dict({"b": _B2, "c": gs.Discrete(3)}), "t": gs.Tuple([gs.Discrete(2), _B2])}
    ),
    "tuple_of_dict": gs.Tuple([gs.Dict({"x": _B2}), gs.Discrete(3, start=1)]),
    "sequence": gs.Sequence(gs.Discrete(3)),
    "sequence_stacked": gs.Sequence(_B2, stack=True),
    "graph": gs.Graph(node_space=_B2, edge_space=gs.Discrete(3)),
    "oneof": gs.OneOf([gs.Discrete(3), _B2]),
}
UNLAID = ("sequence", "sequence_stacked", "graph", "oneof")  # no fixed layout (§12)
NOT_RECORDED = ("text", *UNLAID)  # EnvRunner refuses them
NOT_ACTIONS = ("sequence", "sequence_stacked", "graph")
CASES = [(n, "obs") for n in SPACES] + [(n, "act") for n in SPACES if n not in NOT_ACTIONS]
IDS = [f"{n}-{r}" for n, r in CASES]
RECORDED = [c for c in CASES if c[0] not in NOT_RECORDED]
RECORDED_IDS = [f"{n}-{r}" for n, r in RECORDED]
OTHER = gs.Box(-1, 1, (2,), np.float32)  # the other role's space


def _spaces(name, role):
    space = SPACES[name]
    return (space, gs.Discrete(3)) if role == "obs" else (OTHER, space)


class LoggingEnv(gym.Env):
    """Samples its space from a seed, ends at random, and logs every episode it plays."""

    def __init__(self, obs_space, act_space, log):
        self.observation_space, self.action_space, self.log = obs_space, act_space, log

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        obs = self.observation_space.sample()
        self.log.append({"obs": [obs], "actions": [], "rewards": [], "terminated": False})
        return obs, {}

    def step(self, action):
        obs = self.observation_space.sample()
        reward = float(self.np_random.normal())
        terminated = bool(self.np_random.random() < 0.15)
        truncated = not terminated and bool(self.np_random.random() < 0.1)
        played = self.log[-1]
        played["obs"].append(obs)
        played["actions"].append(action)
        played["rewards"].append(reward)
        played["terminated"] = terminated
        return obs, reward, terminated, truncated, {}


def same(a, b):
    """Exact equality of items: structure, values and dtypes (strings by value)."""
    if a is None or b is None:
        return a is b
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and set(a) == set(b)) and all(
            same(a[k], b[k]) for k in a
        )
    if isinstance(a, gs.GraphInstance) or isinstance(b, gs.GraphInstance):
        return all(same(getattr(a, f), getattr(b, f)) for f in ("nodes", "edges", "edge_links"))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, str) or isinstance(b, str):
        return str(a) == str(b)
    x, y = np.asarray(a), np.asarray(b)
    return x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y)


def row(batch, i):
    """Row ``i`` of a batched (nested) column."""
    if isinstance(batch, dict):
        return {k: row(v, i) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(row(v, i) for v in batch)
    if hasattr(batch, "detach"):
        batch = batch.detach().numpy()
    return batch[i]


def filler(space, fill=0):
    """The item of ``space`` with every leaf ``fill`` (§3.5)."""
    if isinstance(space, gs.Dict):
        return {k: filler(v, fill) for k, v in space.spaces.items()}
    if isinstance(space, gs.Tuple):
        return tuple(filler(v, fill) for v in space.spaces)
    return np.full(space.shape, fill, space.dtype)


def one_hot(space, item, *, zero=False):
    """``item`` with its Discrete and MultiDiscrete leaves one-hot as gymnasium flattens them."""
    if isinstance(space, gs.Dict):
        return {k: one_hot(v, None if zero else item[k], zero=zero) for k, v in space.items()}
    if isinstance(space, gs.Tuple):
        parts = [None] * len(space.spaces) if zero else item
        return tuple(one_hot(v, x, zero=zero) for v, x in zip(space.spaces, parts))
    if isinstance(space, (gs.Discrete, gs.MultiDiscrete)):
        if zero:
            return np.zeros(gs.flatdim(space), np.float32)
        return gs.flatten(space, item).astype(np.float32)
    return filler(space) if zero else item


def logged_episode(chunk, log):
    """The logged episode whose steps the chunk holds (None: none does)."""
    n, t0 = len(chunk), chunk.t_started
    obs = [chunk.get_observations(i) for i in range(n + 1)]
    acts = [chunk.get_actions(i) for i in range(n)]
    rewards = [chunk.get_rewards(i) for i in range(n)]
    for played in log:
        if len(played["obs"]) < t0 + n + 1:
            continue
        if not all(same(played["obs"][t0 + i], o) for i, o in enumerate(obs)):
            continue
        if not all(same(played["actions"][t0 + i], a) for i, a in enumerate(acts)):
            continue
        # Rewards are float64 in list mode; the numpy'd and replayed ones may be float32.
        if all(
            np.float32(played["rewards"][t0 + i]) == np.float32(r) for i, r in enumerate(rewards)
        ):
            ends = len(played["actions"]) == t0 + n
            if chunk.is_terminated == (played["terminated"] and ends):
                return played
    return None


def _policy(action_space):
    random_policy = RandomPolicy(action_space, seed=1)

    def policy(obs):
        actions, _ = random_policy(obs)
        zeros = np.zeros(len(obs) if isinstance(obs, np.ndarray) else 2, np.float32)
        return actions, {"vf_preds": zeros, "action_logp": zeros}

    return policy


def _runner(name, role, *, numpy_episodes, lookback=1):
    obs_space, act_space = _spaces(name, role)
    logs = [[], []]
    env = gym.vector.SyncVectorEnv(
        [lambda log=log: LoggingEnv(obs_space, act_space, log) for log in logs]
    )
    runner = EnvRunner(
        env,
        _policy(env.action_space),
        seed=3,
        numpy_episodes=numpy_episodes,
        len_lookback_buffer=lookback,
    )
    return runner, logs


@cache
def recorded(name, role, numpy_episodes=False):
    """Chunks of a few episodes of the case and the env's log (by hand where no runner takes it).

    The chunks are shared between tests: copy them (``from_state``) before changing one.
    """
    if name not in NOT_RECORDED:
        runner, logs = _runner(name, role, numpy_episodes=numpy_episodes)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            chunks = [*runner.sample(12), *runner.sample(7)]
        return chunks, [played for log in logs for played in log]
    obs_space, act_space = _spaces(name, role)
    log = []
    env = LoggingEnv(obs_space, act_space, log)
    env.action_space.seed(2)
    chunks, obs = [], env.reset(seed=5)[0]
    episode = None
    for _ in range(25):
        if episode is None:
            episode = SingleAgentEpisode(observation_space=obs_space, action_space=act_space)
            episode.add_env_reset(obs)
        action = env.action_space.sample()
        obs, reward, terminated, truncated, _ = env.step(action)
        outputs = {"vf_preds": np.float32(0), "action_logp": np.float32(0)}
        episode.add_env_step(
            obs, action, reward, terminated=terminated, truncated=truncated,
            extra_model_outputs=outputs,
        )  # fmt: skip
        if terminated or truncated:
            chunks.append(episode)
            episode, obs = None, env.reset()[0]
    if episode is not None:
        chunks.append(episode)
    return chunks, log


def copies(chunks, *, numpy=False):
    out = [SingleAgentEpisode.from_state(c.get_state()) for c in chunks]
    if numpy:
        for c in out:
            c.to_numpy()
    return out


def modes(name):
    return (False,) if name in UNLAID else (False, True)


# ---------------------------------------------------------------------------- the env runner
@pytest.mark.parametrize("numpy_episodes", [True, False], ids=["numpy", "list"])
@pytest.mark.parametrize(("name", "role"), RECORDED, ids=RECORDED_IDS)
def test_runner_chunks_hold_what_the_env_logged(name, role, numpy_episodes):
    chunks, log = recorded(name, role, numpy_episodes)
    assert all(logged_episode(c, log) is not None for c in chunks)
    for index in range(2):
        assert sum(len(c) for c in chunks if c.custom_data["env_index"] == index) == 19


@pytest.mark.parametrize(("name", "role"), [c for c in CASES if c[0] in NOT_RECORDED])
def test_runner_refuses_spaces_without_a_fixed_shape_naming_them(name, role):
    obs_space, act_space = _spaces(name, role)
    env = gym.vector.SyncVectorEnv([lambda: LoggingEnv(obs_space, act_space, [])] * 2)
    what = "observations" if role == "obs" else "actions"
    kind = type(SPACES[name]).__name__
    with pytest.raises(TypeError, match=f"EnvRunner cannot record {kind} {what}"):
        EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)


# ------------------------------------------------------------------------------- the getters
@pytest.mark.parametrize(("name", "role"), CASES, ids=IDS)
def test_getters_give_the_logged_items_and_fillers_in_both_modes(name, role):
    chunks, log = recorded(name, role)
    obs_space, act_space = _spaces(name, role)
    space = SPACES[name]
    fill = "" if name == "text" else 0
    for numpy in modes(name):
        for chunk in copies(chunks, numpy=numpy):
            assert logged_episode(chunk, log) is not None
            getter = chunk.get_observations if role == "obs" else chunk.get_actions
            lookback = chunk.observations.lookback if role == "obs" else chunk.actions.lookback
            padded = getter(slice(-lookback - 2, 1), neg_index_as_lookback=True, fill=fill)
            first = [row(padded, i) for i in range(2)] if numpy else padded[:2]
            # A Text leaf's filler is the string fill, an unlaid space's the fill itself (§3.5).
            want = fill if name == "text" or name in UNLAID else filler(space, fill)
            assert all(same(f, want) for f in first)
            if name in ("text", *UNLAID):
                continue
            hot = getter(one_hot_discrete=True)
            for i in range(len(chunk)):
                item = getter(i)
                assert same(row(hot, i) if numpy else hot[i], one_hot(space, item))


@pytest.mark.parametrize(("name", "role"), CASES, ids=IDS)
def test_slice_concat_cut_state_and_pickle_keep_every_item(name, role):
    chunks, _ = recorded(name, role)
    for numpy in modes(name):
        for chunk in copies(chunks, numpy=numpy):
            n = len(chunk)
            obs = [chunk.get_observations(i) for i in range(n + 1)]
            acts = [chunk.get_actions(i) for i in range(n)]
            backs = [
                SingleAgentEpisode.from_state(chunk.get_state()),
                pickle.loads(pickle.dumps(chunk)),
                SingleAgentEpisode.from_state(pickle.loads(pickle.dumps(chunk.get_state()))),
            ]
            if n >= 2:
                head = chunk.slice(slice(0, n // 2))
                head.concat_episode(chunk.slice(slice(n // 2, None)))
                backs.append(head)
                middle = chunk[1:]
                assert same([middle.get_observations(i) for i in range(n)], obs[1:])
            for back in backs:
                assert same([back.get_observations(i) for i in range(n + 1)], obs)
                assert same([back.get_actions(i) for i in range(n)], acts)
            if not chunk.is_done:
                successor = chunk.cut(len_lookback_buffer=1)
                assert same(successor.get_observations(0), obs[-1])
                assert same(successor.get_observations(-1, neg_index_as_lookback=True), obs[-2])


# ------------------------------------------------------------------------------ disk format
@pytest.mark.parametrize("data_format", ["arrow", "parquet"])
@pytest.mark.parametrize(("name", "role"), CASES, ids=IDS)
def test_dataset_round_trip_against_the_log(name, role, data_format, tmp_path):
    from episodes.io import DatasetWriter, UnstorableValueError, read_episodes, validate_dataset

    chunks, log = recorded(name, role)
    path = tmp_path / "data"
    if name == "graph":  # docs/format.md: GraphInstance items are refused
        with pytest.raises(UnstorableValueError, match="GraphInstance"):
            with DatasetWriter(path, data_format=data_format) as writer:
                writer.write_many(chunks)
        return
    with DatasetWriter(path, data_format=data_format) as writer:
        writer.write_many(chunks)
    back = list(read_episodes(path))
    assert len(back) == len(chunks)
    for chunk, read in zip(chunks, back):
        assert logged_episode(read, log) is not None
        assert read.observation_space == chunk.observation_space
        assert read.action_space == chunk.action_space
    assert validate_dataset(path).ok


# ----------------------------------------------------------------------------------- replay
def _transitions_in_log(sample, log, n_step, gamma):
    for j in range(len(sample["rewards"])):
        obs, action = row(sample["obs"], j), row(sample["actions"], j)
        k, found = int(sample["n_step"][j]), False
        for played in log:
            for t in range(len(played["actions"])):
                if not (same(played["obs"][t], obs) and same(played["actions"][t], action)):
                    continue
                rewards = played["rewards"][t : t + k]
                ret = sum(gamma**i * r for i, r in enumerate(rewards))
                after = played["obs"][min(t + k, len(played["obs"]) - 1)]
                if np.isclose(ret, sample["rewards"][j], atol=1e-5):
                    found = found or same(after, row(sample["next_obs"], j))
        assert found, f"row {j} is no logged {n_step}-step transition"


@pytest.mark.parametrize(("name", "role"), CASES, ids=IDS)
def test_replay_samples_logged_transitions_sequences_and_episodes(name, role, tmp_path):
    chunks, log = recorded(name, role)
    buffer = EpisodeReplayBuffer(10_000, seed=0)
    if name in ("text", *UNLAID):  # docs/replay.md: numeric arrays only
        with pytest.raises(TypeError, match="replay stores numeric arrays only"):
            buffer.add(copies(chunks))
        assert buffer.get_num_timesteps() == 0
        return
    buffer.add(copies(chunks))
    buffer.save(tmp_path / "saved")
    loaded = EpisodeReplayBuffer.load(tmp_path / "saved")
    for buf in (buffer, loaded):
        assert buf.get_num_timesteps() == sum(len(c) for c in chunks)
        for n_step in (1, 3):
            _transitions_in_log(buf.sample(12, n_step=n_step, gamma=0.5), log, n_step, 0.5)
        sequences = buf.sample(4, batch_length_T=3)
        for j in range(4):
            obs, acts = row(sequences["obs"], j), row(sequences["actions"], j)
            for t in range(3):
                if sequences["mask"][j][t]:
                    o, a = row(obs, t), row(acts, t)
                    assert any(
                        same(p["obs"][i], o) and same(p["actions"][i], a)
                        for p in log for i in range(len(p["actions"]))
                    )  # fmt: skip
        assert all(logged_episode(e, log) for e in buf.sample(3, sample_episodes=True))


# ------------------------------------------------------------------------------- connectors
@pytest.mark.parametrize("numpy_episodes", [True, False], ids=["numpy", "list"])
@pytest.mark.parametrize(("name", "role"), RECORDED, ids=RECORDED_IDS)
def test_frames_and_previous_actions_of_continuing_chunks_match_the_log(name, role, numpy_episodes):
    runner, logs = _runner(name, role, numpy_episodes=numpy_episodes, lookback=3)
    obs_space, act_space = _spaces(name, role)
    for _ in range(3):
        chunks = runner.sample(6)
        frames = FrameStack(3)(chunks, {})["obs"]
        prev = PrevActionsPrevRewards(2, 2)(chunks, {})
        learner = AddLearnerColumns()(chunks, {})
        flat = FlattenObservations()(chunks, {})["obs"]
        log = [played for per_env in logs for played in per_env]
        r = 0
        for chunk in chunks:
            played = logged_episode(chunk, log)
            assert played is not None
            for i in range(len(chunk)):
                ts = chunk.t_started + i
                for k in range(3):
                    t = ts - 2 + k
                    want = filler(obs_space) if t < 0 else played["obs"][t]
                    assert same(row(row(frames, r), k), want), (r, k)
                for k in range(2):
                    t = ts - 2 + k
                    got = row(row(prev["prev_n_actions"], r), k)
                    if t < 0:
                        assert same(got, one_hot(act_space, None, zero=True))
                    else:
                        assert same(got, one_hot(act_space, played["actions"][t]))
                    reward = 0.0 if t < 0 else played["rewards"][t]
                    assert np.float32(reward) == prev["prev_n_rewards"][r][k]
                assert same(row(learner["obs"], r), played["obs"][ts])
                assert same(row(learner["actions"], r), played["actions"][ts])
                want_flat = gs.flatten(obs_space, played["obs"][ts]).astype(np.float32)
                np.testing.assert_array_equal(flat[r], want_flat)
                r += 1


REFUSING = {  # connector, the role whose column it reads
    "FlattenObservations": (FlattenObservations, "obs"),
    "FrameStack": (lambda: FrameStack(3), "obs"),
    "PrevActionsPrevRewards": (lambda: PrevActionsPrevRewards(2, 0), "act"),
}
REFUSALS = [
    (name, role, connector)
    for name, role in CASES
    if name in UNLAID
    for connector, (_, reads) in REFUSING.items()
    if reads == role
]


@pytest.mark.parametrize(("name", "role", "connector"), REFUSALS, ids="-".join)
def test_connectors_refuse_columns_without_a_fixed_layout_naming_the_space(name, role, connector):
    chunks, _ = recorded(name, role)
    kind = type(SPACES[name]).__name__
    with pytest.raises(ValueError, match=f"{connector}.*holds a {kind} space"):
        REFUSING[connector][0]()(copies(chunks), {})
    rows = AddLearnerColumns()(copies(chunks), {})  # a list of items, one a row
    column = rows["obs" if role == "obs" else "actions"]
    items = [c.get_observations(i) if role == "obs" else c.get_actions(i)
             for c in chunks for i in range(len(c))]  # fmt: skip
    assert same(list(column), items)


# -------------------------------------------------------------------------------- converter
@pytest.mark.parametrize(("name", "role"), CASES, ids=IDS)
def test_episodes_to_batch_rows_are_the_items(name, role):
    pytest.importorskip("torch")
    from episodes.converter import episodes_to_batch

    chunks, _ = recorded(name, role)
    if name in UNLAID:
        what = "observations" if role == "obs" else "actions"
        with pytest.raises(ValueError, match=f"{what}: a .* space's items have no fixed layout"):
            episodes_to_batch(chunks)
        return
    batch = episodes_to_batch(chunks)
    r = 0
    for chunk in chunks:
        for i in range(len(chunk)):
            assert same(row(batch["obs"], r), chunk.get_observations(i))
            assert same(row(batch["next_obs"], r), chunk.get_observations(i + 1))
            assert same(row(batch["actions"], r), chunk.get_actions(i))
            r += 1


ROLLOUT_REFUSALS = {
    ("text", "obs"): (TypeError, "pass obs_fn to encode them"),
    ("text", "act"): (TypeError, "actions hold <U5 values"),
    ("dict_nested", "obs"): (TypeError, "pass obs_fn"),
    ("tuple_of_dict", "obs"): (TypeError, "pass obs_fn"),
    ("dict_nested", "act"): (ValueError, "one action tensor per step"),
    ("tuple_of_dict", "act"): (ValueError, "one action tensor per step"),
}


@pytest.mark.parametrize(("name", "role"), CASES, ids=IDS)
def test_episodes_to_rollout_holds_the_items_or_refuses_naming_why(name, role):
    pytest.importorskip("torch")
    from episodes.converter import episodes_to_rollout

    chunks = copies(recorded(name, role)[0])
    for chunk in chunks:
        chunk.custom_data["bootstrap_value"] = 0.0
    if name in UNLAID:
        with pytest.raises(ValueError, match="no fixed layout"):
            episodes_to_rollout(chunks, gamma=0.9, layout="per_chunk")
        return
    if (name, role) in ROLLOUT_REFUSALS:
        error, message = ROLLOUT_REFUSALS[name, role]
        with pytest.raises(error, match=message):
            episodes_to_rollout(chunks, gamma=0.9, layout="per_chunk")
        return
    rollout = episodes_to_rollout(chunks, gamma=0.9, layout="per_chunk")
    storage = rollout.storage
    for b, group in enumerate(rollout.groups):
        t = 0
        for chunk in group:
            for i in range(len(chunk)):
                obs = row(row(storage.observations, t), b)
                want = chunk.get_observations(i)
                if isinstance(want, dict):
                    assert all(np.array_equal(obs[k], want[k]) for k in want)
                else:
                    np.testing.assert_array_equal(obs.reshape(np.shape(want)), want)
                action = np.asarray(row(row(storage.actions, t), b))
                want = np.asarray(chunk.get_actions(i))
                np.testing.assert_array_equal(action.reshape(want.shape), want)
                t += 1


# --------------------------------------------------------------------------- torch datasets
def _one_branch(role):
    space = SPACES["oneof"]
    items = [(np.int64(1), np.full(2, x, np.float32)) for x in (0.5, -0.5, 0.25)]
    field = "observations" if role == "obs" else "actions"
    others = {"observations": [0.0, 1.0, 2.0], "actions": [0, 1]}
    return SingleAgentEpisode(
        "one-branch", **{**others, field: items if role == "obs" else items[:2]},
        rewards=[1.0, 0.5], len_lookback_buffer=0, **{f"{field[:-1]}_space": space}
    )  # fmt: skip


def _equal_lengths():
    return SingleAgentEpisode(
        "equal-lengths", observations=[(0, 1), (1, 2), (2, 0)], actions=[0, 1],
        rewards=[1.0, 0.5], observation_space=SPACES["sequence"], len_lookback_buffer=0,
    )  # fmt: skip


UNLAID_DATA = {  # episodes, the column, the space kind
    "sequence": (lambda: recorded("sequence", "obs")[0], "observations", "Sequence"),
    "sequence_stacked": (
        lambda: recorded("sequence_stacked", "obs")[0],
        "observations",
        "Sequence",
    ),
    "oneof_obs": (lambda: recorded("oneof", "obs")[0], "observations", "OneOf"),
    "oneof_act": (lambda: recorded("oneof", "act")[0], "actions", "OneOf"),
    # Items that happen to agree were batched position by position before: [tensor([0, 1]),
    # tensor([1, 2])] for two sequences (0, 1) and (1, 2), whatever the next piece held.
    "sequence_of_equal_lengths": (lambda: [_equal_lengths()], "observations", "Sequence"),
    "oneof_of_one_branch_obs": (lambda: [_one_branch("obs")], "observations", "OneOf"),
    "oneof_of_one_branch_act": (lambda: [_one_branch("act")], "actions", "OneOf"),
}


@pytest.mark.parametrize("kind", ["transitions", "sequences"])
@pytest.mark.parametrize("case", list(UNLAID_DATA))
def test_torch_datasets_refuse_unlaid_columns_when_made_naming_the_space(case, kind, tmp_path):
    pytest.importorskip("torch")
    from episodes.io import DatasetError, DatasetWriter, read_episodes
    from episodes.io.torch_data import SequenceDataset, TransitionDataset

    make, column, space_kind = UNLAID_DATA[case]
    with DatasetWriter(tmp_path / "data") as writer:
        writer.write_many(make())
    with pytest.raises(DatasetError, match=f"its {column} are the items of a {space_kind} space"):
        if kind == "transitions":
            TransitionDataset(tmp_path / "data")
        else:
            SequenceDataset(tmp_path / "data", length=2)
    assert len(list(read_episodes(tmp_path / "data"))) == len(make())  # still readable


@pytest.mark.parametrize("role", ["obs", "act"])
def test_text_columns_pad_with_a_string_fill_in_the_connectors(role):
    chunks, log = recorded("text", role)
    connector = FrameStack(2, fill="") if role == "obs" else PrevActionsPrevRewards(2, 0, fill="")
    default = FrameStack(2) if role == "obs" else PrevActionsPrevRewards(2, 0)
    with pytest.raises(ValueError, match="cannot fill a Text leaf: give a string"):
        default(copies(chunks), {})
    column = connector(copies(chunks), {})["obs" if role == "obs" else "prev_n_actions"]
    r = 0
    for chunk in chunks:
        played = logged_episode(chunk, log)
        for i in range(len(chunk)):
            if role == "obs":
                want = [played["obs"][t] if t >= 0 else "" for t in (i - 1, i)]
            else:
                want = [played["actions"][t] if t >= 0 else "" for t in (i - 2, i - 1)]
            assert column[r].tolist() == want
            r += 1
