"""What an rsl_rl PPO user ran into on the runner -> converter path (recurrent PPO, groups).

* Without ``value_fn`` or stored bootstrap values the converter listed every chunk id, the
  remedy last: 6,998 characters at 64 envs, 294,998 at 4096. It now leads with the remedy,
  gives the count and three ids.
* ``examples/ppo_recurrent.py`` bootstrapped with one critic-GRU replay per chunk (slower than
  sampling at 512 envs); it now runs one batched two-step call from the state recorded at each
  chunk's last step, which gives the replay's values.
* A same-step env whose ``infos['final_obs']`` was (or held) a mapping other than a dict got a
  ``KeyError: 0`` or a "changed nesting" error, where the same at reset says to give a plain
  dict (a TensorDict's ``to_dict()``).
"""

from __future__ import annotations

from collections import UserDict
from types import MappingProxyType
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from episodes.converter import episodes_to_rollout
from episodes.episode import SingleAgentEpisode
from episodes.runner import EnvRunner
from tests.examples._load import load

# --- the missing-bootstrap refusal ------------------------------------------------------------


def _truncated_chunk(i: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_=f"{i:032x}",  # as long as the runner's ids
        observations=[0.0, 1.0],
        actions=[0],
        rewards=[1.0],
        truncated=True,
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.0], "action_logp": [0.0]},
    )


def _runner_chunks(num_envs: int) -> Any:
    env = gym.make_vec("CartPole-v1", num_envs, vectorization_mode="sync", max_episode_steps=5)

    def policy(obs: np.ndarray) -> Any:
        zeros = np.zeros(num_envs, np.float32)
        return np.zeros(num_envs, np.int64), {"vf_preds": zeros, "action_logp": zeros}

    return EnvRunner(env, policy, seed=0).sample(12)


MISSING_CASES = {
    "one chunk (general path)": (lambda: [_truncated_chunk(0)], 1),
    "three chunks (general path)": (lambda: [_truncated_chunk(i) for i in range(3)], 3),
    "four chunks (general path)": (lambda: [_truncated_chunk(i) for i in range(4)], 4),
    "2000 chunks (general path)": (lambda: [_truncated_chunk(i) for i in range(2000)], 2000),
    "64 envs (runner fast path)": (lambda: _runner_chunks(64), None),
}


@pytest.mark.parametrize("case", MISSING_CASES)
def test_missing_bootstrap_message_leads_with_the_remedy_and_stays_short(case: str) -> None:
    make, count = MISSING_CASES[case]
    chunks = make()
    if count is None:  # every chunk ends truncated or still runs: all need a value
        count = sum(not c.is_terminated for c in chunks)
    layout = "per_env" if case.endswith("fast path)") else "per_chunk"
    with pytest.raises(ValueError) as info:
        episodes_to_rollout(chunks, gamma=0.99, layout=layout)
    message = str(info.value)
    assert message.startswith("pass value_fn, or store custom_data['bootstrap_value']")
    assert "need a bootstrap value" in message
    assert f": {count} of them (" in message
    assert len(message) < 400, len(message)  # 6,998 characters at 64 envs before
    shown = min(count, 3)
    assert message.count("'") - 2 == 2 * shown  # the key's quotes, then the ids shown
    assert (f"and {count - 3} more" in message) == (count > 3)


def test_missing_bootstrap_names_the_first_ids_in_order() -> None:
    chunks = [_truncated_chunk(i) for i in range(5)]
    with pytest.raises(ValueError) as info:
        episodes_to_rollout(chunks, gamma=0.99, layout="per_chunk")
    ids = ", ".join(repr(c.id_) for c in chunks[:3])
    assert str(info.value).endswith(f"(episode ids {ids} and 2 more)")


# --- ppo_recurrent's batched bootstrap ----------------------------------------------------------


def _replayed_values(episodes: list[Any], model: Any) -> dict[int, float]:
    """The reference: the critic GRU replayed over each chunk from its first recorded state."""
    out = {}
    with torch.no_grad():
        for ep in episodes:
            if ep.is_terminated:
                continue
            obs = torch.as_tensor(np.asarray(ep.get_observations()), dtype=torch.float32)
            if len(ep):
                state = torch.as_tensor(ep.get_extra_model_outputs("hc", 0)).unsqueeze(1)
            else:
                state = model.initial_state(1)[1]
            values, _ = model.value(obs.unsqueeze(1), state)
            out[id(ep)] = float(values[-1, 0])
    return out


def _recurrent_env(pr: Any, num_envs: int, mode: str) -> gym.vector.VectorEnv:
    return gym.make_vec(
        "CartPole-v1",
        num_envs,
        vectorization_mode="sync",
        wrappers=[pr.HideVelocities],
        vector_kwargs={"autoreset_mode": AutoresetMode(mode)},
        max_episode_steps=9,  # truncations inside every window
    )


@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_batched_recurrent_bootstrap_matches_a_replay_per_chunk(mode: str, num_layers: int) -> None:
    pr = load("ppo_recurrent")
    torch.manual_seed(0)
    model = pr.RecurrentActorCritic(2, 2, 16, num_layers)
    policy = pr.RecurrentSamplingPolicy(model, torch.device("cpu"))
    runner = EnvRunner(_recurrent_env(pr, 6, mode), policy, state_batch_axis=1, seed=0)
    calls = []
    value = model.value

    def counted(obs: torch.Tensor, state: torch.Tensor) -> Any:
        calls.append(obs.shape[1])
        return value(obs, state)

    kinds = {"stepped": 0, "reset only": 0, "truncated": 0}
    for it in range(4):
        episodes = list(runner.sample(10))
        # A chunk of just a reset (the runner gives none here): valued from the initial state.
        reset = np.array([0.1 * it, -0.2], np.float32)
        episodes.append(SingleAgentEpisode(observations=[reset], len_lookback_buffer=0))
        want = _replayed_values(episodes, model)
        calls.clear()
        model.value = counted  # type: ignore[method-assign]
        pr.store_bootstrap_values(episodes, runner, model, torch.device("cpu"))
        model.value = value  # type: ignore[method-assign]
        assert len(calls) <= 2  # batched: one call for stepped chunks, one for reset-only ones
        for ep in episodes:
            if ep.is_terminated:
                assert "bootstrap_value" not in ep.custom_data
                continue
            got = ep.custom_data["bootstrap_value"]
            assert isinstance(got, float)
            assert got == pytest.approx(want[id(ep)], abs=1e-6)
            kinds["stepped" if len(ep) else "reset only"] += 1
            kinds["truncated"] += ep.is_truncated
    assert kinds["stepped"] and kinds["truncated"] and kinds["reset only"] == 4


# --- a mapping other than a dict in infos['final_obs'] ------------------------------------------


class _FinalsEnv(gym.vector.VectorEnv):
    """A same-step env whose sub-envs all end every third step; ``wrap`` makes its finals."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, wrap: Any, batched: bool, nested: bool = False):
        self.num_envs, self.wrap, self.batched, self.nested = 2, wrap, batched, nested
        box = gym.spaces.Box(-1, 1, (2,), np.float32)
        inner = gym.spaces.Dict({"x": box}) if nested else box
        self.single_observation_space = gym.spaces.Dict({"a": inner})
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, 2)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, 2)

    def _obs(self, rows: int | None, value: float, wrap: Any = dict) -> Any:
        leaf = np.full((2,) if rows is None else (rows, 2), value, np.float32)
        return {"a": wrap({"x": leaf})} if self.nested else wrap({"a": leaf})

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        self.t = 0
        return self._obs(2, 0.0), {}

    def step(self, actions: Any) -> Any:
        self.t += 1
        done = np.full(2, self.t % 3 == 0)
        infos: dict[str, Any] = {}
        if done.any():
            if self.batched:
                finals: Any = self._obs(2, 1.0, self.wrap)
            else:
                finals = np.empty(2, object)
                for i in range(2):
                    finals[i] = self._obs(None, 1.0, self.wrap)
            infos = {"final_obs": finals, "_final_obs": done}
        return self._obs(2, 0.5), np.zeros(2), np.zeros(2, bool), done, infos


def _no_outputs(obs: Any) -> Any:
    return np.zeros(2, np.int64), {}


FINALS_CASES = {
    "UserDict batch": (UserDict, True, False, "observations (infos['final_obs']): got a UserDict"),
    "mappingproxy batch": (MappingProxyType, True, False, "got a mappingproxy"),
    "UserDict per sub-env": (UserDict, False, False, "of sub-env 0: got a UserDict"),
    "mappingproxy per sub-env": (MappingProxyType, False, False, "of sub-env 0: got a mappingp"),
    "UserDict inside a dict, batch": (UserDict, True, True, "got a UserDict"),
    "UserDict inside a dict, per sub-env": (UserDict, False, True, "of sub-env 0: got a UserD"),
}


@pytest.mark.parametrize("case", FINALS_CASES)
def test_final_obs_mapping_other_than_dict_is_refused_with_the_to_dict_hint(case: str) -> None:
    wrap, batched, nested, words = FINALS_CASES[case]
    runner = EnvRunner(_FinalsEnv(wrap, batched, nested), _no_outputs, seed=0)
    with pytest.raises(TypeError) as info:
        runner.sample(4)
    message = str(info.value)
    assert words in message
    assert "infos['final_obs']" in message and "to_dict()" in message


@pytest.mark.parametrize("batched", [True, False], ids=["batch", "per sub-env"])
@pytest.mark.parametrize("nested", [False, True], ids=["flat", "nested"])
def test_final_obs_as_plain_dicts_is_still_taken(batched: bool, nested: bool) -> None:
    runner = EnvRunner(_FinalsEnv(dict, batched, nested), _no_outputs, seed=0)
    ended = [ep for ep in runner.sample(4) if ep.is_done]
    assert len(ended) == 2
    last = ended[0].get_observations(-1)
    leaf = last["a"]["x"] if nested else last["a"]
    assert leaf.tolist() == [1.0, 1.0]


class _TorchFinalsEnv(_FinalsEnv):
    """``_FinalsEnv`` yielding torch tensors, as a GPU simulator does (batched finals only)."""

    def _obs(self, rows: int | None, value: float, wrap: Any = dict) -> Any:
        leaf = torch.full((2,) if rows is None else (rows, 2), value)
        return {"a": wrap({"x": leaf})} if self.nested else wrap({"a": leaf})

    def step(self, actions: Any) -> Any:
        obs, rewards, terminated, truncated, infos = super().step(actions)
        flags = (torch.as_tensor(terminated), torch.as_tensor(truncated))
        return obs, torch.as_tensor(rewards), *flags, infos


@pytest.mark.parametrize("wrap", [UserDict, MappingProxyType], ids=["UserDict", "mappingproxy"])
@pytest.mark.parametrize("nested", [False, True], ids=["flat", "nested"])
def test_a_torch_envs_final_obs_mapping_gets_the_same_hint(wrap: Any, nested: bool) -> None:
    # The device path refused it too, but as a leaf that is no batched tensor, with no hint.
    runner = EnvRunner(_TorchFinalsEnv(wrap, True, nested), _no_outputs, seed=0)
    with pytest.raises(TypeError, match=rf"got a {wrap.__name__}, a mapping .*to_dict\(\)"):
        runner.sample(4)
    ended = EnvRunner(_TorchFinalsEnv(dict, True, nested), _no_outputs, seed=0).sample(4)
    assert sum(ep.is_done for ep in ended) == 2  # plain dicts still taken
