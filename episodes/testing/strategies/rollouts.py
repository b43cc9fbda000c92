"""A strategy for the contents of an on-policy rollout storage (``[T, N, ...]`` tensors).

torch is imported only when the strategy draws, so importing the strategies never imports it.

Example:
    >>> from hypothesis import find
    >>> r = find(rollouts(2, 3), lambda r: True)
    >>> tuple(r["rewards"].shape), bool(r["dones"].any())
    ((2, 3, 1), False)
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from episodes.testing.strategies.episodes import whole

__all__ = ["rollouts"]

IntLike = Union[int, tuple[int, int], st.SearchStrategy[int]]  # noqa: UP007 - a runtime alias

_VALUES = st.floats(-4.0, 4.0, allow_nan=False, width=32)


def _check_size(value: Any, what: str) -> None:
    if isinstance(value, st.SearchStrategy):
        return  # each drawn value is checked
    if isinstance(value, tuple):
        if not (len(value) == 2 and all(map(whole, value)) and 1 <= value[0] <= value[1]):
            raise ValueError(f"{what} range must be (low, high), 1 <= low <= high: got {value!r}")
    elif not whole(value) or value < 1:
        raise ValueError(
            f"{what} must be a positive int, a (low, high) range or a strategy, got {value!r}"
        )


def _size(draw: st.DrawFn, value: IntLike, what: str) -> int:
    if isinstance(value, st.SearchStrategy):
        result = draw(value)
    elif isinstance(value, tuple):
        result = draw(st.integers(int(value[0]), int(value[1])))
    else:
        result = value
    if not whole(result) or result < 1:
        raise ValueError(f"{what} must be a positive int, got {result!r}")
    return int(result)


def _floats(draw: st.DrawFn, shape: tuple[int, ...]) -> Any:
    import torch

    return torch.from_numpy(draw(hnp.arrays(np.float32, shape, elements=_VALUES)))


def _flags(draw: st.DrawFn, shape: tuple[int, ...]) -> Any:
    import torch

    return torch.from_numpy(draw(hnp.arrays(np.bool_, shape, elements=st.booleans())))


def rollouts(
    T: IntLike = (1, 4),  # noqa: N803 - the project's notation for steps per env
    N: IntLike = (1, 4),  # noqa: N803
    *,
    obs_dim: IntLike = (1, 3),
    action_dim: IntLike = (1, 2),
    hidden: str | None = None,
    num_layers: IntLike = 1,
    hidden_size: IntLike = 2,
) -> st.SearchStrategy[dict[str, Any]]:
    """Draws the tensors one rollout of ``T`` steps of ``N`` envs fills into a storage.

    Every argument is checked here, when the strategy is built, not when it first draws
    (values a strategy argument draws are checked as they are drawn).

    Args:
        T: Steps per env: an int, an inclusive ``(low, high)`` range or a strategy.
        N: Number of envs, the same way.
        obs_dim: Observation size, the same way.
        action_dim: Action size, the same way.
        hidden: None, ``"gru"`` (one state component) or ``"lstm"`` (two: h and c), or
            ``"any"`` to draw one of the three.
        num_layers: Layers of the recurrent state: an int, a range or a strategy, as ``T``.
        hidden_size: Width of the recurrent state, the same way.

    Returns:
        A dict of float32 tensors ``observations [T, N, obs]``, ``actions [T, N, act]``,
        ``rewards``, ``values``, ``actions_log_prob`` (each ``[T, N, 1]``),
        ``distribution_params`` (mean and std, ``[T, N, act]``, std > 0), bool ``dones`` and
        ``time_outs`` ``[T, N, 1]`` (every time-out is also a done), ``last_values [N, 1]``,
        and ``hidden_states``: ``(actor, critic)``, each None or a tuple of
        ``[T, num_layers, N, hidden_size]`` tensors.

    Raises:
        ValueError: A size that is not a positive int, a ``(low, high)`` range with
            ``1 <= low <= high`` or a strategy; ``hidden`` not one of the four options.

    Example:
        >>> from hypothesis import given
        >>> @given(rollouts(3, 2, hidden="lstm"))
        ... def test(r):
        ...     assert len(r["hidden_states"][0]) == 2
        ...     assert not (r["time_outs"] & ~r["dones"]).any()
        >>> test()
    """
    sizes = {
        "T": T,
        "N": N,
        "obs_dim": obs_dim,
        "action_dim": action_dim,
        "num_layers": num_layers,
        "hidden_size": hidden_size,
    }
    for what, value in sizes.items():
        _check_size(value, what)
    if not (hidden is None or (isinstance(hidden, str) and hidden in ("gru", "lstm", "any"))):
        raise ValueError(f"hidden must be None, 'gru', 'lstm' or 'any', got {hidden!r}")
    return _rollouts(sizes, hidden)


@st.composite
def _rollouts(draw: st.DrawFn, sizes: dict[str, IntLike], hidden: str | None) -> dict[str, Any]:
    """What :func:`rollouts` returns, its arguments checked."""
    # Drawn in this order (it decides how examples shrink).
    t, n = _size(draw, sizes["T"], "T"), _size(draw, sizes["N"], "N")
    num_layers = _size(draw, sizes["num_layers"], "num_layers")
    hidden_size = _size(draw, sizes["hidden_size"], "hidden_size")
    obs = _size(draw, sizes["obs_dim"], "obs_dim")
    act = _size(draw, sizes["action_dim"], "action_dim")
    kind = draw(st.sampled_from((None, "gru", "lstm"))) if hidden == "any" else hidden
    dones = _flags(draw, (t, n, 1))
    time_outs = _flags(draw, (t, n, 1)) & dones
    std = _floats(draw, (t, n, act)).abs() + 0.1
    states: list[Any] = [None, None]
    if kind is not None:
        comps = 1 if kind == "gru" else 2
        for i in range(2):
            states[i] = tuple(_floats(draw, (t, num_layers, n, hidden_size)) for _ in range(comps))
    return {
        "observations": _floats(draw, (t, n, obs)),
        "actions": _floats(draw, (t, n, act)),
        "rewards": _floats(draw, (t, n, 1)),
        "dones": dones,
        "time_outs": time_outs,
        "values": _floats(draw, (t, n, 1)),
        "actions_log_prob": _floats(draw, (t, n, 1)),
        "distribution_params": (_floats(draw, (t, n, act)), std),
        "last_values": _floats(draw, (n, 1)),
        "hidden_states": (states[0], states[1]),
    }
