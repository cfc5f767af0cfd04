"""Operator tooling: the launchers (``arena-demo``, ``arena-cluster``, ``arena-chaos``)
and the process supervisor they and the benches share (:mod:`launch.supervisor`).

They start nodes, directories and bots as child processes and drive them from outside,
as users would. ``arena-cluster`` is three modules by job: what to start
(:mod:`launch.cluster_spec`), starting, describing and stopping it
(:mod:`launch.cluster_run`) and the command (:mod:`launch.cluster`). Nothing in
``server``, ``client_sim`` or ``shared`` imports this package (an import-linter contract
in ``pyproject.toml``, checked by ``make lint``).
"""
