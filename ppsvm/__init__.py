"""ppsvm: privacy-preserving SVMs over checkerboard-partitioned data via random kernels."""

__version__ = "0.1.0"
