"""Shared random-data helpers for the rollout tests."""

from __future__ import annotations

import torch


def random_steps(
    t, n, device, *, obs_dict=False, hidden=None, done_p=0.2, seed=0, act_dim=2, obs_dim=3
):
    """Random per-step data: list of dicts of [N, ...] tensors on ``device``.

    ``hidden`` is None, "gru" or "lstm" (actor and critic, 2 layers, hidden 4).
    """
    g = torch.Generator().manual_seed(seed)
    steps = []
    for _ in range(t):
        obs = torch.randn(n, obs_dim, generator=g)
        if obs_dict:
            obs = {"policy": obs, "extra": {"ids": torch.randint(0, 100, (n, 2), generator=g)}}
        s = {
            "observations": obs,
            "actions": torch.randn(n, act_dim, generator=g),
            "privileged_actions": torch.randn(n, act_dim, generator=g),
            "rewards": torch.randn(n, generator=g),
            "dones": (torch.rand(n, generator=g) < done_p).float(),
            "values": torch.randn(n, 1, generator=g),
            "actions_log_prob": torch.randn(n, generator=g),
            "distribution_params": (
                torch.randn(n, act_dim, generator=g),
                torch.rand(n, act_dim, generator=g),
            ),
        }
        if hidden is not None:

            def h():
                return torch.randn(2, n, 4, generator=g)

            s["hidden_states"] = (h(), h()) if hidden == "gru" else ((h(), h()), (h(), h()))
        steps.append(to_device(s, device))
    return steps


def to_device(x, device):
    if isinstance(x, dict):
        return {k: to_device(v, device) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(to_device(v, device) for v in x)
    return x.to(device)


def stack_steps(steps, key):
    """Stack one field of the steps into [T, N, ...] (dicts and tuples recursively)."""
    first = steps[0][key]
    if isinstance(first, dict):
        return {k: stack_steps([{key: s[key][k]} for s in steps], key) for k in first}
    if isinstance(first, tuple):
        return tuple(stack_steps([{key: s[key][i]} for s in steps], key) for i in range(len(first)))
    return torch.stack([s[key] for s in steps])
