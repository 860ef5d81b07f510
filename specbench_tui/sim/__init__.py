"""A faithful SGLang 0.5.23 stand-in: ``python -m specbench_tui.sim`` (see docs/simulator.md).

The simulator takes SGLang's own flags, serves SGLang's HTTP endpoints, prints SGLang's log lines on
stderr, spawns scheduler/detokenizer children that die with their parent, and reproduces SGLang's failures
on demand. It shares nothing with the rest of ``specbench_tui`` except the wire, and it imports only the
standard library, so that it starts fast and can stand in for a real server in tests and demos.
"""

SGLANG_VERSION = "0.5.23"
"""The SGLang release whose flags, endpoints and log formats the simulator reproduces."""
