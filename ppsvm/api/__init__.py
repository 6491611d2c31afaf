"""The Python API, above the entity and the coordinator (docs/design.md section 3).

``estimators``: scikit-learn estimators fitted on a federation simulated in this process
(``inprocess``); ``federation``: a client for a running, networked federation, which the
``ppsvm coordinator`` commands go through; ``datasets``: the datasets that ship with ppsvm.
Import the public names from ``ppsvm`` itself.
"""
