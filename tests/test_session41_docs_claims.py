"""Prose claims of docs/api.md that a docs audit corrected, held to the code's behaviour.

Each table row is one claim as api.md now states it: the signatures it gives (``RandomPolicy``'s
optional seed, ``flatten_rows``' ``name``, the ``ends`` of ``step_columns``/``nstep_columns``),
what ``flatten_rows``' ``name`` does, which action space ``RandomPolicy`` takes and what
``ends`` does.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import flatten_rows
from episodes.runner import EnvRunner, RandomPolicy

API_MD = (Path(__file__).parent.parent / "docs" / "api.md").read_text()

# ------------------------------------------------------------------ signatures api.md gives
SIGNATURES = {
    # documented call: (module, qualified name)
    'RandomPolicy(action_space, seed=None)': ("episodes.runner", "RandomPolicy"),
    'flatten_rows(value, rows=None, *, name="flatten_rows")': (
        "episodes.connectors",
        "flatten_rows",
    ),
    "step_columns(episode, *, ends=None)": ("episodes.distributed", "step_columns"),
    "nstep_columns(episode, n_step, gamma, *, ends=None, after=None)": (
        "episodes.distributed",
        "nstep_columns",
    ),
}  # fmt: skip


def _documented_parameters(call: str) -> list[tuple[str, str, Any]]:
    """``(name, kind, default)`` of each parameter a documented call spells out."""
    out, keyword_only = [], False
    for part in re.search(r"\((.*)\)", call).group(1).split(", "):  # type: ignore[union-attr]
        if part == "*":
            keyword_only = True
            continue
        name, _, default = part.partition("=")
        kind = "KEYWORD_ONLY" if keyword_only else "POSITIONAL_OR_KEYWORD"
        out.append((name, kind, eval(default) if default else inspect.Parameter.empty))
    return out


@pytest.mark.parametrize("call", sorted(SIGNATURES))
def test_api_md_gives_the_signature(call: str) -> None:
    module, name = SIGNATURES[call]
    assert f"`{call}`" in API_MD
    obj = getattr(pytest.importorskip(module), name)
    real = [
        (p.name, p.kind.name, p.default)
        for p in inspect.signature(obj).parameters.values()
        if p.name != "self"
    ]
    assert real == _documented_parameters(call)


# ------------------------------------------------------------------ flatten_rows' name
FLATTEN_REFUSED = {
    # name: (value, rows)
    "a 0-d leaf": ({"a": np.float64(1.0)}, None),
    "leaves of different row counts": ({"a": np.zeros((2, 1)), "b": np.zeros((3, 1))}, None),
    "rows that disagree with the leaves": (np.zeros((2, 1)), 3),
    "a leaf of strings": (np.array(["a", "b"]), None),
    "no leaves and no rows": ({}, None),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(FLATTEN_REFUSED))
def test_flatten_rows_name_leads_its_errors(case: str) -> None:
    value, rows = FLATTEN_REFUSED[case]
    with pytest.raises(ValueError, match=r"^MyConnector 'obs': "):
        flatten_rows(value, rows, name="MyConnector 'obs'")


# ------------------------------------------------------------------ RandomPolicy's space
def _vector_env(num_envs: int = 2) -> gym.vector.VectorEnv:
    return gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync")


RANDOM_POLICY_SPACES = {
    # name: (the space given, seed, error match or None)
    "the batched action space, default seed": ("action_space", None, None),
    "the batched action space, a seed": ("action_space", 3, None),
    "one sub-env's action space": ("single_action_space", 3, "one entry per sub-env"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(RANDOM_POLICY_SPACES))
def test_random_policy_takes_the_batched_action_space(case: str) -> None:
    attribute, seed, refused = RANDOM_POLICY_SPACES[case]
    env = _vector_env()
    policy = (
        RandomPolicy(getattr(env, attribute))
        if seed is None
        else RandomPolicy(getattr(env, attribute), seed)
    )
    runner = EnvRunner(env, policy, seed=0)
    if refused is None:
        chunks = runner.sample(4)
        assert sum(len(chunk) for chunk in chunks) == 8
    else:
        with pytest.raises(ValueError, match=refused):
            runner.sample(4)


# ------------------------------------------------------------------ step columns' ends
def _chunk() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "a", observations=[0.0, 1.0, 2.0], actions=[0, 0], rewards=[1.0, 1.0],
        len_lookback_buffer=0,
    ).to_numpy()  # fmt: skip


ENDS = {
    # name: (ends, terminated, truncated) of step_columns' rows
    "None: the chunk's own flags": (None, [False, False], [False, False]),
    "terminated after the chunk": ((True, False), [False, True], [False, False]),
    "truncated after the chunk": ((False, True), [False, False], [False, True]),
    "numpy bools": ((np.bool_(True), np.bool_(False)), [False, True], [False, False]),
}  # fmt: skip

ENDS_REFUSED = {
    "ints": (1, 0),
    "one flag": (True,),
    "a string": "ab",
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(ENDS))
def test_step_columns_ends_mark_the_last_step(case: str) -> None:
    rows = pytest.importorskip("episodes.distributed")
    ends, terminated, truncated = ENDS[case]
    columns = rows.step_columns(_chunk(), ends=ends)
    assert columns["terminated"].tolist() == terminated
    assert columns["truncated"].tolist() == truncated
    n_step = rows.nstep_columns(_chunk(), 2, 0.5, ends=ends)
    assert n_step["terminated"].tolist() == [terminated[-1]] * 2
    assert n_step["truncated"].tolist() == [truncated[-1]] * 2


@pytest.mark.parametrize("case", sorted(ENDS_REFUSED))
def test_step_columns_refuse_ends_that_are_no_pair_of_bools(case: str) -> None:
    rows = pytest.importorskip("episodes.distributed")
    for columns in (
        lambda ends: rows.step_columns(_chunk(), ends=ends),
        lambda ends: rows.nstep_columns(_chunk(), 2, 0.5, ends=ends),
    ):
        with pytest.raises(ValueError, match="pair of bools"):
            columns(ENDS_REFUSED[case])
