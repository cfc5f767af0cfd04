"""The node's live view (``/view``): what a netcode engineer looks at to debug a match.

Sans-I/O core: :mod:`.shotlog` pairs each judged shot with the server's rewound target and
what its shooter reported seeing; :mod:`.frames` turns the world and those shots into the
feed's JSON frames. :mod:`.net` serves the page and the rate-limited feed.
"""
