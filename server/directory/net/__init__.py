"""``arena-directory``'s HTTP edge: the aiohttp app and the command line."""
