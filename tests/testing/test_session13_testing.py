"""Session 13 fixes of the testing toolkit: contracts on copies, messages, strategy arguments."""

import copy
import warnings

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.testing import (
    ConnectorContractError,
    check_connector,
    check_does_not_mutate,
    check_handles_empty_and_reset,
    check_list_numpy_agree,
    check_lookback_across_cuts,
    outputs_equal,
)
from episodes.testing.strategies import (
    chunked_episodes,
    episodes,
    replay_in_chunks,
    rollouts,
    spaces,
)

BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
D = gym.spaces.Discrete(2)


def _clips_space(eps, batch):
    for ep in eps:
        ep.observation_space.low[...] = -0.5  # tightens the space in place: a mutation
    return dict(batch)


def _box_episode(space=BOX, length=2):
    return SingleAgentEpisode(
        observations=[np.zeros(2, np.float32)] * (length + 1),
        observation_space=space,
        actions=[0] * length,
        rewards=[0.0] * length,
        len_lookback_buffer=0,
    )


# ------------------------------------------------------------ 1. contracts work on copies
def test_check_connector_catches_a_connector_changing_the_space_in_place():
    """The empty contract ran first on the caller's space; the mutation check then copied the
    changed space and saw nothing."""
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ConnectorContractError, match="mutated input episode"):
            check_connector(_clips_space, observation_space=space, max_examples=10)
    np.testing.assert_array_equal(space.low, [-1.0, -1.0])


@pytest.mark.parametrize(
    "run",
    [
        pytest.param(
            lambda space: check_handles_empty_and_reset(_clips_space, space), id="empty_and_reset"
        ),
        pytest.param(
            lambda space: check_lookback_across_cuts(_clips_space, _box_episode(space), 0, 1, 0),
            id="lookback_across_cuts",
        ),
        pytest.param(
            lambda space: check_does_not_mutate(_clips_space, [_box_episode(space)]),
            id="does_not_mutate",
        ),
    ],
)
def test_no_contract_changes_the_callers_space(run):
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run(space)
    except ConnectorContractError:
        pass
    np.testing.assert_array_equal(space.low, [-1.0, -1.0])


def test_check_does_not_mutate_leaves_the_callers_episodes_as_they_were():
    ep = _box_episode()
    twin = copy.deepcopy(ep)

    def in_place(eps, batch):
        for e in eps:
            e.custom_data["seen"] = True
        return dict(batch)

    with pytest.raises(ConnectorContractError, match="custom_data"):
        check_does_not_mutate(in_place, [ep])
    assert ep == twin


# ------------------------------------------------------ 2. list/numpy skips what won't stack
@pytest.mark.parametrize(
    "episode",
    [
        pytest.param(
            SingleAgentEpisode(
                observations=[0, 1, 2],
                observation_space=gym.spaces.Discrete(4),
                actions=[0, 1],
                rewards=[0.0, 0.0],
                extra_model_outputs={"candidates": [np.array([1]), np.array([1, 2])]},
                len_lookback_buffer=0,
            ),
            id="ragged extra model outputs",
        ),
        pytest.param(
            SingleAgentEpisode(
                observations=[[0], [0, 1], [0, 1, 2]],
                actions=[0, 1],
                rewards=[0.0, 0.0],
                len_lookback_buffer=0,
            ),
            id="ragged observations without a space",
        ),
    ],
)
def test_list_numpy_agree_skips_episodes_to_numpy_cannot_stack(episode):
    check_list_numpy_agree(lambda eps, batch: {"n": [len(ep) for ep in eps]}, [episode])


def test_list_numpy_agree_skips_drawn_sequence_extra_outputs():
    seq = gym.spaces.Sequence(gym.spaces.Discrete(4))

    @settings(max_examples=20, derandomize=True, database=None)
    @given(episodes(D, D, min_len=2, numpy=False, extra_model_outputs={"candidates": seq}))
    def test(ep):
        check_list_numpy_agree(lambda eps, batch: {"n": [len(e) for e in eps]}, [ep])

    test()


# ---------------------------------------------------- 3./4. mutation messages name the field
def _make():
    return SingleAgentEpisode(
        observations=[0, 1, 2],
        actions=[0, 1],
        rewards=[0.0, 1.0],
        infos=[{}, {}, {}],
        extra_model_outputs={"vf": [0.0, 0.0]},
        len_lookback_buffer=0,
    )


def _tags_custom_data(ep):
    ep.custom_data["seen"] = True


def _writes_info(ep):
    ep.get_infos(0)["seen"] = True


def _overwrites_vf(ep):
    ep.set_extra_model_outputs(key="vf", new_data=9.0, at_indices=0)


def _edits_rewards(ep):
    ep.set_rewards(new_data=5.0, at_indices=0)


def _bumps_t_started(ep):
    ep.t_started += 1


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (_tags_custom_data, ["custom_data", "'seen'"]),
        (_writes_info, ["infos[0]", "'seen'"]),
        (_overwrites_vf, ["extra_model_outputs['vf']", "0.", "9."]),
        (_edits_rewards, ["rewards", "0.", "5."]),
        (_bumps_t_started, ["t_started: 0 before, 1 after"]),
    ],
    ids=["custom_data", "infos", "extra_model_outputs", "rewards", "t_started"],
)
def test_mutation_message_names_the_changed_field_with_both_values(edit, expected, numpy):
    def connector(eps, batch):
        for ep in eps:
            edit(ep)
        return dict(batch)

    ep = _make().to_numpy() if numpy else _make()
    with pytest.raises(ConnectorContractError) as err:
        check_does_not_mutate(connector, [ep])
    for text in expected:
        assert text in str(err.value)


def test_an_inconsistent_episode_is_reported_not_a_crash():
    """repr() of a just-reset episode whose t_started moved past t raised ValueError."""
    ep = SingleAgentEpisode(observations=[0], len_lookback_buffer=0)

    def connector(eps, batch):
        for e in eps:
            e.t_started += 1
        return dict(batch)

    with pytest.raises(ConnectorContractError, match="t_started: 0 before, 1 after"):
        check_does_not_mutate(connector, [ep])


# ---------------------------------------------------------------------- 5./6. replay_in_chunks
def test_replay_in_chunks_gives_each_chunk_its_own_custom_data():
    ep = SingleAgentEpisode(
        observations=[0, 1, 2, 3], actions=[0, 1, 0], rewards=[0.0] * 3, len_lookback_buffer=0
    )
    ep.custom_data["visits"] = [0]
    chunks = replay_in_chunks(ep, (1, 2), (0, 0))
    chunks[0].custom_data["visits"].append(1)
    assert [c.custom_data["visits"] for c in chunks] == [[0, 1], [0], [0]]
    assert ep.custom_data == {"visits": [0]}


@pytest.mark.parametrize("flag", ["terminated", "truncated"])
@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_replay_in_chunks_keeps_the_end_of_a_zero_step_episode(flag, numpy):
    ep = SingleAgentEpisode(observations=[5], len_lookback_buffer=0, **{flag: True})
    if numpy:
        ep.to_numpy()
    (chunk,) = replay_in_chunks(ep, (), ())
    assert getattr(chunk, f"is_{flag}")
    assert chunk == ep


# ------------------------------------------------------ 7. arguments are checked up front
@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: episodes(D, D, min_len=3, max_len=1), ValueError, "min_len"),
        (lambda: episodes(D, D, lookback=(3, 1)), ValueError, "lookback"),
        (lambda: episodes(D, D, lookback=-1), ValueError, "lookback"),
        (lambda: episodes(D, D, t_started=(2, 1)), ValueError, "t_started"),
        (lambda: episodes(D, D, done="yes"), ValueError, "done"),
        (lambda: episodes(D, D, numpy="no"), ValueError, "numpy"),
        (lambda: episodes(3, D), TypeError, "observation_space"),
        (lambda: episodes(D, "Discrete(2)"), TypeError, "action_space"),
        (lambda: episodes(D, D, extra_model_outputs=["vf"]), TypeError, "extra_model_outputs"),
        (
            lambda: episodes(D, D, extra_model_outputs={"vf": spaces()}),
            TypeError,
            "extra_model_outputs",
        ),
        (lambda: episodes(D, D, extra_model_outputs={1: D}), TypeError, "extra_model_outputs"),
        (lambda: episodes(D, D, id_=1.5), TypeError, "id_"),  # an int id is taken
        (
            lambda: episodes(gym.spaces.Sequence(D), D, numpy=True),
            ValueError,
            "numpy=True",
        ),
        (lambda: chunked_episodes(max_chunks=0), ValueError, "max_chunks"),
        (lambda: chunked_episodes(max_cut_lookback=-1), ValueError, "max_cut_lookback"),
        (lambda: chunked_episodes(maxlen=3), TypeError, "maxlen"),
        (lambda: chunked_episodes(min_len=4, max_len=2), ValueError, "min_len"),
        (lambda: rollouts(T=0), ValueError, "T must"),
        (lambda: rollouts(N=(3, 1)), ValueError, "N range"),
        (lambda: rollouts(obs_dim=1.5), ValueError, "obs_dim"),
        (lambda: rollouts(hidden="rnn"), ValueError, "hidden"),
        (lambda: rollouts(num_layers=0), ValueError, "num_layers"),
        (lambda: rollouts(hidden_size="2"), ValueError, "hidden_size"),
    ],
)
def test_strategies_refuse_bad_arguments_when_built(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_rollouts_take_ranges_for_the_recurrent_sizes():
    @settings(max_examples=5, database=None)
    @given(rollouts(2, 1, hidden="gru", num_layers=(1, 2), hidden_size=(1, 2)))
    def test(r):
        _, layers, _, width = r["hidden_states"][0][0].shape
        assert 1 <= layers <= 2 and 1 <= width <= 2

    pytest.importorskip("torch")
    test()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"lookback": -1}, ValueError, "lookback"),
        ({"lookback": 1.0}, ValueError, "lookback"),
        ({"max_len": "6"}, ValueError, "max_len"),
        ({"max_examples": 0}, ValueError, "max_examples"),
        ({"observation_space": 3}, TypeError, "observation_space"),
        ({"action_space": [D]}, TypeError, "action_space"),
    ],
)
def test_check_connector_refuses_bad_arguments_before_any_contract(kwargs, error, match):
    calls = []

    def connector(eps, batch):
        calls.append(1)
        return dict(batch)

    with pytest.raises(error, match=match):
        check_connector(connector, **kwargs)
    assert not calls


# ------------------------------------------------------------- 8. row keys message names keys
def test_lookback_rows_message_lists_both_key_sets():
    ep = SingleAgentEpisode(
        observations=[0, 1, 2, 3], actions=[0, 0, 0], rewards=[0.0] * 3, len_lookback_buffer=0
    )

    def renames_on_chunks(eps, batch):
        e = eps[0]
        return {"rewards" if e.t_started == 0 else "reward": e.get_rewards()}

    with pytest.raises(ConnectorContractError) as err:
        check_lookback_across_cuts(renames_on_chunks, ep, 1, 3, 1)
    assert "['rewards'] on the whole episode, ['reward'] on the chunk" in str(err.value)


# ------------------------------------------------- settled: empty lists vs arrays without rows
@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ([], np.zeros((0, 2), np.float32), True),
        (np.asarray([]), np.zeros((0, 2)), True),
        ([[], []], np.zeros((2, 0, 2)), True),
        ({"obs": []}, {"obs": np.zeros((0, 3, 2))}, True),
        (np.zeros((0, 2)), np.zeros((0, 3)), False),
        ([[], []], np.zeros((3, 0, 2)), False),
        ([], np.zeros((1, 2)), False),
    ],
)
def test_an_empty_list_equals_an_array_without_rows(a, b, equal):
    assert outputs_equal(a, b) is equal
    assert outputs_equal(b, a) is equal
    assert not outputs_equal(a, b, check_dtype=True) or np.shape(a) == np.shape(b)


def test_list_numpy_agree_accepts_the_librarys_own_data_dict_on_zero_step_episodes():
    act = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    ep = SingleAgentEpisode(
        observations=[np.zeros(2, np.float32)], observation_space=BOX, action_space=act
    )
    check_list_numpy_agree(lambda eps, b: {**b, "d": [e.get_data_dict() for e in eps]}, [ep])


def test_check_connector_passes_a_data_dict_connector():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_connector(
            lambda eps, b: {**b, "d": [e.get_data_dict() for e in eps]},
            observation_space=BOX,
            action_space=st.just(gym.spaces.Box(-1.0, 1.0, (2,), np.float32)),
            max_examples=10,
        )
