"""dreamer_steps against a plain-Python conversion of each sampled row from the episodes added.

Random buffers: episodes of 1 to 9 steps starting at any time, added as chunks of running
episodes (interleaved across episodes), the newest chunk of some still running; nested
observations; ``pad`` on and off; ``T`` from 2 to 8; numpy and torch batches. Every step of
every row is rebuilt from the episode's own lists, whether the row's lookback column is real
(the episode began before the row) or padding (the row starts at the first stored step).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer
from episodes.replay.world_model import dreamer_steps


def _obs(i: int, t: int) -> dict[str, Any]:
    return {"who": np.array([i, t], np.int64), "x": {"v": np.float32(t + 0.25 * i)}}


def _action(i: int, t: int) -> np.ndarray:
    return np.array([100 * i + t, -t], np.float32)


def _reward(i: int, t: int) -> float:
    return float(1000 * i + t + 1)


@st.composite
def _buffers(draw: Any) -> tuple[list[dict[str, Any]], list[SingleAgentEpisode]]:
    """Episode plans (start, steps, end) and their chunks in the order they are added."""
    plans, queues = [], []
    for i in range(draw(st.integers(1, 4))):
        start, steps = draw(st.integers(0, 6)), draw(st.integers(1, 9))
        end = draw(st.sampled_from(["terminated", "truncated", "running"]))
        cuts = sorted(set(draw(st.lists(st.integers(1, steps), max_size=3))) | {steps})
        plans.append({"start": start, "steps": steps, "end": end})
        episode = SingleAgentEpisode(
            f"e{i}", observations=[_obs(i, start)], t_started=start, len_lookback_buffer=0
        )
        chunks, t = [], start
        for stop in cuts:
            while t < start + stop:
                last = t + 1 == start + steps
                episode.add_env_step(
                    _obs(i, t + 1),
                    _action(i, t),
                    _reward(i, t),
                    terminated=last and end == "terminated",
                    truncated=last and end == "truncated",
                )
                t += 1
            chunks.append(episode)
            if not episode.is_done:
                episode = episode.cut()
        queues.append(chunks)
    order: list[SingleAgentEpisode] = []
    while any(queues):  # interleaved: chunks of several running episodes arrive in turn
        pick = draw(st.sampled_from([q for q in queues if q]))
        order.append(pick.pop(0))
    return plans, order


def _reference(plan: dict[str, Any], i: int, t: int) -> dict[str, Any]:
    """Dreamer's step for observation ``o_t`` of episode ``i``, from its own lists."""
    first, n = plan["start"], plan["start"] + plan["steps"]
    if not first <= t <= n:
        return {"mask": False}
    at_first, done = t == first, plan["end"] != "running"
    return {
        "mask": True,
        "who": [i, t],
        "v": np.float32(t + 0.25 * i),
        "actions": np.zeros(2, np.float32) if at_first else _action(i, t - 1),
        "rewards": 0.0 if at_first else _reward(i, t - 1),
        "is_first": at_first,
        "is_last": t == n and done,
        "is_terminal": t == n and plan["end"] == "terminated",
    }


def _numpy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _numpy(v) for k, v in value.items()}
    return value if isinstance(value, np.ndarray) else value.cpu().numpy()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    buffer=_buffers(),
    T=st.integers(2, 8),
    pad=st.booleans(),
    torch_out=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_dreamer_steps_match_a_per_row_conversion(
    buffer: Any, T: int, pad: bool, torch_out: bool, seed: int
) -> None:
    plans, chunks = buffer
    if not pad and all(p["steps"] < T - 1 for p in plans):
        return  # nothing long enough to sample without padding
    if torch_out:
        pytest.importorskip("torch")
    buf = EpisodeReplayBuffer(10_000, seed=seed)
    for chunk in chunks:
        buf.add(chunk)
    batch = buf.sample(
        16, batch_length_T=T - 1, lookback=1, pad=pad, device="cpu" if torch_out else None
    )
    d = _numpy(dreamer_steps(batch))
    assert d["mask"].shape == (16, T)
    seen_real_lookback = False
    for r in range(16):
        real = np.flatnonzero(d["mask"][r])
        assert len(real), r
        k0 = int(real[0])
        i, t_k0 = (int(x) for x in d["obs"]["who"][r, k0])
        t1 = t_k0 - k0  # the observation time of step 0
        seen_real_lookback |= t1 > plans[i]["start"]
        for k in range(T):
            want = _reference(plans[i], i, t1 + k)
            assert bool(d["mask"][r, k]) == want["mask"], (r, k, want)
            if not want["mask"]:
                assert not pad or not d["obs"]["who"][r, k].any()
                for flag in ("is_first", "is_last", "is_terminal"):
                    assert not d[flag][r, k], (r, k, flag)
                assert d["rewards"][r, k] == 0 and not d["actions"][r, k].any()
                continue
            assert d["obs"]["who"][r, k].tolist() == want["who"], (r, k)
            assert d["obs"]["x"]["v"][r, k] == want["v"], (r, k)
            assert np.array_equal(d["actions"][r, k], want["actions"]), (r, k)
            assert d["rewards"][r, k] == np.float32(want["rewards"]), (r, k)
            for flag in ("is_first", "is_last", "is_terminal"):
                assert bool(d[flag][r, k]) == want[flag], (r, k, flag)
        if not pad:
            assert d["mask"][r].all(), r
    assert d["rewards"].dtype == np.float32
