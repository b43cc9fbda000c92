from episodes.episode.fields import FIELDS, Field
from episodes.episode.sample_batch import SampleBatch
from episodes.episode.single_agent_episode import SingleAgentEpisode

__all__ = ["FIELDS", "Field", "SampleBatch", "SingleAgentEpisode"]
