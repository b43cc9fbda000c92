"""Extra model outputs, found by an extras hunt.

* ``to_numpy`` refuses a column mixing text and other values (numpy would write 1.5 as the
  text "1.5"), leaving the episode in list mode; rewards keep naming the odd reward.
* The constructor refuses a column given with fewer items than the lookback (``"auto"`` takes
  every reward as lookback, and a buffer would have taken a shorter column whole).
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode


def _episode(**columns):
    given = dict(observations=[np.zeros(2, np.float32)] * 4, actions=[0, 1, 2], rewards=[1.0] * 3)
    return SingleAgentEpisode("e", len_lookback_buffer=0, **{**given, **columns})


MIXED = {
    "float and text": [1.5, "a", True],
    "text first": ["a", 2, 3],
    "bytes and int": [b"x", 1, 2],
}


@pytest.mark.parametrize("name", list(MIXED))
def test_to_numpy_refuses_text_beside_other_values_and_keeps_list_mode(name):
    episode = _episode(extra_model_outputs={"x": MIXED[name]})
    with pytest.raises(ValueError, match=r"extra_model_outputs\['x'\].*mix text"):
        episode.to_numpy()
    assert not episode.is_numpy and episode.get_extra_model_outputs("x") == MIXED[name]


def test_text_alone_still_stacks():
    for items in (["a", np.str_("b")], [b"a", b"b"], [np.array(["a", "b"])] * 2):
        buffer = InfiniteLookbackBuffer(list(items))
        buffer.finalize()
        assert buffer.data.dtype.kind in "US"


def test_text_rewards_are_named_as_rewards():
    with pytest.raises(ValueError, match="rewards hold 'x', which is no number"):
        _episode(rewards=[1.0, "x", 2.0]).to_numpy()


SHORT = {
    "extra output": dict(extra_model_outputs={"vf": [0.1, 0.2]}),
    "actions": dict(actions=[0, 1]),
    "no actions": dict(actions=[]),
    "infos": dict(infos=[{}, {}]),
}


@pytest.mark.parametrize("lookback", ["auto", 3, 5])
@pytest.mark.parametrize("name", list(SHORT))
def test_a_column_shorter_than_the_lookback_is_refused(name, lookback):
    given = {
        "observations": [np.zeros(2, np.float32)] * 4,
        "actions": [0, 1, 2],
        "rewards": [1.0] * 3,
        **SHORT[name],
    }
    with pytest.raises(AssertionError, match="column lengths disagree"):
        SingleAgentEpisode("e", len_lookback_buffer=lookback, **given)


def test_keys_of_mixed_types_get_the_documented_errors():
    episode = _episode(extra_model_outputs={"vf": [0.1] * 3, 1: [0.2] * 3})
    with pytest.raises(AssertionError, match=r"missing keys \[1\]"):
        episode.add_env_step(np.zeros(2, np.float32), 0, 1.0, extra_model_outputs={"vf": 0.3})
    with pytest.raises(KeyError, match=r"known keys: \['vf', 1\]"):
        episode.get_extra_model_outputs("nope")
    with pytest.raises(AssertionError, match="extra_model_outputs keys differ"):
        episode.concat_episode(
            SingleAgentEpisode(
                "e",
                observations=[np.zeros(2, np.float32)] * 2,
                actions=[0],
                rewards=[1.0],
                t_started=3,
                len_lookback_buffer=0,
                extra_model_outputs={"vf": [0.1]},
            )
        )
    assert len(episode) == 3
