"""``openenv bench``: load generation, statistics and reports for environment servers.

Modules: ``loadgen`` (the multi-process load generator), ``sessions`` (what one simulated
client does, over WebSocket or HTTP), ``wsclient`` (the WebSocket clients), ``procstat``
(server CPU and memory from /proc), ``stats`` (percentiles, success, max batch),
``report`` (JSON, CSV, Markdown, PNG), ``server`` (start/stop a server subprocess),
``runner`` (grids of runs), ``bench_env`` (the built-in benchmark environment).
"""
