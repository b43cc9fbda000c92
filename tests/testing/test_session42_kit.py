"""Session 42: the testing kit as a migrating RLlib user meets it.

- ``check_connector`` sees a connector's first call on each example's (fresh) episode ids;
- ``episodes()`` draws episodes both terminated and truncated;
- ``check_connector(skip=...)`` leaves named contracts out (future-reading connectors);
- ``episodes(infos=..., id_=int)``;
- the setter rows of docs/deviations.md (empty-list-index-numpy, negative-step-defaults).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.testing import ConnectorContractError, check_connector
from episodes.testing.strategies import chunked_episodes, episodes
from episodes.testing.suite import CONTRACTS

D2 = gym.spaces.Discrete(2)
D3 = gym.spaces.Discrete(3)
OBS = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
FIND = settings(max_examples=2000, database=None, deadline=None)


# ------------------------------------------------------------------ first sight of an episode id
def make_first_seen():
    """A "continuing chunk?" flag: 0.0 the first time an id is seen, 1.0 afterwards."""
    seen: set = set()

    def connector(eps, batch):
        out = np.asarray([float(ep.id_ in seen) for ep in eps], np.float32)
        seen.update(ep.id_ for ep in eps)
        return {**batch, "continuing": out}

    return connector


@pytest.mark.parametrize("max_examples", [10, 25, 100])
def test_check_connector_reports_a_connector_keyed_on_first_sight(max_examples):
    with pytest.raises(ConnectorContractError, match="not deterministic"):
        check_connector(
            make_first_seen(), observation_space=D2, action_space=D2, max_examples=max_examples
        )


def test_check_connector_draws_fresh_ids_for_each_example():
    seen: list[set] = []

    def record(eps, batch):
        seen.append({ep.id_ for ep in eps})
        return dict(batch)

    check_connector(record, observation_space=D2, action_space=D2, max_examples=25)
    # Drawn ids (the just-reset episodes of the empty-and-reset contract have uuid ids): each
    # example draws its own pair, not "ep-0"/"ep-1" for every example.
    ids = {id_ for ids in seen for id_ in ids if id_.startswith("ep-")}
    assert len(ids) > 4, ids


# ------------------------------------------------------------------ both flags
@pytest.mark.parametrize(
    ("done", "state"),
    [
        (None, (True, True)),
        (None, (True, False)),
        (None, (False, True)),
        (None, (False, False)),
        (True, (True, True)),
        ("both", (True, True)),
    ],
)
def test_episodes_draw_every_end_state(done, state):
    ep = find(
        episodes(D2, D2, done=done),
        lambda ep: (ep.is_terminated, ep.is_truncated) == state,
        settings=FIND,
    )
    ep.validate()


@pytest.mark.parametrize(
    ("done", "allowed"),
    [
        ("both", {(True, True)}),
        ("terminated", {(True, False)}),
        ("truncated", {(False, True)}),
        (True, {(True, True), (True, False), (False, True)}),
        (False, {(False, False)}),
    ],
)
def test_episodes_done_keeps_to_its_states(done, allowed):
    @settings(max_examples=40, database=None, deadline=None)
    @given(episodes(D2, D2, done=done))
    def check(ep):
        assert (ep.is_terminated, ep.is_truncated) in allowed

    check()


def test_chunked_episodes_keep_both_flags_on_the_last_chunk():
    ce = find(
        chunked_episodes(observation_space=D2, action_space=D2, done="both", min_len=2),
        lambda ce: len(ce.chunks) > 1,
        settings=FIND,
    )
    last = ce.chunks[-1]
    assert (last.is_terminated, last.is_truncated) == (True, True)
    assert not any(c.is_done for c in ce.chunks[:-1])


def test_episodes_refuses_an_unknown_done_naming_both():
    with pytest.raises(ValueError, match="'both'"):
        episodes(done="neither")


# ------------------------------------------------------------------ skip
def returns_to_go(eps, batch, gamma=0.99):
    rows = []
    for ep in eps:
        r = np.asarray(ep.get_rewards(), np.float64)
        g, out = 0.0, np.zeros(len(r), np.float32)
        for t in range(len(r) - 1, -1, -1):
            g = r[t] + gamma * g
            out[t] = g
        rows.append(out)
    return {**batch, "value_targets": np.concatenate(rows) if rows else np.zeros(0, np.float32)}


def steps_to_go(eps, batch):
    """Steps left to the chunk's end for each step: reads the future, as returns-to-go do."""
    rows = [np.arange(len(ep), 0, -1, dtype=np.float32) for ep in eps]
    return {**batch, "steps_to_go": np.concatenate(rows) if rows else np.zeros(0, np.float32)}


@pytest.mark.parametrize("connector", [steps_to_go, returns_to_go])
def test_a_future_reading_connector_fails_the_cuts_contract_unless_skipped(connector):
    kwargs = {"observation_space": D3, "action_space": D2, "max_examples": 25}
    if connector is steps_to_go:  # every chunk ending early shows it (returns: most do)
        # At 25 examples about one run in 15 drew no chunk that ends early: 200 here.
        with pytest.raises(ConnectorContractError, match="chunk"):
            check_connector(connector, **{**kwargs, "max_examples": 200})
    check_connector(connector, skip=["lookback_across_cuts"], **kwargs)


def normalise_in_place(eps, batch):
    for ep in eps:
        obs = ep.get_observations()
        if ep.is_numpy:
            obs *= 0.5  # a view into the episode
    return dict(batch)


def counting():
    calls = []

    def connector(eps, batch):
        calls.append(1)
        return {**batch, "calls": len(calls)}

    return connector


@pytest.mark.parametrize(
    ("make", "breaks", "others"),
    [
        # (connector factory, the contract it breaks, what else to skip so only it matters)
        (lambda: normalise_in_place, "does_not_mutate", ()),
        (counting, "deterministic", ("list_numpy_agree", "lookback_across_cuts")),
        (lambda: steps_to_go, "lookback_across_cuts", ()),
    ],
    ids=["mutating", "counting", "future"],
)
def test_skipping_the_broken_contract_passes(make, breaks, others):
    kwargs = {"observation_space": OBS, "action_space": D2, "max_examples": 30}
    with pytest.raises(ConnectorContractError):  # 200: 30 drew no early-ending chunk 2 in 60
        check_connector(make(), skip=others, **{**kwargs, "max_examples": 200})
    check_connector(make(), skip=(breaks, *others), **kwargs)


def test_skipping_every_contract_calls_nothing():
    calls = []
    check_connector(lambda eps, b: calls.append(1) or dict(b), skip=CONTRACTS, max_examples=3)
    assert calls == []


@pytest.mark.parametrize(
    ("skip", "error", "match"),
    [
        (["lookback"], ValueError, "unknown contracts \\['lookback'\\]"),
        (["test_deterministic"], ValueError, "unknown contracts"),
        ("lookback_across_cuts", TypeError, "collection of contract names"),
        (None, TypeError, "collection of contract names"),
        (3, TypeError, "collection of contract names"),
    ],
)
def test_bad_skip_is_refused_before_any_call(skip, error, match):
    calls = []
    with pytest.raises(error, match=match):
        check_connector(lambda eps, b: calls.append(1) or dict(b), skip=skip, max_examples=3)
    assert calls == []


# ------------------------------------------------------------------ infos= and int ids
def test_infos_strategy_draws_the_infos():
    final = st.fixed_dictionaries({"final_obs": st.integers(0, 1), "nested": st.just({"a": [1]})})

    @settings(max_examples=20, database=None, deadline=None)
    @given(episodes(D2, D2, infos=final, lookback=(0, 2)))
    def check(ep):
        infos = ep.get_infos(slice(-ep.infos.lookback, None), neg_index_as_lookback=True)
        assert len(infos) == len(ep) + 1 + ep.infos.lookback
        assert all(set(info) == {"final_obs", "nested"} for info in infos)
        # each step its own object, even where the strategy draws a shared one (st.just)
        assert len({id(info["nested"]) for info in infos}) == len(infos)
        assert len({id(info) for info in infos}) == len(infos)

    check()


def test_infos_strategy_of_one_shared_dict_gives_each_step_its_own():
    ep = find(episodes(D2, D2, infos=st.just({"a": 1}), min_len=2), lambda ep: True)
    infos = ep.get_infos()
    assert infos == [{"a": 1}] * len(infos)
    infos[0]["a"] = 2
    assert ep.get_infos()[1] == {"a": 1}


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"infos": {"a": 1}}, TypeError, "infos must be a hypothesis strategy"),
        ({"infos": [st.just({})]}, TypeError, "infos must be a hypothesis strategy"),
        ({"id_": True}, TypeError, "id_ must be"),
        ({"id_": 1.5}, TypeError, "id_ must be"),
        ({"id_": ("run", 1)}, TypeError, "id_ must be"),
    ],
)
def test_bad_infos_or_id_is_refused_when_built(kwargs, error, match):
    with pytest.raises(error, match=match):
        episodes(**kwargs)


def test_an_infos_strategy_drawing_no_dict_is_a_type_error():
    @settings(max_examples=3, database=None, deadline=None)
    @given(episodes(D2, D2, infos=st.integers()))
    def check(ep):
        pass

    with pytest.raises(TypeError, match="must draw dicts, got int"):
        check()


@pytest.mark.parametrize(
    "id_", [0, 7, np.int64(3), "run-1", st.integers(0, 3), st.sampled_from([0, "a"])]
)
def test_ids_int_str_or_drawn(id_):
    @settings(max_examples=10, database=None, deadline=None)
    @given(episodes(D2, D2, id_=id_))
    def check(ep):
        if isinstance(id_, st.SearchStrategy):
            assert ep.id_ in (0, 1, 2, 3, "a")
        else:
            assert ep.id_ == id_ and type(ep.id_) is type(id_)
        ep.validate()

    check()


# ------------------------------------------------------------------ setter deviations
def _episode(numpy: bool) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        observations=[np.zeros(2, np.float32)] * 7,
        actions=[0, 1, 2, 0, 1, 2],
        rewards=[0.5] * 6,
        observation_space=OBS,
        action_space=D3,
        len_lookback_buffer=0,
    )
    return ep.to_numpy() if numpy else ep


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize(
    "write",
    [
        lambda ep: ep.set_actions(new_data=np.zeros(0, np.int64), at_indices=slice(1, 1)),
        lambda ep: ep.set_actions(new_data=np.zeros(0, np.int64), at_indices=slice(5, 5, 2)),
        lambda ep: ep.set_actions(new_data=[], at_indices=slice(1, 1)),
        lambda ep: ep.set_rewards(new_data=np.zeros(0, np.float32), at_indices=slice(3, 1)),
        lambda ep: ep.set_observations(new_data=np.zeros((0, 2), np.float32), at_indices=[]),
    ],
    ids=["actions-1-1", "actions-5-5-2", "actions-list", "rewards-3-1", "obs-no-indices"],
)
def test_empty_list_index_numpy_setter_writing_nothing_changes_nothing(write, numpy):
    # docs/deviations.md, row "empty-list-index-numpy": RLlib 2.60 raises IndexError
    # (numpy'd, an empty array at an empty slice); here it is a no-op in both modes.
    ep = _episode(numpy)
    before = ep.get_state()
    write(ep)
    after = ep.get_state()
    assert SingleAgentEpisode.from_state(after) == SingleAgentEpisode.from_state(before)


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize(
    ("at", "data", "written"),
    [
        (slice(3, None, -2), [8.0, 9.0], {3: 8.0, 1: 9.0}),  # open stop: down to ts=0
        (slice(None, None, -2), [8.0, 9.0, 7.0], {5: 8.0, 3: 9.0, 1: 7.0}),  # open start
        (slice(3, 0, -2), [8.0, 9.0], {3: 8.0, 1: 9.0}),  # explicit bounds: as RLlib
        (slice(-1, -3, -2), [8.0], {5: 8.0}),
    ],
)
def test_negative_step_defaults_setters_write_as_a_list_would(at, data, written, numpy):
    # docs/deviations.md, row "negative-step-defaults": RLlib 2.60 raises IndexError for the
    # open bounds (it reads stop=None as the end); explicit bounds agree.
    ep = _episode(numpy)
    ep.set_rewards(new_data=np.asarray(data, np.float32) if numpy else data, at_indices=at)
    expected = [written.get(i, 0.5) for i in range(6)]
    assert np.asarray(ep.get_rewards()).tolist() == expected
    assert np.asarray(ep.get_rewards())[at].tolist() == data


def test_rllib_raises_on_the_setter_rows():
    rllib = pytest.importorskip("ray.rllib.env.single_agent_episode")

    def theirs(numpy):
        ep = rllib.SingleAgentEpisode(
            observations=[np.zeros(2, np.float32)] * 7,
            actions=[0, 1, 2, 0, 1, 2],
            rewards=[0.5] * 6,
            observation_space=OBS,
            action_space=D3,
            len_lookback_buffer=0,
        )
        return ep.to_numpy() if numpy else ep

    for at in (slice(1, 1), slice(5, 5, 2)):
        with pytest.raises(IndexError):
            theirs(True).set_actions(new_data=np.zeros(0, np.int64), at_indices=at)
    with pytest.raises(IndexError):
        theirs(False).set_rewards(new_data=[8.0, 9.0], at_indices=slice(3, None, -2))
    ep = theirs(False)
    ep.set_rewards(new_data=[8.0, 9.0], at_indices=slice(3, 0, -2))
    assert list(ep.get_rewards()) == [0.5, 9.0, 0.5, 8.0, 0.5, 0.5]
