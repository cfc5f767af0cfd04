"""Load-test bots: latency model, clock sync and the bot swarm that drives the server."""
