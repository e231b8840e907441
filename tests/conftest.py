"""Shared fixtures. The HTTP service fixtures (real `featurehash serve` processes) live in
tests/service_support.py; they start nothing unless a test asks for them."""

from service_support import embedded_server, main_maps, main_server, main_servers, service_client  # noqa: F401
