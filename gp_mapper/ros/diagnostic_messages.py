"""``/diagnostics``: a map's state as a ``DiagnosticArray`` and its values read back.

Pure: every function maps its arguments to a new message or record, so each is tested on
in-memory messages.
"""

from __future__ import annotations

from collections.abc import Mapping

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from gp_mapper.ros.stamps import message_header

# DiagnosticStatus levels (diagnostic_msgs/msg/DiagnosticStatus.msg), as the byte values
# the generated Python class stores.
DIAGNOSTIC_OK = DiagnosticStatus.OK
DIAGNOSTIC_WARN = DiagnosticStatus.WARN
DIAGNOSTIC_ERROR = DiagnosticStatus.ERROR
DIAGNOSTIC_STALE = DiagnosticStatus.STALE


def mapping_status_name(node_name: str) -> str:
    """Name of a mapper node's DiagnosticStatus, from its fully qualified name (a leading
    slash dropped), e.g. ``gp_mapper: mapping``."""
    return f"{node_name.lstrip('/')}: mapping"


def _value_text(value: object) -> str:
    # repr of a float is the shortest text that parses back to the same double, so a
    # reader recovers the occupancy scale lo/hi exactly.
    if isinstance(value, float):
        return repr(value)
    return str(value)


def diagnostic_array(
    stamp_ns: int,
    name: str,
    hardware_id: str,
    level: bytes,
    message: str,
    values: Mapping[str, object],
) -> DiagnosticArray:
    """One DiagnosticStatus in a DiagnosticArray, values as key/value text.

    Args:
        stamp_ns: header stamp [ns].
        name: status name, e.g. ``"gp_mapper: engine"``.
        hardware_id: the compute device, e.g. ``"cpu"`` or ``"cuda:0"``.
        level: one of DIAGNOSTIC_OK, DIAGNOSTIC_WARN, DIAGNOSTIC_ERROR, DIAGNOSTIC_STALE.
        message: one-line summary.
        values: key -> value; floats are written with ``repr`` (round-trip exact).
    """
    status = DiagnosticStatus(
        level=level,
        name=name,
        message=message,
        hardware_id=hardware_id,
        values=[KeyValue(key=str(k), value=_value_text(v)) for k, v in values.items()],
    )
    return DiagnosticArray(header=message_header("", stamp_ns), status=[status])


def diagnostic_values(msg: DiagnosticArray, name: str) -> dict[str, str] | None:
    """The key/value pairs of the status called ``name`` in ``msg``, or None."""
    for status in msg.status:
        if status.name == name:
            return {kv.key: kv.value for kv in status.values}
    return None
