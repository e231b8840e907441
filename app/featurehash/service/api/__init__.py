"""HTTP layer: routers by resource, body codecs, error mapping, middleware."""
