"""Episode chunks for the replay tests: observations encode (episode, t) so rows are checkable."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from episodes import SingleAgentEpisode


def make_episode_data(index: int, length: int, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed * 1000 + index)
    return {
        "obs": [np.array([index, t], np.float32) for t in range(length + 1)],
        "actions": [int(a) for a in rng.integers(0, 3, length)],
        "rewards": [float(r) for r in rng.normal(size=length).round(3)],
        "logp": [float(v) for v in rng.normal(size=length)],
    }


def chunk(
    id_: str,
    data: dict[str, Any],
    a: int,
    b: int,
    *,
    terminated: bool = False,
    truncated: bool = False,
) -> SingleAgentEpisode:
    """Steps ``[a, b)`` of an episode as a chunk with ``t_started=a``."""
    return SingleAgentEpisode(
        id_,
        observations=data["obs"][a : b + 1],
        actions=data["actions"][a:b],
        rewards=data["rewards"][a:b],
        infos=[{"t": t} for t in range(a, b + 1)],
        extra_model_outputs={"logp": data["logp"][a:b]},
        terminated=terminated,
        truncated=truncated,
        t_started=a,
        len_lookback_buffer=0,
    )


def episode(id_: str, index: int, length: int, end: str = "terminated") -> SingleAgentEpisode:
    data = make_episode_data(index, length)
    return chunk(id_, data, 0, length, terminated=end == "terminated", truncated=end == "truncated")


@st.composite
def chunk_streams(draw: Any, max_episodes: int = 6, max_len: int = 12) -> list[SingleAgentEpisode]:
    """Chunks of several episodes (ends: terminated, truncated, ongoing), interleaved."""
    num = draw(st.integers(1, max_episodes))
    queues = []
    for i in range(num):
        length = draw(st.integers(1, max_len))
        end = draw(st.sampled_from(["terminated", "truncated", "ongoing"]))
        cuts = sorted(set(draw(st.lists(st.integers(1, length), max_size=3))) | {length})
        data = make_episode_data(i, length)
        parts, a = [], 0
        for b in cuts:
            last = b == length
            parts.append(
                chunk(
                    f"ep{i}",
                    data,
                    a,
                    b,
                    terminated=last and end == "terminated",
                    truncated=last and end == "truncated",
                )
            )
            a = b
        queues.append(parts)
    out = []
    while any(queues):
        live = [q for q in queues if q]
        out.append(live[draw(st.integers(0, len(live) - 1))].pop(0))
    return out
