"""featurehash: seeded kernel feature maps as a library and an HTTP service."""

__version__ = "0.1.0"
