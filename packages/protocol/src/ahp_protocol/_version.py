"""The kit's version, written here and nowhere else.

The five packages (ahp-protocol, ahp-harness, ahp-backends, ahp-adapters,
ahp-conformance) are released together under one version: each pyproject.toml
reads it from this file at build time (``[tool.hatch.version]``), and each
package's ``__version__`` is this value. Imports nothing: the adapters' hook
client reads it on every tool call.
"""

__version__ = "0.1.0"
