"""Examples and benchmarks: a short last gradient group, a budget below learning_starts,
and counts the GPU benchmarks refuse."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from tests.examples._load import load

torch = pytest.importorskip("torch")

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_distill_loss_is_per_step_when_the_last_group_is_short() -> None:
    # 12 steps in groups of 8: the last group holds 4 losses and was divided by 8.
    from episodes.rollout import RolloutStorage, Transition

    distill = load("distill")
    steps, envs = 12, 4
    storage = RolloutStorage("distillation", envs, steps, (4,), (1,))
    for _ in range(steps):
        storage.add_transition(
            Transition(
                observations=torch.randn(envs, 4),
                actions=torch.zeros(envs, 1),
                privileged_actions=torch.randint(0, 2, (envs, 1)).float(),
                dones=torch.zeros(envs),
            )
        )
    student = torch.nn.Linear(4, 2)
    torch.nn.init.zeros_(student.weight)
    torch.nn.init.zeros_(student.bias)  # uniform logits: every step's loss is ln 2
    optimizer = torch.optim.SGD(student.parameters(), lr=0.0)
    cfg = distill.DistillConfig(num_steps=steps, num_epochs=1, gradient_length=8)
    result = distill.update(student, optimizer, storage, cfg)
    assert result["loss"] == pytest.approx(math.log(2), rel=1e-6)


def load_benchmark(name: str):  # noqa: ANN201 - a module
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--repeats", "0"], id="no-repeats"),
        pytest.param(["--repeats", "-2"], id="negative-repeats"),
        pytest.param(["--sizes", "0"], id="no-envs"),
    ],
)
def test_gpu_collect_refuses_counts_below_one(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        load_benchmark("gpu_collect").main(["--device", "cpu", *argv])
    assert info.value.code == 2
    assert "must be >= 1" in capsys.readouterr().err


def test_gpu_benchmark_refuses_no_repeats(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.argv", ["gpu.py", "--repeats", "0"])
    with pytest.raises(SystemExit) as info:
        load_benchmark("gpu").main()
    assert info.value.code == 2
    assert "must be >= 1" in capsys.readouterr().err
