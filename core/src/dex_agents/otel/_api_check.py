"""The OpenTelemetry API `dex_agents.otel` needs, checked before anything imports it."""

from __future__ import annotations

__all__ = ["require_opentelemetry_api"]


def require_opentelemetry_api() -> None:
    """Raise an `ImportError` naming the install command unless the OpenTelemetry API is importable.

    Raises:
        ImportError: If ``opentelemetry-api`` is not installed.
    """
    try:
        import opentelemetry.trace  # noqa: F401, PLC0415  # pyright: ignore[reportUnusedImport]
    except ImportError as error:
        raise ImportError(
            "dex_agents.otel needs the OpenTelemetry API (opentelemetry-api), which is not installed: "
            'pip install "dex-agents[otel]"'
        ) from error


require_opentelemetry_api()
