"""The version of fusegrad, in one place (the package and the cache keys read it)."""

__version__ = "0.1.0"
