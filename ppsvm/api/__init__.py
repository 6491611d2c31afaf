"""The Python API, above the entity and the coordinator (DESIGN.md section 3).

``inprocess`` serves a split's cells as gRPC entity servers inside this process.
"""
