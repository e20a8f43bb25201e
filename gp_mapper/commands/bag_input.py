"""A bag's records for the offline commands, with the pose source the bag carries."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from gp_mapper.io import bag_info, bag_pose_source, read_bag
from gp_mapper.io.bag_source import BagRecord
from gp_mapper.mapping import MapperConfig

_LOG = logging.getLogger(__name__)


def bag_records(
    bag: Path, config: MapperConfig, mag_topic: str, pose_topic: str
) -> tuple[MapperConfig, Iterator[BagRecord]]:
    """The bag's records and the configuration they pair under.

    ``pose_source`` is the configuration's where the bag carries it (``/tf`` for tf, the pose
    topic for topic) and the other one where it does not, so the default (tf) replays a bag
    of the sensor's poses too; the log says which.

    Raises:
        BagError: the bag is missing or damaged, or has neither /tf nor the pose topic.
    """
    source = bag_pose_source(bag_info(bag), config.pose_source, pose_topic, mag_topic)
    if source != config.pose_source:
        _LOG.info("%s: no %s poses in the bag; reading pose_source %s", bag, config.pose_source,
                  source)  # fmt: skip
        config = config.replace(pose_source=source)
    records = read_bag(
        bag, mag_topic=mag_topic, pose_topic=pose_topic, pose_type="auto", pose_source=source
    )
    return config, records
