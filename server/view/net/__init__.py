"""The live view's edge: the page and its feed (aiohttp)."""
