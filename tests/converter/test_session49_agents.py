"""Training on every agent's chunks: one id per agent's episode, GAE checked by hand.

Self-play records one episode per agent per game, cut into chunks of a few steps. The
converter takes all agents' chunks together (``layout="per_chunk"``: chunks of different
lengths); every advantage and return is checked against a plain-Python GAE of each chunk.
Chunks of two agents under one id (the game's) would have their ends mixed: refused.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_batch, episodes_to_rollout

torch = pytest.importorskip("torch")

OBS = gym.spaces.Box(-5, 50, (2,), np.float32)
ACT = gym.spaces.Discrete(3)
GAMMA, LAM = 0.95, 0.9


def value(obs: object) -> np.ndarray:
    o = np.asarray(obs, np.float64)
    return o[..., 0] * 0.1 - o[..., 1] * 0.05


def agent_episode(id_: str, agent: str, length: int, end: str, seed: int) -> SingleAgentEpisode:
    """One agent's episode of one game (``end``: terminated, truncated or none)."""
    rng = np.random.default_rng(seed)
    ep = SingleAgentEpisode(
        id_=id_,
        agent_id=agent,
        multi_agent_episode_id=id_.split("/")[0],
        observation_space=OBS,
        action_space=ACT,
    )
    ep.add_env_reset(np.array([0, seed % 7], np.float32))
    for t in range(length):
        flags = {end: True} if t == length - 1 and end != "none" else {}
        ep.add_env_step(
            np.array([t + 1, seed % 7], np.float32),
            int(rng.integers(3)),
            float(rng.normal()),
            extra_model_outputs={
                "vf_preds": float(value(ep.get_observations(-1))),
                "action_logp": -1.0,
            },
            **flags,
        )
    return ep


def chunked(ep: SingleAgentEpisode, size: int) -> list[SingleAgentEpisode]:
    """The episode as its sampler hands it out: chunks of ``size`` steps, lookback 2."""
    chunks = []
    for start in range(0, len(ep), size):
        chunks.append(ep.slice(slice(start, start + size), len_lookback_buffer=2))
    return chunks


def plain_gae(chunk: SingleAgentEpisode) -> tuple[list[float], list[float]]:
    """GAE of one chunk, written out: terminated ends at 0, truncated adds gamma V(final obs)
    to its last reward, an ongoing chunk bootstraps from V(its last obs)."""
    rewards = [float(r) for r in chunk.get_rewards()]
    values = [float(v) for v in chunk.get_extra_model_outputs("vf_preds")]
    last = 0.0
    if chunk.is_truncated:
        rewards[-1] += GAMMA * float(value(chunk.get_observations(-1)))
    elif not chunk.is_terminated:
        last = float(value(chunk.get_observations(-1)))
    advantages = [0.0] * len(rewards)
    running, next_value = 0.0, last
    for t in reversed(range(len(rewards))):
        delta = rewards[t] + GAMMA * next_value - values[t]
        running = delta + GAMMA * LAM * running
        advantages[t], next_value = running, values[t]
    return advantages, [a + v for a, v in zip(advantages, values)]


# (length, end) of each agent's episode in each game: killed (terminated), left (truncated),
# still playing (none), and an agent that ended on the other's move.
GAMES = [
    {"red": (5, "terminated"), "blue": (4, "terminated")},
    {"red": (3, "none"), "blue": (2, "truncated"), "green": (1, "terminated")},
    {"red": (7, "truncated"), "blue": (6, "none")},
]


def all_chunks(size: int) -> list[SingleAgentEpisode]:
    chunks = []
    for g, game in enumerate(GAMES):
        for agent, (length, end) in game.items():
            ep = agent_episode(f"g{g}/{agent}", agent, length, end, seed=10 * g + len(agent))
            chunks += chunked(ep, size)
    return chunks


@pytest.mark.parametrize("size", [1, 2, 3, 10])
def test_every_agents_advantages_match_a_plain_gae(size: int) -> None:
    chunks = all_chunks(size)
    rollout = episodes_to_rollout(
        chunks, gamma=GAMMA, value_fn=value, layout="per_chunk", dtype=torch.float64
    )
    storage = rollout.storage
    storage.compute_returns(rollout.last_values, gamma=GAMMA, lam=LAM, normalize_advantage=False)
    assert [group for group in rollout.groups] == [[chunk] for chunk in chunks]
    for n, chunk in enumerate(chunks):
        advantages, returns = plain_gae(chunk)
        steps = len(advantages)
        assert storage.advantages[:steps, n, 0].tolist() == pytest.approx(advantages, abs=1e-12)
        assert storage.returns[:steps, n, 0].tolist() == pytest.approx(returns, abs=1e-12)
    valid = (
        int(storage.valid.sum()) if storage.valid is not None else storage.rewards[..., 0].numel()
    )
    assert valid == sum(len(c) for c in chunks)
    rows = sum(len(batch.actions) for batch in storage.mini_batch_generator(2, 1))
    assert rows == valid


def _game_chunks(red: str | None, blue: str | None, blue_id: str) -> list[SingleAgentEpisode]:
    """Red plays on (truncated later), blue is killed on red's move: its stepless end.

    Both see the same board, so the chunks' observations alone do not tell them apart.
    """
    reds = agent_episode("game", "red", 2, "none", seed=1)
    blues = agent_episode(blue_id, "blue", 2, "none", seed=1)
    reds.agent_id, blues.agent_id = red, blue
    blue_end = blues.cut()
    blue_end.is_terminated = True
    red_more = reds.cut()
    red_more.add_env_step(
        np.array([3, 1], np.float32),
        0,
        1.0,
        truncated=True,
        extra_model_outputs={"vf_preds": 0.0, "action_logp": -1.0},
    )
    return [blues, reds, blue_end, red_more]


CONVERTERS = {
    "rollout per_chunk": lambda c: episodes_to_rollout(
        c, gamma=GAMMA, value_fn=value, layout="per_chunk"
    ),
    "rollout per-env lists": lambda c: episodes_to_rollout(
        [[c[0], c[2]], [c[1], c[3]]], gamma=GAMMA, value_fn=value, layout="per_chunk"
    ),
    "batch": lambda c: episodes_to_batch(c),
}


@pytest.mark.parametrize("convert", CONVERTERS.values(), ids=CONVERTERS)
def test_two_agents_under_one_id_are_refused(convert: object) -> None:
    chunks = _game_chunks("red", "blue", blue_id="game")
    with pytest.raises(ValueError, match="share the episode id 'game' but belong to agents"):
        convert(chunks)  # type: ignore[operator]


def test_the_refusal_names_both_chunks() -> None:
    chunks = _game_chunks("red", "blue", blue_id="game")
    with pytest.raises(ValueError, match=r"^episodes_to_batch: chunk 0 and chunk 1 share"):
        episodes_to_batch(chunks)
    lists = [[chunks[0], chunks[2]], [chunks[1], chunks[3]]]
    with pytest.raises(ValueError, match=r"env 0's chunk 0 and env 1's chunk 0 share"):
        episodes_to_rollout(lists, gamma=GAMMA, value_fn=value, layout="per_chunk")


def test_with_an_id_each_the_killed_agent_ends_its_own_chunk() -> None:
    chunks = _game_chunks("red", "blue", blue_id="game/blue")
    batch = episodes_to_batch(chunks)
    # rows: blue's 2 steps, red's 2 steps, red's truncated step
    assert batch["terminateds"].tolist() == [False, True, False, False, False]
    assert batch["truncateds"].tolist() == [False, False, False, False, True]
    rollout = episodes_to_rollout(chunks, gamma=GAMMA, value_fn=value, layout="per_chunk")
    ends = rollout.storage.dones[..., 0].T.tolist()
    assert ends == [[False, True], [False, False], [True, True]]  # red's 1-step chunk padded
    assert [[c.agent_id for c in group] for group in rollout.groups] == [
        ["blue", "blue"],
        ["red"],
        ["red"],
    ]


def test_chunks_without_agent_ids_are_not_judged() -> None:
    chunks = _game_chunks(None, None, blue_id="game/blue")
    assert episodes_to_batch(chunks)["terminateds"].tolist()[1] is True
    chunks = _game_chunks("red", None, blue_id="game")  # one unnamed: nothing to compare
    episodes_to_rollout(chunks, gamma=GAMMA, value_fn=value, layout="per_chunk")


def test_an_agent_that_never_acted_holds_no_column() -> None:
    mover = agent_episode("g/red", "red", 1, "terminated", seed=3)
    watcher = SingleAgentEpisode(id_="g/blue", agent_id="blue", observation_space=OBS)
    watcher.add_env_reset(np.zeros(2, np.float32))
    watcher.is_terminated = True  # the game ended on red's first move
    rollout = episodes_to_rollout([mover, watcher], gamma=GAMMA, value_fn=value, layout="per_chunk")
    assert [[c.agent_id for c in group] for group in rollout.groups] == [["red"]]
    assert episodes_to_batch([mover, watcher])["terminateds"].tolist() == [True]
