"""What every response of the app carries, and which requests it refuses before any route runs.

* **Host.** A page on another site can point its own DNS name at 127.0.0.1 (DNS rebinding) and then call
  the app as a same-origin page would. Its requests still carry that name in ``Host``, so only the names
  the app is served under are accepted; any other answers 400.
* **Headers.** The chat page runs only its own files (a Content-Security-Policy without inline script),
  is never framed (``frame-ancestors 'none'``, so an Approve button cannot be clickjacked), and no response
  is sniffed into another type or leaks its URL as a referrer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "DEFAULT_ALLOWED_HOSTS",
    "SECURITY_HEADERS",
    "WebProtection",
    "checked_allowed_hosts",
    "host_is_allowed",
]

#: The names the app answers under by default: loopback only.
DEFAULT_ALLOWED_HOSTS: tuple[str, ...] = ("localhost", "127.0.0.1", "[::1]")

#: The policy of every response: the page's own script, styles and API only, and no framing.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

#: The headers added to every response.
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
)
_ENCODED_HEADERS = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in SECURITY_HEADERS]


def checked_allowed_hosts(hosts: Sequence[str]) -> tuple[str, ...]:
    """Return the host names lower-cased, refusing an empty list or a name with a port.

    Raises:
        ValueError: If ``hosts`` is empty or a plain string, or a name carries a port or a scheme.
    """
    if isinstance(hosts, str):
        raise ValueError(f"allowed_hosts takes a list of host names, got the string {hosts!r}")
    if not hosts:
        raise ValueError('allowed_hosts must name at least one host ("*" accepts any, not recommended)')
    checked: list[str] = []
    for host in hosts:
        bare = host.strip().lower()
        if not bare or "/" in bare or (":" in bare and not bare.startswith("[")) or bare.endswith("]:"):
            raise ValueError(f"allowed_hosts takes host names without scheme or port, got {host!r}")
        checked.append(bare)
    return tuple(checked)


def _host_name(header: str) -> str:
    """The name part of a ``Host`` header, lower-cased: without its port, IPv6 literals in brackets."""
    header = header.strip().lower()
    if header.startswith("["):
        end = header.find("]")
        return header[: end + 1] if end != -1 else header
    return header.split(":", 1)[0]


def host_is_allowed(header: str, allowed: Sequence[str]) -> bool:
    """Whether a ``Host`` header names one of ``allowed`` (``*`` any; ``*.example.com`` any subdomain)."""
    name = _host_name(header)
    if not name:
        return False
    for pattern in allowed:
        if pattern in ("*", name):
            return True
        if pattern.startswith("*.") and name.endswith(pattern[1:]):
            return True
    return False


class WebProtection:
    """ASGI middleware: refuse a request for another host, and add the security headers to every answer."""

    def __init__(self, app: ASGIApp, allowed_hosts: Sequence[str]) -> None:
        self._app = app
        self._allowed_hosts = tuple(allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        host = Headers(scope=scope).get("host", "")
        if not host_is_allowed(host, self._allowed_hosts):
            await self._refuse_host(host, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(name, value) for name, value in _ENCODED_HEADERS if name not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self._app(scope, receive, send_with_headers)

    async def _refuse_host(self, host: str, send: Send) -> None:
        shown = host[:200] or "no Host header"
        error = (
            f"the app is not served under the host {shown!r}; add it to create_agent_web_app's allowed_hosts"
        )
        body = json.dumps({"error": error}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *_ENCODED_HEADERS,
        ]
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": body})
