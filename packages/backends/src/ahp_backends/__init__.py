"""ahp-backends: sample AHP backends, each a separate process (``ahp-backend``)."""

__version__ = "0.1.0"
