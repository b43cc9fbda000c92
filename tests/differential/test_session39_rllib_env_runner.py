"""Differential pins of session 39: ``EnvRunner.sample`` records RLlib 2.60's episodes.

Our ``EnvRunner`` and RLlib's ``SingleAgentEnvRunner`` (built locally, ``num_env_runners=0``,
no ray cluster) step gymnasium's sync CartPole-v1 vector env with the same seed and the same
deterministic greedy policy: the argmax of a fixed small torch net (short episodes that
terminate) or of a balancing controller written into the same net (episodes truncated at 500).
Both must record the same episodes over several ``sample()`` calls: observations with the final
one, actions, rewards, the policy's logits, terminated/truncated, ``t_started``, an episode
continued across calls (same id, contiguous, its first observation the last one handed out) and
the lookback each continued chunk carries. With one env the chunks themselves must match; with
several, RLlib counts ``n`` steps in total where ours records ``n`` per env (docs/deviations.md,
"steps per env per ``sample(n)``"), so there whole episodes joined across calls are compared.
Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_session39_rllib_env_runner.py
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("ray.rllib")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import ray  # noqa: E402
import torch  # noqa: E402
from ray.rllib.algorithms.ppo import PPOConfig  # noqa: E402
from ray.rllib.core.columns import Columns  # noqa: E402
from ray.rllib.core.rl_module.rl_module import RLModuleSpec  # noqa: E402
from ray.rllib.core.rl_module.torch import TorchRLModule  # noqa: E402
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner  # noqa: E402

from episodes.runner import EnvRunner  # noqa: E402

pytestmark = pytest.mark.differential

LOOKBACK = 3


def _net(kind: str) -> torch.nn.Module:
    """4 -> 8 -> 2 logits: seeded weights, or a controller pushing towards the pole's fall."""
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ELU(), torch.nn.Linear(8, 2))
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
        if kind == "controller":  # logit(right) - logit(left) = elu(angle + 0.3 angle rate)
            for p in net.parameters():
                p.zero_()
            net[0].weight[0, 2], net[0].weight[0, 3] = 1.0, 0.3
            net[2].weight[1, 0], net[2].weight[0, 0] = 1.0, -1.0
    return net


class _Greedy(TorchRLModule):
    """RLlib's side: the net's logits; ``explore=False`` takes their argmax."""

    def setup(self) -> None:
        self.net = _net(self.model_config["kind"])

    def _forward(self, batch: dict, **kwargs: Any) -> dict:
        return {Columns.ACTION_DIST_INPUTS: self.net(batch[Columns.OBS])}


class _OurGreedy:
    """Our side: the same net's argmax, its logits as the extra output RLlib records."""

    def __init__(self, kind: str) -> None:
        self.net = _net(kind)

    @torch.no_grad()
    def __call__(self, obs: Any) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        logits = self.net(torch.as_tensor(np.asarray(obs, np.float32)))
        return logits.argmax(-1).numpy(), {Columns.ACTION_DIST_INPUTS: logits.numpy()}


def _theirs(n: int, kind: str) -> SingleAgentEnvRunner:
    spec = RLModuleSpec(module_class=_Greedy, model_config={"kind": kind})
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(
            num_envs_per_env_runner=n, num_env_runners=0, episode_lookback_horizon=LOOKBACK
        )
        .rl_module(rl_module_spec=spec)
        .debugging(seed=0)
    )
    return SingleAgentEnvRunner(config=config)


def _ours(n: int, kind: str) -> EnvRunner:
    env = gym.make_vec("CartPole-v1", n, vectorization_mode="sync")
    return EnvRunner(env, _OurGreedy(kind), seed=0, len_lookback_buffer=LOOKBACK)


def _calls(n: int, t: int, calls: int, kind: str) -> tuple[list[list], list[list]]:
    ours, theirs = _ours(n, kind), _theirs(n, kind)
    a = [list(ours.sample(t)) for _ in range(calls)]
    b = [list(theirs.sample(num_timesteps=n * t, explore=False)) for _ in range(calls)]
    assert not ray.is_initialized()  # local: no cluster was started
    return a, b


def _items(chunk: Any) -> dict[str, Any]:
    """A chunk's data, its lookback included, and its flags."""

    def read(name: str, lookback: int) -> np.ndarray:
        get = getattr(chunk, f"get_{name}")
        return np.asarray(get(slice(-lookback, None), neg_index_as_lookback=True))

    return {
        "obs": read("observations", chunk.observations.lookback),
        "actions": read("actions", chunk.actions.lookback),
        "rewards": read("rewards", chunk.rewards.lookback),
        "logits": np.asarray(chunk.get_extra_model_outputs(Columns.ACTION_DIST_INPUTS)),
        "lookbacks": (chunk.observations.lookback, chunk.actions.lookback),
        "flags": (bool(chunk.is_terminated), bool(chunk.is_truncated)),
        "t": (chunk.t_started, len(chunk)),
    }


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if key == "logits":
            np.testing.assert_allclose(a[key], b[key], atol=1e-6, err_msg=key)
        elif isinstance(a[key], np.ndarray):
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        else:
            assert a[key] == b[key], key


def _episodes(calls: list[list]) -> dict[bytes, dict[str, Any]]:
    """Whole episodes joined across calls, keyed by their first observation (seeded resets).

    Also checks each continued chunk: same id, contiguous, its first observation the last one
    of the chunk before, and its lookback the episode's items just before it.
    """
    by_id: dict[str, list] = {}
    for chunks in calls:
        for chunk in chunks:
            by_id.setdefault(chunk.id_, []).append(chunk)
    out: dict[bytes, dict[str, Any]] = {}
    for parts in by_id.values():
        assert [c.t_started for c in parts] == sorted(c.t_started for c in parts)
        obs = list(np.asarray(parts[0].get_observations()))
        actions = list(np.asarray(parts[0].get_actions()))
        rewards = list(np.asarray(parts[0].get_rewards()))
        assert parts[0].t_started == 0 and parts[0].observations.lookback == 0
        for prev, chunk in zip(parts, parts[1:]):
            assert len(chunk) > 0
            assert chunk.t_started == prev.t_started + len(prev)
            assert not (prev.is_terminated or prev.is_truncated)
            items = _items(chunk)
            assert items["lookbacks"] == (min(LOOKBACK, chunk.t_started),) * 2
            back = items["lookbacks"][0]
            np.testing.assert_array_equal(items["obs"][: back + 1], obs[len(obs) - back - 1 :])
            np.testing.assert_array_equal(items["actions"][:back], actions[len(actions) - back :])
            np.testing.assert_array_equal(items["rewards"][:back], rewards[len(rewards) - back :])
            obs += list(np.asarray(chunk.get_observations())[1:])
            actions += list(np.asarray(chunk.get_actions()))
            rewards += list(np.asarray(chunk.get_rewards()))
        last = parts[-1]
        out[np.asarray(obs[0]).tobytes()] = {
            "obs": np.array(obs),
            "actions": np.array(actions),
            "rewards": np.array(rewards),
            "done": (bool(last.is_terminated), bool(last.is_truncated)),
        }
    return out


@pytest.mark.parametrize(
    ("kind", "t", "calls"),
    [("net", 15, 3), ("controller", 200, 3)],  # terminations; a truncation at 500 in call 3
)
def test_one_env_records_rllibs_chunks(kind: str, t: int, calls: int) -> None:
    ours, theirs = _calls(1, t, calls, kind)
    for a, b in zip(ours, theirs, strict=True):
        assert len(a) == len(b) and sum(map(len, a)) == t
        for x, y in zip(a, b, strict=True):
            _same(_items(x), _items(y))
    flags = {_items(c)["flags"] for chunks in ours for c in chunks}
    assert flags >= ({(True, False)} if kind == "net" else {(False, True)})
    _episodes(ours), _episodes(theirs)  # the continuation checks, on both sides


@pytest.mark.parametrize(("kind", "t", "calls"), [("net", 20, 3), ("controller", 200, 3)])
def test_three_envs_record_rllibs_episodes(kind: str, t: int, calls: int) -> None:
    ours, theirs = _calls(3, t, calls, kind)
    assert [sum(map(len, c)) for c in ours] == [3 * t] * calls
    a, b = _episodes(ours), _episodes(theirs)
    finished = {k for k, e in a.items() if any(e["done"])}
    assert finished == {k for k, e in b.items() if any(e["done"])}
    assert finished and set(a) == set(b)
    for key in a:
        x, y = a[key], b[key]
        if key in finished:  # whole episodes, final observation included
            assert x["done"] == y["done"] and len(x["actions"]) == len(y["actions"])
        m = min(len(x["actions"]), len(y["actions"]))  # the running ones: what both recorded
        np.testing.assert_array_equal(x["obs"][: m + 1], y["obs"][: m + 1])
        np.testing.assert_array_equal(x["actions"][:m], y["actions"][:m])
        np.testing.assert_array_equal(x["rewards"][:m], y["rewards"][:m])
    if kind == "controller":
        assert {e["done"] for e in a.values()} >= {(False, True)}
