"""The node's asyncio edge: the aiohttp app, player sessions and streams, the tick loop,
the role loop, the warm-up, heartbeats to the directory and the ``arena-server`` command.

It moves bytes and calls the sans-I/O core (:mod:`server.sim`, the replication records,
the election rules); nothing here decides a game rule.
"""
