"""Multi-agent recording with one SingleAgentEpisode per agent (docs/episodes.md's recipe).

A turn-based counting game: players add 1 or 2 to a counter in turn, whoever reaches the target
wins. Each agent's episode sees only its own turns; a move's step is recorded when its agent
next observes (or when the game ends on the other's move), so late rewards land on the right
step. Also: rewards set after the fact, an agent that leaves early, ids per agent, and the
refusal to join chunks of two agents.
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode

OBS = gym.spaces.Box(0, 20, (1,), np.float32)
ACT = gym.spaces.Discrete(2)


def _obs(count: int) -> np.ndarray:
    return np.array([float(count)], np.float32)


def play(moves: list[int], target: int = 7) -> dict[str, SingleAgentEpisode]:
    """Plays ``moves`` (0: add 1, 1: add 2), A first, recording as the recipe says.

    Each agent's move waits (pending) until that agent observes again: its step then gets the
    reward its move earned up to now. When the game ends, the mover's step and the other
    agent's pending step are both recorded as terminated, the other's with the loss.
    """
    eps = {
        a: SingleAgentEpisode(
            id_=f"game-{a}",
            observation_space=OBS,
            action_space=ACT,
            agent_id=a,
            multi_agent_episode_id="game",
        )
        for a in "AB"
    }
    count, turn, pending = 0, "A", {}
    eps["A"].add_env_reset(_obs(count))
    for move in moves:
        other = "B" if turn == "A" else "A"
        count += move + 1
        if count >= target:
            eps[turn].add_env_step(_obs(count), move, 1.0, terminated=True)
            if other in pending:
                eps[other].add_env_step(_obs(count), pending[other], -1.0, terminated=True)
            else:  # the other never acted: its episode is its reset only, ended
                eps[other].is_terminated = eps[other].is_reset
            return eps
        if other in pending:
            eps[other].add_env_step(_obs(count), pending.pop(other), 0.0)
        elif not eps[other].is_reset:
            eps[other].add_env_reset(_obs(count))
        pending[turn] = move
        turn = other
    raise AssertionError("the moves end no game")


@pytest.mark.parametrize(
    ("moves", "a_obs", "a_rewards", "b_obs", "b_rewards"),
    [
        pytest.param([1, 1, 0, 1], [0, 4, 7], [0.0, -1.0], [2, 5, 7], [0.0, 1.0], id="B-wins"),
        pytest.param(
            [0, 0, 1, 0, 1], [0, 2, 5, 7], [0.0, 0.0, 1.0], [1, 4, 7], [0.0, -1.0], id="A-wins"
        ),
        pytest.param([1, 0, 1, 1], [0, 3, 7], [0.0, -1.0], [2, 5, 7], [0.0, 1.0], id="B-wins-2"),
    ],
)
def test_each_agent_sees_its_own_turns_and_the_loss_lands_on_its_last_move(
    moves: list[int],
    a_obs: list[int],
    a_rewards: list[float],
    b_obs: list[int],
    b_rewards: list[float],
) -> None:
    eps = play(moves)
    for agent, obs, rewards in (("A", a_obs, a_rewards), ("B", b_obs, b_rewards)):
        ep = eps[agent]
        ep.validate()
        assert [float(o[0]) for o in ep.get_observations()] == obs
        assert ep.get_rewards() == rewards
        assert ep.is_terminated and not ep.is_truncated
        assert len(ep) == len(rewards) and ep.get_return() == sum(rewards)


def test_a_first_move_win_or_loss_is_each_agent_s_first_step() -> None:
    eps = play([1, 1, 1, 1], target=2)  # A reaches 2 at once: B only saw nothing
    assert eps["A"].get_rewards() == [1.0] and eps["A"].is_terminated
    assert not eps["B"].is_reset and not eps["B"].is_done  # B never observed: no episode
    eps = play([0, 1, 1], target=3)  # A 1, B 3: B wins, A's first move loses
    assert eps["A"].get_rewards() == [-1.0] and eps["B"].get_rewards() == [1.0]


def _stepped(rewards: list[float]) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(observation_space=OBS, action_space=ACT, agent_id="A")
    ep.add_env_reset(_obs(0))
    for t, r in enumerate(rewards):
        ep.add_env_step(_obs(t + 1), t % 2, r)
    return ep


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_a_reward_set_after_the_fact_goes_to_the_step_named(numpy: bool) -> None:
    ep = _stepped([0.0, 0.0, 0.0])
    if numpy:
        ep.to_numpy()
    ep.set_rewards(new_data=-1.0, at_indices=-1)  # the opponent's reply decided the last move
    ep.set_rewards(new_data=[0.5, 0.25], at_indices=[-3, -2])
    assert list(ep.get_rewards()) == [0.5, 0.25, -1.0]
    assert ep.get_return() == -0.25


def test_a_late_reward_on_a_successor_changes_only_its_lookback_copy() -> None:
    """The recipe's warning: set a late reward before cut, on the chunk that holds the step."""
    ep = _stepped([0.0, 0.0])
    nxt = ep.cut(len_lookback_buffer=1)
    nxt.set_rewards(new_data=-1.0, at_indices=-1)  # -1 of a stepless chunk is its lookback
    assert nxt.get_rewards(-1, neg_index_as_lookback=True) == -1.0
    assert ep.get_rewards() == [0.0, 0.0]  # the chunk shipped keeps its own reward
    joined = copy.deepcopy(ep)
    nxt.is_terminated = True
    joined.concat_episode(nxt)
    assert joined.get_rewards() == [0.0, 0.0] and joined.is_terminated


@pytest.mark.parametrize(
    ("how", "terminated", "truncated"),
    [("killed", True, False), ("left", False, True)],
)
def test_an_agent_leaving_early_ends_only_its_own_episode(
    how: str, terminated: bool, truncated: bool
) -> None:
    stays, goes = _stepped([1.0, 1.0]), _stepped([1.0])
    goes.add_env_step(_obs(9), 0, -1.0, terminated=terminated, truncated=truncated)
    stays.add_env_step(_obs(3), 1, 1.0)
    assert (goes.is_terminated, goes.is_truncated) == (terminated, truncated)
    assert not stays.is_done and len(stays.cut()) == 0


# (agent ids of the two chunks, joined?)
AGENT_PAIRS = {
    "same agent": ("A", "A", True),
    "one without agent": (None, "A", True),
    "two agents under one id": ("A", "B", False),
}


@pytest.mark.parametrize(("first", "second", "joins"), AGENT_PAIRS.values(), ids=AGENT_PAIRS)
def test_concat_refuses_chunks_of_two_agents(
    first: str | None, second: str | None, joins: bool
) -> None:
    # A shared board: both agents see the same observations, so only the agent tells them apart.
    mine = _stepped([0.0, 0.0])
    mine.agent_id = first
    theirs = mine.cut()
    theirs.agent_id = second
    theirs.add_env_step(_obs(3), 0, 1.0)
    before = copy.deepcopy(mine)
    if joins:
        mine.concat_episode(theirs)
        assert len(mine) == 3 and mine.agent_id == first
        return
    with pytest.raises(AssertionError, match="different agents: 'A' vs 'B'"):
        mine.concat_episode(theirs)
    assert mine == before  # nothing changed


def test_agent_fields_travel_with_every_chunk_and_state() -> None:
    eps = play([1, 1, 0, 1])
    for ep in eps.values():
        ep_state = SingleAgentEpisode.from_state(ep.get_state())
        for part in (ep[0:1], ep.slice(slice(1, 2), len_lookback_buffer=1), ep_state):
            assert (part.id_, part.agent_id, part.multi_agent_episode_id) == (
                ep.id_,
                ep.agent_id,
                "game",
            )


@settings(max_examples=60, deadline=None)
@given(
    moves=st.lists(st.integers(0, 1), min_size=12, max_size=12),
    size=st.integers(1, 3),
    lookback=st.integers(0, 2),
)
def test_any_game_is_zero_sum_and_its_chunks_join_back(
    moves: list[int], size: int, lookback: int
) -> None:
    eps = play(moves, target=9)
    assert eps["A"].get_return() + eps["B"].get_return() == 0.0
    assert sorted([eps["A"].get_return(), eps["B"].get_return()]) == [-1.0, 1.0]
    for ep in eps.values():
        # Cut as a sampler would, every `size` steps, then joined back on the learner.
        chunks, rest = [], copy.deepcopy(ep)
        while len(rest) > size:
            chunks.append(rest.slice(slice(0, size), len_lookback_buffer=lookback))
            rest = rest.slice(slice(size, None), len_lookback_buffer=lookback)
        chunks.append(rest)
        shipped = [SingleAgentEpisode.from_state(c.get_state()).to_numpy() for c in chunks]
        joined = shipped[0]
        for chunk in shipped[1:]:
            joined.concat_episode(chunk)
        assert list(joined.get_rewards()) == ep.get_rewards()
        assert [float(o[0]) for o in joined.get_observations()] == [
            float(o[0]) for o in ep.get_observations()
        ]
        assert (joined.is_terminated, joined.agent_id, joined.t) == (True, ep.agent_id, ep.t)
