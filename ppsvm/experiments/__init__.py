"""``ppsvm reproduce``: the papers' tables and figures regenerated over real gRPC entities.

One module per target (``table1``, ``sinc``, ``dp``); ``report`` writes the results
(Markdown, JSON with settings, seeds and versions, PNG figures) and shows progress. Cells are
served as gRPC servers inside this process by ``ppsvm.api.inprocess``, as the estimators do.
"""
