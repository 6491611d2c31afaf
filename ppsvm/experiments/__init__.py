"""``ppsvm reproduce``: the papers' tables and figures regenerated over real gRPC entities.

One module per target (``table1``, ``sinc``, ``dp``); ``report`` writes the results
(Markdown, JSON with settings, seeds and versions, PNG figures) and shows progress;
``inprocess`` serves a split's cells as gRPC servers inside this process.
"""
