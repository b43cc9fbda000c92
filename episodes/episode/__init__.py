from episodes.episode.accessors import ColumnAccessors
from episodes.episode.fields import FIELDS, Field
from episodes.episode.recording import StepRecorder
from episodes.episode.sample_batch import SampleBatch
from episodes.episode.single_agent_episode import SingleAgentEpisode
from episodes.mixins import name_methods_after

name_methods_after(SingleAgentEpisode, StepRecorder, ColumnAccessors)

__all__ = ["FIELDS", "Field", "SampleBatch", "SingleAgentEpisode"]
