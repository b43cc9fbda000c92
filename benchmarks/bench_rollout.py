"""Rollout storage: ours vs rsl_rl 5.5.1 in one process, CPU, torch at 1 thread.

Run with the reference venv (needs both libraries):

    .venv-ref/bin/python benchmarks/bench_rollout.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import os
import sys
from types import SimpleNamespace

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import interleaved, positive_int  # noqa: E402

from episodes.rollout import RolloutStorage, Transition  # noqa: E402

try:
    from rsl_rl.algorithms.ppo import PPO
    from rsl_rl.storage import RolloutStorage as RslStorage
    from tensordict import TensorDict
except ImportError:  # pragma: no cover
    sys.exit("rsl_rl is not installed: run with .venv-ref/bin/python")

T, N, OBS, ACT, HIDDEN = 24, 4096, 48, 12, 256
GAMMA, LAM = 0.99, 0.95


def make_steps(t: int, n: int, done_p: float, hidden: bool, seed: int = 0) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    steps = []
    for _ in range(t):
        s = {
            "obs": torch.randn(n, OBS, generator=g),
            "actions": torch.randn(n, ACT, generator=g),
            "rewards": torch.randn(n, generator=g),
            "dones": (torch.rand(n, generator=g) < done_p).float(),
            "values": torch.randn(n, 1, generator=g),
            "log_prob": torch.randn(n, generator=g),
            "mean": torch.randn(n, ACT, generator=g),
            "std": torch.rand(n, ACT, generator=g),
        }
        if hidden:
            s["ha"] = torch.randn(1, n, HIDDEN, generator=g)
            s["hc"] = torch.randn(1, n, HIDDEN, generator=g)
        steps.append(s)
    return steps


def ours_transitions(steps: list[dict]) -> list[Transition]:
    return [
        Transition(
            observations=s["obs"],
            actions=s["actions"],
            rewards=s["rewards"],
            dones=s["dones"],
            values=s["values"],
            actions_log_prob=s["log_prob"],
            distribution_params=(s["mean"], s["std"]),
            hidden_states=(s.get("ha"), s.get("hc")),
        )
        for s in steps
    ]


def theirs_transitions(steps: list[dict], n: int) -> list:
    out = []
    for s in steps:
        tr = RslStorage.Transition()
        tr.observations = TensorDict({"policy": s["obs"]}, batch_size=[n])
        tr.actions, tr.rewards, tr.dones = s["actions"], s["rewards"], s["dones"]
        tr.values, tr.actions_log_prob = s["values"], s["log_prob"]
        tr.distribution_params = (s["mean"], s["std"])
        if "ha" in s:
            tr.hidden_states = (s["ha"], s["hc"])
        out.append(tr)
    return out


def build(t: int, n: int, done_p: float, hidden: bool):
    steps = make_steps(t, n, done_p, hidden)
    ours = RolloutStorage("rl", n, t, (OBS,), (ACT,))
    example = TensorDict({"policy": torch.zeros(n, OBS)}, batch_size=[n])
    theirs = RslStorage("rl", n, t, example, [ACT])
    ot, tt = ours_transitions(steps), theirs_transitions(steps, n)
    for a, b in zip(ot, tt, strict=True):
        ours.add_transition(a)
        theirs.add_transition(b)
    last = torch.randn(n, 1)
    return ours, theirs, ot, tt, last


def theirs_compute_returns(storage, last_values: torch.Tensor) -> None:
    """Run rsl_rl's PPO.compute_returns code on a minimal stand-in for the algorithm."""
    alg = SimpleNamespace(
        storage=storage,
        gamma=GAMMA,
        lam=LAM,
        normalize_advantage_per_mini_batch=False,
        critic=_Critic(last_values),
    )
    PPO.compute_returns(alg, None)  # type: ignore[arg-type]


class _Critic:
    def __init__(self, last_values: torch.Tensor) -> None:
        self.last_values = last_values

    def __call__(self, obs: object) -> torch.Tensor:
        return self.last_values

    def get_hidden_state(self) -> None:
        return None

    def reset(self, dones: object = None, hidden_state: object = None) -> None:
        return None


def consume_flat(gen, field: str) -> float:
    acc = torch.zeros(())
    for b in gen:
        acc += getattr(b, field).sum()
    return float(acc)


def consume_obs(gen) -> float:
    acc = torch.zeros(())
    for b in gen:
        obs = b.observations
        acc += (obs["policy"] if not isinstance(obs, torch.Tensor) else obs).sum()
    return float(acc)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=positive_int, default=15)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rows = []

    ours, theirs, ot, tt, last = build(T, N, 0.02, hidden=False)
    ours.compute_returns(last, GAMMA, LAM)
    theirs_compute_returns(theirs, last)
    r = interleaved(
        {
            "ours": lambda: consume_flat(ours.mini_batch_generator(4, 5), "advantages"),
            "theirs": lambda: consume_flat(theirs.mini_batch_generator(4, 5), "advantages"),
        },
        args.repeats,
    )
    rows.append(("mini_batch_generator 4x5", r, 0.4))

    r = interleaved(
        {
            "ours": lambda: ours.compute_returns(last, GAMMA, LAM),
            "theirs": lambda: theirs_compute_returns(theirs, last),
        },
        args.repeats,
        number=10,
    )
    rows.append((f"GAE T={T} N={N}", r, 0.5))

    def add_ours(ours=ours, ot=ot):
        ours.clear()
        for tr in ot:
            ours.add_transition(tr)

    def add_theirs(theirs=theirs, tt=tt):
        theirs.clear()
        for tr in tt:
            theirs.add_transition(tr)

    r = interleaved({"ours": add_ours, "theirs": add_theirs}, args.repeats)
    rows.append((f"{T} x add_transition", r, 1.1))
    del ours, theirs, ot, tt

    ours, theirs, _, _, last = build(1000, 64, 0.02, hidden=False)
    r = interleaved(
        {
            "ours": lambda: ours.compute_returns(last, GAMMA, LAM),
            "theirs": lambda: theirs_compute_returns(theirs, last),
        },
        args.repeats,
        number=10,
    )
    rows.append(("GAE T=1000 N=64", r, 0.1))
    del ours, theirs

    ours, theirs, _, _, last = build(T, N, 0.02, hidden=True)
    ours.compute_returns(last, GAMMA, LAM)
    theirs_compute_returns(theirs, last)
    r = interleaved(
        {
            "ours": lambda: consume_obs(ours.recurrent_mini_batch_generator(4, 5)),
            "theirs": lambda: consume_obs(theirs.recurrent_mini_batch_generator(4, 5)),
        },
        max(3, args.repeats // 3),
    )
    rows.append(("recurrent 4x5 GRU(1x256) 2% dones", r, 0.6))

    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, T={T} N={N} "
        f"obs={OBS} act={ACT}; medians of interleaved repeats"
    )
    print(f"{'operation':<36} {'ours ms':>9} {'theirs ms':>10} {'ratio':>7} {'target':>7}  ok")
    for name, r, target in rows:
        ratio = r["ours"] / r["theirs"]
        print(
            f"{name:<36} {r['ours'] * 1e3:9.3f} {r['theirs'] * 1e3:10.3f} {ratio:7.3f} "
            f"{'<=' + str(target):>7}  {'yes' if ratio <= target else 'NO'}"
        )


if __name__ == "__main__":
    main()
