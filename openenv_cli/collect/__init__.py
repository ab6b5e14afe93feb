"""Episodes into datasets (``openenv collect``) and evaluation reports (``openenv eval``).

``spec``: the run's typed options and its episode plan; ``policies``: what picks actions
(a model, a Python callable, random valid actions); ``episodes``: one episode against one
session; ``runner``: many episodes at once over one or several servers; ``store``: shards on
disk, resume and provenance; ``report``: statistics and the Markdown/JSON/HTML report.
Heavy libraries (pyarrow, scipy, matplotlib) are imported inside the functions that use them.
"""
