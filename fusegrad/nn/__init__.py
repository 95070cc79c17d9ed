"""Neural-network helpers. ``fusegrad.nn.functional`` holds the stable activations."""

from . import functional

__all__ = ["functional"]
