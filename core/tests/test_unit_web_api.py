"""Pins dex_agents.web's public API, its import guard, and that the core never loads Starlette."""

import subprocess
import sys
import textwrap
from typing import cast

import pytest
from dex import AsyncClient
from dex_agents_examples import web_demo
from starlette.requests import Request

import dex_agents.web
from dex_agents import AgentSessionClient
from dex_agents.web import DEFAULT_ALLOWED_HOSTS, SessionAction, create_agent_web_app
from dex_agents.web._protection import host_is_allowed
from tests.agents import SPEC

EXPECTED_EXPORTS = {
    "CONTENT_SECURITY_POLICY",
    "DEFAULT_ALLOWED_HOSTS",
    "DEFAULT_MAX_JSON_DEPTH",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_STREAMS",
    "DEFAULT_MAX_STREAMS_PER_SESSION",
    "DEFAULT_SESSION_ID_PATTERN",
    "TURN_ENDED_FROM_STATE",
    "UI_MESSAGE_STREAM_HEADERS",
    "EventStreamTimings",
    "SessionAccess",
    "SessionAccessRule",
    "SessionAction",
    "create_agent_web_app",
    "serve_agent_web_app",
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
        loaded = sorted(
            name for name in sys.modules if name.split(".")[0] in ("starlette", "sse_starlette", "ag_ui")
        )
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
    with pytest.raises(TypeError, match="exactly one of an AgentSessionClient, both client= and flow="):
        create_agent_web_app(allow_any_session=True)
    with pytest.raises(TypeError, match="AgentSessionClient, or both"):
        create_agent_web_app(flow=flow, allow_any_session=True)
    client = cast(AsyncClient, object())
    with pytest.raises(TypeError, match="exactly one of"):
        create_agent_web_app(client=client, flow=flow, connect=lambda: AgentSessionClient(client, flow))
    with pytest.raises(ValueError, match="max_request_bytes must be positive"):
        create_agent_web_app(client=client, flow=flow, allow_any_session=True, max_request_bytes=0)
    with pytest.raises(ValueError, match="max_json_depth must be positive"):
        create_agent_web_app(client=client, flow=flow, allow_any_session=True, max_json_depth=0)
    with pytest.raises(ValueError, match="session_id_pattern does not compile"):
        create_agent_web_app(client=client, flow=flow, allow_any_session=True, session_id_pattern="(")


def test_the_app_refuses_to_build_without_an_access_rule() -> None:
    flow = SPEC.build_flows().main
    client = cast(AsyncClient, object())
    with pytest.raises(TypeError, match=r"needs an access rule: pass access=rule.*allow_any_session=True"):
        create_agent_web_app(client=client, flow=flow)

    async def rule(request: Request, session_id: str, action: SessionAction) -> bool:
        del request, session_id, action
        return True

    async def old_rule(request: Request, session_id: str) -> bool:
        del request, session_id
        return True

    with pytest.raises(TypeError, match="pass one of access=, session_access= and allow_any_session=True"):
        create_agent_web_app(client=client, flow=flow, access=rule, allow_any_session=True)
    with pytest.raises(TypeError, match="pass one of"):
        create_agent_web_app(client=client, flow=flow, access=rule, session_access=old_rule)
    # Each of the three builds.
    create_agent_web_app(client=client, flow=flow, access=rule)
    create_agent_web_app(client=client, flow=flow, session_access=old_rule)
    create_agent_web_app(client=client, flow=flow, allow_any_session=True)


def test_limits_and_hosts_are_checked_when_the_app_is_built() -> None:
    flow = SPEC.build_flows().main
    client = cast(AsyncClient, object())
    with pytest.raises(ValueError, match="must be positive, got 0 and 256"):
        create_agent_web_app(client=client, flow=flow, allow_any_session=True, max_streams_per_session=0)
    with pytest.raises(ValueError, match="allowed_hosts must name at least one host"):
        create_agent_web_app(client=client, flow=flow, allow_any_session=True, allowed_hosts=[])
    with pytest.raises(ValueError, match=r"without scheme or port, got 'example\.com:443'"):
        create_agent_web_app(
            client=client, flow=flow, allow_any_session=True, allowed_hosts=["example.com:443"]
        )
    with pytest.raises(ValueError, match="a list of host names, got the string"):
        create_agent_web_app(client=client, flow=flow, allow_any_session=True, allowed_hosts="example.com")


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("localhost:8000", True),
        ("127.0.0.1", True),
        ("[::1]:8000", True),
        ("LOCALHOST", True),
        ("", False),
        ("rebind.attacker.example:8000", False),
        ("localhost.attacker.example", False),
        ("127.0.0.1.nip.io", False),
        ("[::2]:8000", False),
    ],
)
def test_only_loopback_hosts_pass_by_default(host: str, allowed: bool) -> None:
    assert host_is_allowed(host, DEFAULT_ALLOWED_HOSTS) is allowed


def test_a_subdomain_pattern_and_the_wildcard() -> None:
    assert host_is_allowed("chat.example.com", ["*.example.com"])
    assert not host_is_allowed("example.com.evil.test", ["*.example.com"])
    assert not host_is_allowed("badexample.com", ["*.example.com"])
    assert host_is_allowed("anything:1", ["*"])


def test_the_demo_checks_no_access_so_it_serves_only_on_loopback(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        web_demo.main(["tests.agents:build_flow", "tests.agent_worker", "--host", "0.0.0.0"])
    assert exited.value.code == 2
    assert "--host must be a loopback address" in capsys.readouterr().err
