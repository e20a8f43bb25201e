"""A synthetic office floor for building-scale mapping benchmarks (numpy and scipy only).

The floor (default 60 m x 40 m; x east, y north, map frame, walking plane z = 0) is laid out as
many office floors are: a ring corridor 2 m wide runs 6 m inside the outer wall; the band
between the ring and the outer wall holds perimeter offices about 6 m wide, and the four
corners are closed cores (stairs, lifts). Inside the ring, two north-south cross corridors and
one east-west cross corridor divide the core into 3 x 2 blocks, each split into two rooms. Every
room has one 1 m door onto a corridor. The corridors form a graph: nodes at the junctions and
corners (4 x 3 of them), edges the corridor segments between them (17 at the default size).

The true field, in µT in the map frame, is a uniform Earth field plus magnetic dipoles buried
below the walking plane (reinforcement and cables in the slab, pipes and machines below it,
structural steel deeper down) at depths of 0.3-3 m, so their anomalies spread over 0.3-3 m;
each one peaks at 5-30 µT on the walking plane.

The walk goes at about 1.2 m/s along an Eulerian circuit of the corridor graph in which every
corridor segment is walked once in each direction, and visits every room on the way (in
through its door, one loop inside, back out). Corners are rounded with a limited turn rate;
when a lap ends before the walk does, the next lap takes the corridors in another order. A
"pass" is one traversal of a corridor segment or one room visit; a run adds a random offset
per pass along the field (a calibration residue constant along a pass) and white noise, and
reads the field in the SENSOR frame, as :func:`gp_mapper.io.synthetic.simulate_run` does.

The scoring helpers pick the map cells within 0.3 m of the path and the time the walk first
came that close to each, so that a benchmark can split the cells by when they were first seen.
"""

from .field import BuildingWorld, make_building_world
from .plan import DEFAULT_FLOOR_SIZE_M, FloorPlan
from .run import (
    DEFAULT_PASS_OFFSET_UT,
    DEFAULT_POSE_RATE_HZ,
    BuildingRun,
    simulate_building_run,
    write_building_bag,
)
from .scoring import PATH_RADIUS_M, first_visit_times, path_cells
from .walk import (
    DEFAULT_DURATION_S,
    DEFAULT_WALK_RATE_HZ,
    DEFAULT_WALK_SPEED_MPS,
    BuildingWalk,
    building_walk,
)

__all__ = [
    "DEFAULT_DURATION_S",
    "DEFAULT_FLOOR_SIZE_M",
    "DEFAULT_PASS_OFFSET_UT",
    "DEFAULT_POSE_RATE_HZ",
    "DEFAULT_WALK_RATE_HZ",
    "DEFAULT_WALK_SPEED_MPS",
    "PATH_RADIUS_M",
    "BuildingRun",
    "BuildingWalk",
    "BuildingWorld",
    "FloorPlan",
    "building_walk",
    "first_visit_times",
    "make_building_world",
    "path_cells",
    "simulate_building_run",
    "write_building_bag",
]
