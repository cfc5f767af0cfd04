"""The authoritative regional node: tick loop, world, history and the aiohttp edge."""
