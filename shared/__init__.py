"""The wire protocol and game rules that the server and the bots both import.

Nothing here imports ``server`` or ``client_sim``: this package is the contract between them.
"""
