"""The sans-I/O simulation: everything a tick touches, as plain objects over NumPy arrays.

The match and its world, the inputs (decoded frames, sanitising, jitter buffers), combat
and lag compensation, the history ring and the hit kernels (``hitreg``). No socket, no
asyncio, no wall clock: time is a parameter. ``make lint`` holds this layer to that
(import-linter contracts in ``pyproject.toml``); the asyncio edge is :mod:`server.net`.
"""
