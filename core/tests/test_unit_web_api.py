"""Pins dex_agents.web's public API, its import guard, and that the core never loads Starlette."""

import subprocess
import sys
import textwrap

import pytest

import dex_agents.web
from dex_agents.web import create_agent_web_app
from tests.agents import SPEC

EXPECTED_EXPORTS = {
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_SESSION_ID_PATTERN",
    "TURN_ENDED_FROM_STATE",
    "UI_MESSAGE_STREAM_HEADERS",
    "EventStreamTimings",
    "SessionAccess",
    "create_agent_web_app",
    "snapshot_json",
}


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False, timeout=60
    )


def test_exports_exactly_the_pinned_names() -> None:
    assert set(dex_agents.web.__all__) == EXPECTED_EXPORTS
    assert all(hasattr(dex_agents.web, name) for name in EXPECTED_EXPORTS)


def test_importing_the_core_never_loads_starlette() -> None:
    result = _run(
        """
        import sys
        import dex_agents
        import dex_agents.client, dex_agents.session, dex_agents.values
        loaded = sorted(name for name in sys.modules if name.split(".")[0] in ("starlette", "sse_starlette"))
        print(loaded)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_without_the_extra_the_import_names_the_install_command() -> None:
    result = _run(
        """
        import sys
        sys.modules["sse_starlette"] = None  # as if the package were not installed
        try:
            import dex_agents.web
        except ImportError as error:
            print(error)
        else:
            print("imported")
        """
    )
    assert result.returncode == 0, result.stderr
    assert 'pip install "dex-agents[web]"' in result.stdout and "sse_starlette" in result.stdout


def test_the_app_takes_a_session_client_or_a_client_and_flow() -> None:
    flow = SPEC.build_flows().main
    with pytest.raises(TypeError, match="AgentSessionClient, or both client= and flow="):
        create_agent_web_app()
    with pytest.raises(TypeError, match="AgentSessionClient, or both"):
        create_agent_web_app(flow=flow)
    with pytest.raises(ValueError, match="max_request_bytes must be positive"):
        create_agent_web_app(client=object(), flow=flow, max_request_bytes=0)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="session_id_pattern does not compile"):
        create_agent_web_app(client=object(), flow=flow, session_id_pattern="(")  # pyright: ignore[reportArgumentType]
