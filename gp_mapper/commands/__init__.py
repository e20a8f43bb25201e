"""The ``gp-mapper`` sub-commands, one module each (convert, replay, fit, play, record, demo).

Each module holds its argument parsing, messages and exit codes; the work itself is library
code in the layers (``gp_mapper.io``, ``gp_mapper.mapping``, ``gp_mapper.ros``). The
dispatcher is ``gp_mapper.cli``.
"""
