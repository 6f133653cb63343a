"""Pins dex_agents.mcp's public API, its import guard, its configuration checks, and its pure helpers."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mcp.types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

import dex_agents.mcp
from dex_agents import ToolEffect, ToolPolicy
from dex_agents.mcp import (
    DEFAULT_HANDSHAKE_TIMEOUT,
    IDEMPOTENCY_KEY_META_KEY,
    McpHttpServer,
    McpStdioServer,
    McpToolSource,
    render_tool_result,
)
from dex_agents.mcp._definitions import McpToolReference
from dex_agents.testing import mcp_inventory_server

EXPECTED_EXPORTS = {
    "DEFAULT_HANDSHAKE_TIMEOUT",
    "DEFAULT_TASK_WAIT_TIMEOUT",
    "IDEMPOTENCY_KEY_META_KEY",
    "TASKS_EXTENSION",
    "TASK_STATUS_EVENT",
    "McpHttpServer",
    "McpRoot",
    "McpServer",
    "McpStdioServer",
    "McpToolCallInterruptedError",
    "McpToolDefinition",
    "McpToolSource",
    "McpToolTaskError",
    "render_tool_result",
}


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False, timeout=60
    )


def test_exports_exactly_the_pinned_names() -> None:
    assert set(dex_agents.mcp.__all__) == EXPECTED_EXPORTS
    assert all(hasattr(dex_agents.mcp, name) for name in EXPECTED_EXPORTS)


def test_the_key_the_server_reads_is_the_key_the_source_sends() -> None:
    assert IDEMPOTENCY_KEY_META_KEY == "io.superdurable.dex/idempotencyKey"
    assert mcp_inventory_server.IDEMPOTENCY_KEY_META_KEY == IDEMPOTENCY_KEY_META_KEY
    assert DEFAULT_HANDSHAKE_TIMEOUT.total_seconds() == 30


def test_importing_the_core_and_its_test_kit_never_loads_the_mcp_sdk() -> None:
    result = _run(
        """
        import sys
        import dex_agents, dex_agents.client, dex_agents.session, dex_agents.testing
        print(sorted(name for name in sys.modules if name.split(".")[0] in ("mcp", "mcp_types", "httpx2")))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def _import_error_after(setup: str) -> str:
    """Run ``setup`` in a new interpreter, then import dex_agents.mcp; return the ImportError's message."""
    code = textwrap.dedent(setup) + textwrap.dedent(
        """
        try:
            import dex_agents.mcp
        except ImportError as error:
            print(error)
        else:
            print("imported")
        """
    )
    result = _run(code)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_without_the_extra_the_import_names_the_install_command() -> None:
    message = _import_error_after(
        """
        import sys
        sys.modules["mcp"] = None  # as if the package were not installed
        """
    )
    assert message == (
        "dex_agents.mcp needs the MCP SDK, mcp 2.3 or a later 2.x, and mcp is not installed: "
        'pip install "dex-agents[mcp]"'
    )


def test_an_mcp_1_release_is_refused_with_its_version() -> None:
    message = _import_error_after(
        """
        import importlib.metadata
        real = importlib.metadata.version
        importlib.metadata.version = lambda name: "1.30.0" if name == "mcp" else real(name)
        """
    )
    assert message == (
        "dex_agents.mcp needs the MCP SDK, mcp 2.3 or a later 2.x, and mcp 1.30.0 is installed: "
        'pip install "dex-agents[mcp]"'
    )


def test_server_configurations_refuse_what_cannot_work() -> None:
    with pytest.raises(ValueError, match="1 to 64 letters, digits"):
        McpStdioServer("my server", "python")
    with pytest.raises(ValueError, match="1 to 64 letters, digits"):
        McpStdioServer("", "python")
    with pytest.raises(ValueError, match="needs a command"):
        McpStdioServer("files", "")
    with pytest.raises(TypeError, match="sequence of strings, not a string"):
        McpStdioServer("files", "python", "-m server")
    with pytest.raises(TypeError, match="must be a ToolPolicy"):
        McpStdioServer("files", "python", tool_policies={"write": "read"})  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match=r"needs an http:// or https:// URL, got 'file:///etc/passwd'"):
        McpHttpServer("files", "file:///etc/passwd")
    with pytest.raises(ValueError, match="needs an http:// or https:// URL"):
        McpHttpServer("files", "localhost:8000/mcp")
    with pytest.raises(ValueError, match="two MCP servers are named 'files'"):
        McpToolSource([McpStdioServer("files", "python"), McpHttpServer("files", "http://127.0.0.1:1/mcp")])
    with pytest.raises(ValueError, match="at least one MCP server"):
        McpToolSource([])
    with pytest.raises(TypeError, match="McpStdioServer or McpHttpServer"):
        McpToolSource(["python -m server"])  # pyright: ignore[reportArgumentType]


def test_a_configuration_is_frozen_against_later_changes_of_the_callers_dicts() -> None:
    env = {"TOKEN": "a"}
    policies = {"write": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)}
    server = McpStdioServer(
        "files", "python", ["-m", "server"], env=env, cwd=Path("/tmp"), tool_policies=policies
    )
    env["TOKEN"] = "b"
    policies.clear()
    assert server.env == {"TOKEN": "a"}
    assert server.args == ("-m", "server")
    assert dict(server.tool_policies) == {"write": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)}


def test_merged_policies_name_tools_as_the_model_sees_them_and_yours_win() -> None:
    source = McpToolSource(
        [
            McpStdioServer(
                "files",
                "python",
                tool_policies={
                    "delete": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),
                    "read": ToolPolicy(ToolEffect.READ),
                },
            ),
            McpHttpServer(
                "crm", "https://crm.example/mcp", tool_policies={"note": ToolPolicy(ToolEffect.READ)}
            ),
        ]
    )
    mine = ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)
    merged = source.merge_tool_policies(
        {"files__delete": mine, "send_email": ToolPolicy(ToolEffect.UNCLASSIFIED)}
    )
    assert merged == {
        "files__delete": mine,
        "files__read": ToolPolicy(ToolEffect.READ),
        "crm__note": ToolPolicy(ToolEffect.READ),
        "send_email": ToolPolicy(ToolEffect.UNCLASSIFIED),
    }
    assert source.merge_tool_policies() == {
        "files__delete": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),
        "files__read": ToolPolicy(ToolEffect.READ),
        "crm__note": ToolPolicy(ToolEffect.READ),
    }
    with pytest.raises(TypeError, match="'send_email' must be a ToolPolicy"):
        source.merge_tool_policies({"send_email": "read"})  # pyright: ignore[reportArgumentType]


def test_a_reference_reads_back_only_when_this_source_wrote_it() -> None:
    reference = McpToolReference("inventory", "count_items")
    assert McpToolReference.decode(reference.encode()) == reference
    for foreign in (
        None,
        "",
        "count_items",
        "[]",
        '{"server": "inventory", "tool": "count_items"}',
        '{"source": "stepwise", "server": "inventory", "tool": "count_items"}',
        '{"source": "mcp", "server": "", "tool": "count_items"}',
        '{"source": "mcp", "server": "inventory", "tool": 7}',
    ):
        assert McpToolReference.decode(foreign) is None, foreign


def test_a_result_renders_as_text_blocks_else_structured_content() -> None:
    assert (
        render_tool_result(CallToolResult(content=[TextContent(type="text", text="7 in stock")]))
        == "7 in stock"
    )
    both = CallToolResult(
        content=[TextContent(type="text", text='{"count":7}')], structured_content={"count": 7}
    )
    assert render_tool_result(both) == '{"count":7}'
    assert render_tool_result(CallToolResult(content=[], structured_content={"count": 7, "sku": "Ä-1"})) == (
        '{"count":7,"sku":"Ä-1"}'
    )
    assert render_tool_result(CallToolResult(content=[])) == ""
    mixed = CallToolResult(
        content=[
            TextContent(type="text", text="Here is the label:"),
            ImageContent(type="image", data="aGk=", mime_type="image/png"),
            ResourceLink(type="resource_link", name="label", uri="file:///labels/a-1.pdf"),
            EmbeddedResource(
                type="resource", resource=TextResourceContents(uri="file:///notes.txt", text="fragile")
            ),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(uri="file:///a.bin", blob="aGk=", mime_type="application/pdf"),
            ),
        ]
    )
    assert render_tool_result(mixed).splitlines() == [
        "Here is the label:",
        "[image: image/png]",
        "[resource link: label file:///labels/a-1.pdf]",
        "fragile",
        "[resource: file:///a.bin (application/pdf)]",
    ]
