"""Serving the app on its own: uvicorn with the app's lifespan, in the loop that serves it."""

from __future__ import annotations

from starlette.types import ASGIApp

__all__ = ["serve_agent_web_app"]


def serve_agent_web_app(
    app: ASGIApp, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info"
) -> None:
    """Serve ``app`` with uvicorn until SIGINT or SIGTERM; a process's whole main.

    The app's lifespan runs in uvicorn's event loop, so an app built with
    ``create_agent_web_app(connect=...)`` connects its Dex client there and closes it at shutdown.

    Args:
        app: The app, usually from `create_agent_web_app`.
        host: The address to listen on. Loopback by default; the app answers only the host names in its
            ``allowed_hosts`` whatever address it listens on.
        port: The port.
        log_level: uvicorn's log level.
    """
    import uvicorn  # noqa: PLC0415 - the web extra brings it; importing dex_agents.web needs only Starlette

    uvicorn.run(app, host=host, port=port, log_level=log_level, lifespan="on")
