"""ahp-backends: sample AHP backends, each a separate process (``ahp-backend``)."""

from ahp_protocol import __version__  # the kit's one version

__all__ = ["__version__"]
