"""The connector example on one hand-recorded episode: prev-4 actions and 4-frame stacking.

Run: ``python examples/connector_example.py``
"""

from __future__ import annotations

import argparse
import sys

import gymnasium as gym
import numpy as np

from episodes import SingleAgentEpisode
from episodes.connectors import ConnectorPipeline, FrameStack, PrevActionsPrevRewards


def main(argv: list[str] | None = None) -> None:
    # No flags, but --help answers and an unknown flag is a usage error (exit 2).
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.parse_args([] if argv is None else argv)  # main() from a notebook: its argv is not ours
    episode = SingleAgentEpisode(
        observation_space=gym.spaces.Box(-10, 10, (2,), np.float32),
        action_space=gym.spaces.Discrete(2),
    )
    episode.add_env_reset(np.float32([0, 0]))
    for t in range(1, 9):
        if t == 6:  # the sampler's border: ship the chunk, continue in a successor
            shipped, episode = episode, episode.cut(len_lookback_buffer=4)
        episode.add_env_step(np.float32([t, -t]), action=t % 2, reward=1.0)
    pipeline = ConnectorPipeline([FrameStack(4), PrevActionsPrevRewards(4, 0)])
    cut_rows = pipeline([episode], {})

    whole = shipped.slice(slice(0, None))
    whole.concat_episode(episode)
    whole_rows = pipeline([whole], {})
    print("rows of the successor chunk (t_started=5):")
    for i in range(len(episode)):
        print(f"  ts={5 + i} frames={cut_rows['obs'][i].tolist()}")
        print(f"       prev actions={cut_rows['prev_n_actions'][i].tolist()}")
    for key, value in cut_rows.items():
        np.testing.assert_array_equal(value, whole_rows[key][5:])
    print("equal to the un-cut episode's rows: OK")


if __name__ == "__main__":
    main(sys.argv[1:])
