"""PPO on CartPole stepped as torch tensors: the GPU-simulator path, end to end on one device.

Run: ``python examples/ppo_torch_env.py [--seed 0] [--device cuda] [--num-envs 512]``

``ppo_vector.py``'s loop with :class:`~episodes.envs.torch_cartpole.TorchCartPole` in place of
gymnasium's numpy env: observations, rewards and flags are tensors on ``--device``, so the
runner records into blocks there, the converter fills the ``[T, N]`` storage there, and GAE
and the mini-batches never leave it (no host sync per step). Ends with ``final_mean_return=``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared helpers beside this file
import ppo_vector  # noqa: E402

if __name__ == "__main__":
    ppo_vector.main(torch_env=True, doc=__doc__)
