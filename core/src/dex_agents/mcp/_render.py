"""The text the model sees for an MCP tool result."""

from __future__ import annotations

import json

from mcp.types import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

__all__ = ["render_tool_result"]


def _render_block(block: ContentBlock) -> str:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent):
        return f"[image: {block.mime_type}]"
    if isinstance(block, AudioContent):
        return f"[audio: {block.mime_type}]"
    if isinstance(block, ResourceLink):
        return f"[resource link: {block.name} {block.uri}]"
    resource = block.resource
    if isinstance(resource, TextResourceContents):
        return resource.text
    return f"[resource: {resource.uri} ({resource.mime_type or 'binary'})]"


def render_tool_result(result: CallToolResult) -> str:
    """Return a tool result as text: its content blocks, else its structured content as JSON.

    Text blocks are kept as they are, one per line; other blocks (images, audio, resources) are named in
    brackets, as a text-only transcript cannot hold them, and an embedded text resource gives its text.
    Servers that return structured content also return it as text, so structured content is rendered only
    when there is no content block.

    Args:
        result: The ``tools/call`` result.

    Returns:
        The text; empty for a result with neither content nor structured content.
    """
    if result.content:
        return "\n".join(_render_block(block) for block in result.content)
    if result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
    return ""
