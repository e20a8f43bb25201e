"""ROS 2 layer of gp_mapper: the rclpy node, message conversions, QoS, parameters, bag tools.

The only layer that imports rclpy or message packages. The node lives in
``gp_mapper.ros.node`` (not imported here, so the bag tools start without torch).
"""

from gp_mapper.ros.errors import BagError, ConversionError, MessageTypeError, RosLayerError

__all__ = ["BagError", "ConversionError", "MessageTypeError", "RosLayerError"]
