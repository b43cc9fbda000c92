"""Small local episode generators for the io tests (deterministic from a seed)."""

from __future__ import annotations

import string

import gymnasium as gym
import numpy as np

from episodes import SingleAgentEpisode

SPACES = {
    "box_f32": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
    "box_f64": gym.spaces.Box(-1.0, 1.0, (2, 2), np.float64),
    "box_u8": gym.spaces.Box(0, 255, (4, 4, 3), np.uint8),
    "box_i32": gym.spaces.Box(-5, 5, (2,), np.int32),
    "box_scalar": gym.spaces.Box(-np.inf, np.inf, (), np.float32),
    "discrete": gym.spaces.Discrete(5, start=-2),
    "multi_discrete": gym.spaces.MultiDiscrete([3, 4]),
    "multi_binary": gym.spaces.MultiBinary(4),
    # A str charset: older gymnasium (1.2.2) sampled a frozenset in hash order, so a child
    # process drew other strings from the same seed (the crash-safety test compares across
    # processes).
    "text": gym.spaces.Text(6, charset="".join(sorted(string.digits + string.ascii_letters))),
    "dict": gym.spaces.Dict(
        {
            "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            "inner": gym.spaces.Tuple((gym.spaces.Discrete(3, start=1), gym.spaces.MultiBinary(2))),
        }
    ),
    "tuple": gym.spaces.Tuple(
        (gym.spaces.Discrete(2), gym.spaces.Dict({"x": gym.spaces.Box(0, 1, (1,), np.float64)}))
    ),
}
ACTION_SPACES = {
    "discrete": gym.spaces.Discrete(3),
    "box": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
    "multi_discrete": gym.spaces.MultiDiscrete([2, 5], start=[1, -1]),
}


def make_info(rng: np.random.Generator, i: int) -> dict:
    kind = i % 4
    if kind == 0:
        return {}
    if kind == 1:
        return {"step": i, "ok": True, "name": f"s{i}", "none": None, "f": float(rng.normal())}
    if kind == 2:
        return {
            "arr": rng.normal(size=(2,)).astype(np.float32),
            "scalar": np.int16(i),
            "nested": {"t": (1, 2.5, "x"), "l": [np.bool_(True), float("inf")]},
        }
    return {1: "int key", "__ep_tricky__": [float("nan")], "s": np.str_("u")}


def make_episode(
    seed: int,
    *,
    obs_space: str = "box_f32",
    act_space: str = "discrete",
    steps: int = 5,
    lookback: int = 2,
    numpy: bool = False,
    extra: bool = True,
    terminated: bool = False,
    truncated: bool = False,
    t_started: int = 0,
    id_: str | None = None,
) -> SingleAgentEpisode:
    rng = np.random.default_rng(seed)
    osp, asp = SPACES[obs_space], ACTION_SPACES[act_space]
    osp.seed(seed)
    asp.seed(seed + 1)
    n_obs = steps + lookback + 1
    n_act = steps + lookback
    extra_outputs = (
        {
            "action_logp": [np.float32(rng.normal()) for _ in range(n_act)],
            "vf_preds": [rng.normal(size=(1,)) for _ in range(n_act)],
        }
        if extra
        else None
    )
    ep = SingleAgentEpisode(
        id_ if id_ is not None else f"ep-{seed}",
        observations=[osp.sample() for _ in range(n_obs)],
        observation_space=osp,
        infos=[make_info(rng, i) for i in range(n_obs)],
        actions=[asp.sample() for _ in range(n_act)],
        action_space=asp,
        rewards=[float(rng.normal()) for _ in range(n_act)],
        extra_model_outputs=extra_outputs,
        terminated=terminated,
        truncated=truncated,
        t_started=t_started,
        len_lookback_buffer=lookback,
        agent_id=f"agent-{seed % 3}",
        module_id=None if seed % 2 else "module",
    )
    ep.custom_data.update({"seed": seed, "tags": ["a", ("b", 1)], "score": float("-inf")})
    ep._start_time = 1000.0 + seed
    ep._last_step_time = 1003.5 + seed
    if numpy:
        ep.to_numpy()
    return ep


def moved(piece: SingleAgentEpisode) -> SingleAgentEpisode:
    """The piece with every observation moved by 100 (a piece that no longer joins)."""
    return SingleAgentEpisode(
        piece.id_,
        observations=[o + 100 for o in piece.get_observations()],
        actions=list(piece.get_actions()),
        rewards=list(piece.get_rewards()),
        terminated=piece.is_terminated,
        t_started=piece.t_started,
        len_lookback_buffer=0,
    )
