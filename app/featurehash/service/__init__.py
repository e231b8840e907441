"""The web service: the FastAPI app factory (app.py), its routers and middleware (api/), the launcher
(serve.py, web.py, connection_guard.py), settings (config.py) and the per-process map and compile caches. Nothing
below this package imports it."""
