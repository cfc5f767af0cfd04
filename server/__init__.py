"""The authoritative regional node: tick loop, world, history and the aiohttp edge."""

from shared import jitcache

# Before any kernel module is imported: numba files its cache where this says.
jitcache.configure()
