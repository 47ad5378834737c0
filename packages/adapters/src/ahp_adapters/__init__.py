"""ahp-adapters: AHP backends behind the native hooks of existing agent harnesses."""

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from ahp_protocol import __version__
else:

    def __getattr__(name: str) -> object:
        # Lazy: every native hook process imports this package; the version (the kit's
        # one, ahp_protocol._version) costs the protocol package's bare init, paid only
        # where it is asked for (the hook client's daemon key, rundir.daemon_key).
        if name == "__version__":
            from ahp_protocol import __version__

            return __version__
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["__version__"]
