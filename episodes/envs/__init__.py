"""Reference vector envs that yield torch tensors, for tests, benchmarks and examples.

They stand in for GPU simulators: every sub-env steps in one batch of torch operations on the
env's device, and observations, rewards and flags come back as tensors there. Needs torch
(imported by the env modules, not by this package).

Example:
    >>> from episodes.envs.torch_cartpole import TorchCartPole
    >>> env = TorchCartPole(3, device="cpu")
    >>> obs, infos = env.reset(seed=0)
    >>> obs.shape, obs.device.type
    (torch.Size([3, 4]), 'cpu')
"""
