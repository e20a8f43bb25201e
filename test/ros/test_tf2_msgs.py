"""tf2_msgs as `make venv` builds it (vendor/tf2_msgs): the type a real Jazzy graph uses on /tf.

The type hash is what DDS discovery compares: a wrong one and a real Jazzy tf2_ros would never
match our publishers. The round trip runs the publisher in another process, as a TF source would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("rclpy", reason="rclpy (ros-jazzy-rclpy wheels) is not importable")
pytest.importorskip(
    "tf2_msgs.msg",
    reason="tf2_msgs is not importable (make venv builds it: tools/build_tf2_msgs.py)",
)

from geometry_msgs.msg import TransformStamped
from tf2_msgs.msg import TFMessage

from .helpers import Collector, Spinner, wait_for

pytestmark = pytest.mark.ros

# RIHS01 hash of tf2_msgs/msg/TFMessage on ROS 2 Jazzy. From rosbags 0.11.9, which hashes its own
# copy of the Jazzy definitions without rosidl: get_typestore(Stores.ROS2_JAZZY).hash_rihs01(
# "tf2_msgs/msg/TFMessage"). The same value appears where real installs report it: the
# `type_description_hash` of /tf in rosbag2 metadata.yaml files recorded on Jazzy and
# `ros2 topic info -v /tf` output (e.g. RobotWebTools/rosbridge_suite issue #1282).
JAZZY_TFMESSAGE_HASH = "RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087"
TF_QOS_DEPTH = 100  # tf2_ros's own depth on /tf
PUBLISHER_NODE = "tf_probe_publisher"

# The other process: publishes the transforms given as JSON in argv[1] on /tf, 10 Hz, until SIGINT.
PUBLISHER = f"""
import json, sys
import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from geometry_msgs.msg import TransformStamped
from tf2_msgs.msg import TFMessage

transforms = []
for t in json.loads(sys.argv[1]):
    ts = TransformStamped()
    ts.header.frame_id, ts.child_frame_id = t["parent"], t["child"]
    ts.header.stamp.sec, ts.header.stamp.nanosec = t["sec"], t["nanosec"]
    v, q = ts.transform.translation, ts.transform.rotation
    v.x, v.y, v.z = t["xyz"]
    q.x, q.y, q.z, q.w = t["xyzw"]
    transforms.append(ts)
rclpy.init()
node = Node("{PUBLISHER_NODE}")
pub = node.create_publisher(TFMessage, "/tf", {TF_QOS_DEPTH})
node.create_timer(0.1, lambda: pub.publish(TFMessage(transforms=transforms)))
try:
    rclpy.spin(node)
except (KeyboardInterrupt, ExternalShutdownException):
    pass
finally:
    node.destroy_node()
    rclpy.try_shutdown()
"""


def _transforms(token: str) -> list[dict[str, Any]]:
    """Two edges of a REP-105 tree; frame names carry the token so no other /tf is mistaken."""
    return [
        {
            "parent": f"map_{token}",
            "child": f"odom_{token}",
            "sec": 1_700_000_000,
            "nanosec": 123_456_789,
            "xyz": [1.5, -2.25, 0.125],
            "xyzw": [0.0, 0.0, 0.3826834323650898, 0.9238795325112867],
        },
        {
            "parent": f"odom_{token}",
            "child": f"base_link_{token}",
            "sec": 1_700_000_001,
            "nanosec": 5,
            "xyz": [0.1, 0.2, 0.3],
            "xyzw": [0.5, -0.5, 0.5, 0.5],
        },
    ]


def _as_dict(ts: TransformStamped) -> dict[str, Any]:
    v, q = ts.transform.translation, ts.transform.rotation
    return {
        "parent": ts.header.frame_id,
        "child": ts.child_frame_id,
        "sec": ts.header.stamp.sec,
        "nanosec": ts.header.stamp.nanosec,
        "xyz": [v.x, v.y, v.z],
        "xyzw": [q.x, q.y, q.z, q.w],
    }


def test_the_jazzy_constant_is_the_hash_rosbags_computes() -> None:
    from rosbags.typesys import Stores, get_typestore

    typestore = get_typestore(Stores.ROS2_JAZZY)
    assert typestore.hash_rihs01("tf2_msgs/msg/TFMessage") == JAZZY_TFMESSAGE_HASH


def test_tfmessage_has_the_jazzy_type_name_and_hash_on_the_graph(spinner: Spinner) -> None:
    node = spinner.node("tf_hash_probe")
    topic = f"/tf_hash_probe_{os.getpid()}"
    node.create_publisher(TFMessage, topic, 10)
    (info,) = wait_for(lambda: node.get_publishers_info_by_topic(topic), what=f"{topic} publisher")
    assert info.topic_type == "tf2_msgs/msg/TFMessage"
    assert str(info.topic_type_hash) == JAZZY_TFMESSAGE_HASH


def test_tfmessage_round_trip_between_processes(spinner: Spinner) -> None:
    token = f"p{os.getpid()}"
    sent = _transforms(token)
    probe = spinner.node("tf_probe_listener")
    sink = Collector(probe)
    sink.listen(TFMessage, "/tf", TF_QOS_DEPTH)
    proc = subprocess.Popen(
        [sys.executable, "-c", PUBLISHER, json.dumps(sent)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def ours() -> list[TFMessage]:
        if proc.poll() is not None:
            pytest.fail(f"publisher exited {proc.returncode}: {proc.communicate()[1][-2000:]}")
        return [
            m
            for m in sink.messages("/tf")
            if m.transforms and m.transforms[0].child_frame_id == f"odom_{token}"
        ]

    try:
        received = wait_for(ours, what="the other process's TFMessage on /tf")[0]
        # The graph can learn the publisher's node name after its data arrives (a loaded
        # machine's discovery): wait for it there too.
        publishers = wait_for(
            lambda: [
                i
                for i in probe.get_publishers_info_by_topic("/tf")
                if i.node_name == PUBLISHER_NODE
            ],
            what="the other process's publisher of /tf in the graph",
        )
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()

    assert [_as_dict(ts) for ts in received.transforms] == sent
    # The hash as the other process announces it in discovery, not only as this one builds it.
    assert publishers and str(publishers[0].topic_type_hash) == JAZZY_TFMESSAGE_HASH
