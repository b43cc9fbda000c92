"""Session 15 fixes: connectors and episodes.testing.

1. Sequence, Graph and OneOf columns: refused by the array connectors, lists in
   AddLearnerColumns (they were stacked into one column per position, NaNs or bare errors).
2. check_connector raises one ConnectorContractError, not an ExceptionGroup.
3. A fill that cannot fill an item is refused whether or not a row needs padding.
4. ``test_<contract> = None`` in a ConnectorContract subclass drops that test.
5. One episode (or a list holding a non-episode) is a TypeError naming the item.
6. spaces(kinds=...) errors name ``kinds``.
7. ConnectorPipeline refuses unordered collections; outputs_equal's check_dtype as documented.
"""

from __future__ import annotations

import copy
import itertools
import re

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import settings

from episodes import SingleAgentEpisode
from episodes.connectors import (
    AddLearnerColumns,
    ConnectorPipeline,
    FlattenObservations,
    FrameStack,
    PrevActionsPrevRewards,
)
from episodes.testing import (
    ConnectorContract,
    ConnectorContractError,
    check_connector,
    check_deterministic,
    check_does_not_mutate,
    check_list_numpy_agree,
    check_lookback_across_cuts,
    outputs_equal,
)
from episodes.testing.strategies import spaces

D2, D3 = gym.spaces.Discrete(2), gym.spaces.Discrete(3)
SEQ = gym.spaces.Sequence(D3)
GRAPH = gym.spaces.Graph(gym.spaces.Box(0, 1, (1,)), None)
ONE_OF = gym.spaces.OneOf([D2, gym.spaces.Box(0, 1, (2,))])


def _graph(nodes: int) -> gym.spaces.GraphInstance:
    return gym.spaces.GraphInstance(np.full((nodes, 1), 0.5, np.float32), None, None)


OBSERVATIONS = {
    "sequence-equal-lengths": (SEQ, [(1, 2), (2, 0), (0, 1), (1, 1)]),
    "sequence-empty": (SEQ, [(), (), (), ()]),
    "sequence-ragged": (SEQ, [(1,), (2, 0), (), (1,)]),
    "graph": (GRAPH, [_graph(2), _graph(2), _graph(3), _graph(1)]),
    "one-of": (ONE_OF, [(0, np.int64(1)), (0, np.int64(0)), (0, np.int64(1)), (0, np.int64(0))]),
    "dict-holding-a-sequence": (
        gym.spaces.Dict({"s": SEQ, "d": D2}),
        [{"s": (1,), "d": 0}, {"s": (1, 2), "d": 1}, {"s": (), "d": 0}, {"s": (0,), "d": 1}],
    ),
}


def _episode(obs_space=D3, obs=(0, 1, 2, 0), act_space=D2, actions=(0, 1, 0), **kwargs):
    return SingleAgentEpisode(
        kwargs.pop("id_", "e"),
        observations=list(obs),
        observation_space=obs_space,
        actions=list(actions),
        action_space=act_space,
        rewards=[1.0] * len(actions),
        len_lookback_buffer=kwargs.pop("len_lookback_buffer", 0),
        **kwargs,
    )


# ------------------------------------------------------------- 1. Sequence, Graph and OneOf
ARRAY_CONNECTORS = {
    "flatten": (lambda: FlattenObservations(), "FlattenObservations' 'obs'"),
    "frame-stack": (lambda: FrameStack(1), "FrameStack's 'obs'"),
    "frame-stack-2": (lambda: FrameStack(2), "FrameStack's 'obs'"),
    "frame-stack-flat": (lambda: FrameStack(2, flatten=True), "FrameStack's 'obs'"),
    "frame-stack-inference": (lambda: FrameStack(2, inference=True), "FrameStack's 'obs'"),
    "flatten-out-key": (lambda: FlattenObservations(out_key="o"), "FlattenObservations' 'o'"),
}


@pytest.mark.parametrize("obs_case", list(OBSERVATIONS))
@pytest.mark.parametrize("connector_case", list(ARRAY_CONNECTORS))
def test_array_connectors_refuse_observations_without_a_fixed_layout(obs_case, connector_case):
    space, obs = OBSERVATIONS[obs_case]
    make, name = ARRAY_CONNECTORS[connector_case]
    kind = type(space).__name__ if type(space).__name__ != "Dict" else "Sequence"
    batch = {"kept": 1}
    with pytest.raises(ValueError, match=rf"{name} column.*holds a {kind} space"):
        make()([_episode(space, obs)], batch)
    assert batch == {"kept": 1}


@pytest.mark.parametrize(
    "space, actions",
    [(SEQ, [(1,), (2, 0), ()]), (GRAPH, [_graph(1), _graph(1), _graph(1)])],
    ids=["sequence", "graph"],
)
@pytest.mark.parametrize("one_hot", [True, False])
def test_prev_actions_refuses_actions_without_a_fixed_layout(space, actions, one_hot):
    connector = PrevActionsPrevRewards(1, 1, one_hot_discrete=one_hot)
    batch: dict = {}
    with pytest.raises(ValueError, match=r"'prev_n_actions' column.*(Sequence|Graph) space"):
        connector([_episode(act_space=space, actions=actions)], batch)
    assert batch == {}


@pytest.mark.parametrize("obs_case", list(OBSERVATIONS))
def test_learner_columns_give_such_observations_as_lists_of_items(obs_case):
    space, obs = OBSERVATIONS[obs_case]
    a, b = _episode(space, obs, id_="a"), _episode(space, obs[:3], actions=(1, 0), id_="b")
    out = AddLearnerColumns()([a, b], {})
    want = a.get_data_dict()["obs"] + b.get_data_dict()["obs"]
    assert isinstance(out["obs"], list) and len(out["obs"]) == len(out["actions"]) == 5
    assert outputs_equal(out["obs"], want)
    # copies: changing the batch never reaches the episodes
    before = copy.deepcopy(a)
    if obs_case == "graph":
        out["obs"][0].nodes[:] = 7.0
    elif obs_case.startswith("dict"):
        out["obs"][0]["d"] = 9
    assert a == before


def test_learner_columns_give_a_sequence_extra_output_as_a_list():
    ep = _episode(extra_model_outputs={"cand": [(1,), (2, 0), ()]})
    ep.extra_model_outputs["cand"].space = SEQ
    out = AddLearnerColumns()([ep], {})
    assert out["cand"] == [(1,), (2, 0), ()]
    assert isinstance(out["obs"], np.ndarray)  # the stackable columns stay arrays


def test_learner_columns_refuse_list_rows_next_to_array_rows():
    seq = _episode(SEQ, [(1,), (2,), (0,), (1,)], id_="seq")
    box = _episode(gym.spaces.Box(0, 3, (1,)), np.zeros((4, 1), np.float32), id_="box")
    batch = {"kept": 1}
    with pytest.raises(ValueError, match=r"'obs' column of episode 'seq' holds Sequence.*'box'"):
        AddLearnerColumns()([seq, box], batch)
    assert batch == {"kept": 1}


# --------------------------------------------------- 2. one ConnectorContractError, no group
def test_check_connector_raises_one_contract_error_when_two_contracts_break():
    calls = itertools.count()

    def connector(episodes, batch):
        if any(len(ep) >= 2 for ep in episodes):  # nondeterministic on long episodes
            return {**batch, "call": next(calls)}
        for ep in episodes:  # mutates short ones
            ep.custom_data["seen"] = True
        return dict(batch)

    with pytest.raises(ConnectorContractError):
        check_connector(connector, observation_space=D2, max_examples=25)


# ------------------------------------------------------ 3. a bad fill, padded or not
WHOLE = _episode(D3, [0, 1, 2, 0, 1], D2, [0, 1, 0, 1], len_lookback_buffer=2)
BAD_FILLS = {
    "vector-fill-scalar-rewards": (lambda: PrevActionsPrevRewards(0, 1, fill=np.zeros(2))),
    "string-fill-rewards": (lambda: PrevActionsPrevRewards(0, 1, fill="0")),
    "fraction-for-discrete-obs": (lambda: FrameStack(2, fill=0.5)),
    "fraction-for-discrete-obs-n1": (lambda: FrameStack(1, fill=0.5)),
    "vector-fill-scalar-obs": (lambda: FrameStack(2, fill=np.zeros(5))),
    "fraction-for-raw-actions": (lambda: PrevActionsPrevRewards(1, 0, fill=0.5,
                                                                one_hot_discrete=False)),
    "vector-fill-raw-actions": (lambda: PrevActionsPrevRewards(1, 0, fill=np.zeros(5),
                                                               one_hot_discrete=False)),
}  # fmt: skip


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("cut", [False, True], ids=["whole-no-padding", "cut-padding"])
@pytest.mark.parametrize("case", list(BAD_FILLS))
def test_a_fill_that_cannot_fill_an_item_is_refused_padded_or_not(case, cut, numpy):
    ep = copy.deepcopy(WHOLE)
    if numpy:
        ep.to_numpy()
    if cut:
        ep = ep.slice(slice(0, 2), len_lookback_buffer=0)
    batch = {"kept": 1}
    with pytest.raises(ValueError, match="fill="):
        BAD_FILLS[case]()([ep], batch)
    assert batch == {"kept": 1}


def test_fills_that_fit_are_still_taken_without_padding():
    ep = copy.deepcopy(WHOLE)
    assert FrameStack(2, fill=-1)([ep], {})["obs"].tolist() == [[1, 2], [2, 0]]
    # one-hot actions pad with all-zero vectors whatever the fill: any fill is taken there
    assert PrevActionsPrevRewards(1, 0, fill=np.zeros(5))([ep], {})["prev_n_actions"].shape
    out = PrevActionsPrevRewards(1, 1, fill=np.float32(0), one_hot_discrete=False)([ep], {})
    assert out["prev_n_rewards"].dtype == np.float32


# ---------------------------------------------------------------- 4. test_<contract> = None
class _Dropping(ConnectorContract):
    observation_space = D3
    test_list_numpy_agree = None

    def make_connector(self):
        return lambda episodes, batch: {**batch, "n": len(episodes)}


class _DroppingChild(_Dropping):
    pass


class _Restoring(_Dropping):
    def test_list_numpy_agree(self):
        return "own"


def test_a_contract_test_set_to_none_is_dropped_in_subclasses_too():
    assert _Dropping.test_list_numpy_agree is None
    assert _DroppingChild.test_list_numpy_agree is None
    assert _Restoring().test_list_numpy_agree() == "own"
    # the other contracts stay, and still run
    check = settings(max_examples=3, database=None)(_DroppingChild.test_deterministic)
    check(_DroppingChild())


# ------------------------------------------------------------ 5. lists of episodes only
EP = _episode()
SHIPPED = {
    "flatten": FlattenObservations,
    "frame-stack": lambda: FrameStack(2),
    "prev": lambda: PrevActionsPrevRewards(1, 1),
    "learner": AddLearnerColumns,
}
NOT_LISTS = {
    "one-episode": (EP, r"got one episode \('e'\); wrap it in a list"),
    "a-number-inside": ([EP, 3], r"got item 1: 3 \(int\)"),
    "none-inside": ([None], r"got item 0: None \(NoneType\)"),
    "none": (None, r"got None \(NoneType\)"),
    "a-generator": ((e for e in [EP]), r"got .*\(generator\)"),
}


@pytest.mark.parametrize("bad", list(NOT_LISTS))
@pytest.mark.parametrize("connector", list(SHIPPED))
def test_connectors_take_a_list_of_episodes(connector, bad):
    episodes, message = NOT_LISTS[bad]
    with pytest.raises(
        TypeError, match=rf"connectors take a list of SingleAgentEpisode, {message}"
    ):
        SHIPPED[connector]()(episodes, {})


@pytest.mark.parametrize("connector", list(SHIPPED))
def test_connectors_take_a_tuple_of_episodes_too(connector):
    assert SHIPPED[connector]()((EP, EP), {})


HELPERS = {
    "does-not-mutate": check_does_not_mutate,
    "deterministic": check_deterministic,
    "list-numpy": check_list_numpy_agree,
}


@pytest.mark.parametrize("bad", ["one-episode", "a-number-inside"])
@pytest.mark.parametrize("helper", list(HELPERS))
def test_contract_helpers_take_a_list_of_episodes(helper, bad):
    episodes, message = NOT_LISTS[bad]
    with pytest.raises(TypeError, match=rf"{HELPERS[helper].__name__}: connectors take.*{message}"):
        HELPERS[helper](lambda eps, batch: {}, episodes)


def test_lookback_check_takes_one_episode():
    with pytest.raises(TypeError, match=r"takes one SingleAgentEpisode, got \[.*\] \(list\)"):
        check_lookback_across_cuts(lambda eps, batch: {}, [EP], 0, 1, 0)


# --------------------------------------------------------------------- 6. spaces(kinds=...)
@pytest.mark.parametrize("kinds", [None, 3, [["box"]], [{"box"}], [1]], ids=repr)
def test_spaces_kinds_errors_name_kinds(kinds):
    with pytest.raises(TypeError, match="kinds"):
        spaces(kinds)


# ----------------------------------------------- 7. unordered pipelines; check_dtype as documented
@pytest.mark.parametrize(
    "make",
    [lambda c: {c}, lambda c: frozenset([c]), lambda c: {c: 1}.keys()],
    ids=["set", "frozenset", "dict-keys"],
)
def test_pipelines_refuse_unordered_collections(make):
    with pytest.raises(TypeError, match="unordered"):
        ConnectorPipeline(make(FrameStack(1)))


def test_check_dtype_compares_dtypes_not_containers():
    # docs/api.md: check_dtype=True compares dtypes, str vs np.str_ and exact shapes, not
    # container or scalar types (the checks rely on it: an object array equals a list).
    assert outputs_equal([1, 2], np.array([1, 2]), check_dtype=True)
    assert outputs_equal([1, 2], (1, 2), check_dtype=True)
    assert outputs_equal(1, np.int64(1), check_dtype=True)
    assert not outputs_equal(1, np.int32(1), check_dtype=True)
    assert not outputs_equal([1.0], np.float32([1.0]), check_dtype=True)
    assert not outputs_equal(np.zeros((0, 2)), [], check_dtype=True)


def test_learner_columns_let_an_episode_without_a_space_follow_the_list_column():
    seq = _episode(SEQ, [(1,), (2, 0), (), (1,)], id_="seq")
    bare = SingleAgentEpisode(
        "bare", observations=[(0,), (1, 1)], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )
    out = AddLearnerColumns(["obs"])([seq, bare], {})
    assert out["obs"] == [(1,), (2, 0), (), (0,)]


CHECK_EPISODES_CASES = {
    "one episode": (lambda ep: ep, "one episode"),
    "a number among episodes": (lambda ep: [ep, 3], "item 1: 3 (int)"),
    "a string": (lambda ep: "ab", "(str)"),
    "a generator": (lambda ep: (e for e in [ep]), "(generator)"),
}


@pytest.mark.parametrize(
    ("make", "words"), CHECK_EPISODES_CASES.values(), ids=list(CHECK_EPISODES_CASES)
)
def test_check_episodes_names_what_it_got(make, words) -> None:
    from episodes.connectors import check_episodes

    ep = SingleAgentEpisode(observations=[0], len_lookback_buffer=0)
    with pytest.raises(TypeError, match=re.escape(words)):
        check_episodes(make(ep), "FrameStack")
    check_episodes([ep, ep], "FrameStack")
    check_episodes((ep,), "FrameStack")
