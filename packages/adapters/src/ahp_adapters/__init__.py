"""ahp-adapters: AHP backends behind the native hooks of existing agent harnesses."""

__version__ = "0.1.0"
