"""Operator tooling: the launchers (``arena-demo``, ``arena-cluster``, ``arena-chaos``)
and the process supervisor they share.

They start nodes, directories and bots as child processes and drive them from outside,
as users would. Nothing in ``server``, ``client_sim`` or ``shared`` imports this package
(an import-linter contract in ``pyproject.toml``).
"""
