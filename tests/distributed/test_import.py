"""Without Ray the package still imports and works; episodes.distributed says how to get it."""

from __future__ import annotations

import subprocess
import sys

BLOCK_RAY = "import sys; sys.modules['ray'] = None; "


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_episodes_never_imports_ray():
    proc = run(
        "import sys, episodes, episodes.io, episodes.runner, episodes.converter; "
        "print('ray' in sys.modules)"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_without_ray_the_rest_works_and_distributed_names_the_extra():
    proc = run(
        BLOCK_RAY
        + "import gymnasium as gym\n"
        + "from episodes.runner import EnvRunner, RandomPolicy\n"
        + "env = gym.make_vec('CartPole-v1', 2, vectorization_mode='sync')\n"
        + "print(sum(len(c) for c in EnvRunner(env, RandomPolicy(env.action_space)).sample(3)))\n"
        + "try:\n    import episodes.distributed\nexcept ImportError as err:\n    print(err)\n"
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "6"
    assert "pip install 'episodes[ray]'" in lines[1]
