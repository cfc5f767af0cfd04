"""Load-test bots: latency model, clock sync and the bot swarm that drives the server."""

from shared import jitcache

# Before any kernel module is imported: numba files its cache where this says.
jitcache.configure()
