"""A scripted Claude Code CLI behind the SDK's `Transport`: the stream-JSON control protocol, no subprocess.

`ScriptedCli.transport` is a `ClaudeAgentRunner(transport_factory=...)`. Each run it builds speaks what the
real CLI speaks on stdout/stdin, in the order the CLI does:

- answers the SDK's `initialize` control request and takes the `PreToolUse` hook callback IDs from it;
- opens the in-process MCP server `dex` through `mcp_message` control requests (`initialize`,
  `notifications/initialized`, `tools/list`), as the CLI does for an SDK server;
- reads the prompt (a fresh run) or, for `options.resume`, loads the transcript from
  `options.session_store` and resumes the deferred tool use it ends with: the hook, then `tools/call`
  (or, with `ScriptedCli.lose_deferred_calls`, the internal-error result CLI 2.1.332 gave a deferred call
  it lost);
- plays the scripted model's replies (the public `ApiReply`, one per model call, in order): `stream_event`s
  (`message_start`, blocks, text deltas, `message_delta` with the stop reason, `message_stop`), then the
  `assistant` message; asks the hook about
  each tool use (`hook_callback`; before `message_stop` while `ScriptedCli.hooks_before_stop`), runs
  allowed calls of `dex` through
  `tools/call` with the tool use ID in `_meta["claudecode/toolUseId"]`, and turns a `deny` into the CLI's
  `PreToolUse:<tool> hook error: ` result;
- when no hook decides about a call, asks the permission system: `options.allowed_tools` allows it, else
  `can_use_tool` (a `can_use_tool` control request) decides, else it is refused (the real CLI's
  permission modes, which let some read-only calls through unasked, are not modelled);
- after asking about every tool use of a response, stops the run if any was deferred (`result` with
  `stop_reason` `tool_deferred` and the last deferred call as `deferred_tool_use`; the others get no
  result, as in the real CLI);
- mirrors its transcript entries (`transcript_mirror`) before every `result`, and reports the run's usage.

What the model would have read (each model call's tool results) is logged in `ScriptedCli.model_inputs`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from claude_agent_sdk import ClaudeAgentOptions, Transport

from dex_agents_claude_agent_sdk.testing import ApiReply, ApiToolUse

_PROJECT = "scripted-project"

LOST_TOOL_RESULT = "[Tool result missing due to internal error]"
"""What CLI 2.1.332 answered a deferred call with when it lost it on resume."""


@dataclass
class ScriptedCli:
    """The scripted model's replies and the log of everything the runner told the CLI.

    Attributes:
        responses: The replies still to play, across runs, in order; an `error_status` is the status of
            an API error the CLI gave up on.
        hook_decisions: Each hook answer: (tool use ID, decision or "none", reason or `None`).
        permission_requests: Each `can_use_tool` request: (tool name, tool use ID).
        model_inputs: For each model call, the tool results the model reads: (tool use ID, text, is_error).
        prompts: The prompt of each fresh run.
        listed_tools: The tools each run's `tools/list` returned.
        resumed_transcripts: The transcript each resumed run loaded from the session store.
        lose_deferred_calls: Resume a deferred call with an internal-error result, without the hook or
            its tool (what CLI 2.1.332 did to a deferred call that was not its response's last tool use).
        hooks_before_stop: Ask the hook about a response's tool uses before its `message_stop`, as a CLI
            that runs tools while it streams.
    """

    responses: list[ApiReply]
    hook_decisions: list[tuple[str, str, str | None]] = field(
        default_factory=list[tuple[str, str, str | None]]
    )
    model_inputs: list[list[tuple[str, str, bool]]] = field(default_factory=list[list[tuple[str, str, bool]]])
    prompts: list[str] = field(default_factory=list[str])
    listed_tools: list[list[str]] = field(default_factory=list[list[str]])
    resumed_transcripts: list[list[dict[str, Any]]] = field(default_factory=list[list[dict[str, Any]]])
    permission_requests: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    lose_deferred_calls: bool = False
    hooks_before_stop: bool = False
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def transport(self, options: ClaudeAgentOptions) -> Transport:
        """Return the transport of one run (the runner's `transport_factory`)."""
        return ScriptedTransport(self, options)

    def next_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids)}"


class ScriptedTransport(Transport):
    """One CLI run. See the module docstring for the protocol it plays."""

    def __init__(self, cli: ScriptedCli, options: ClaudeAgentOptions) -> None:
        self._cli = cli
        self._options = options
        self._inbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._answers: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._hook_ids: list[str] = []
        self._ready = False
        self._session_id = options.resume or cli.next_id("session")
        self._transcript: list[dict[str, Any]] = []
        self._unmirrored: list[dict[str, Any]] = []
        self._usage: dict[str, int] = {}
        self._model_calls = 0

    async def connect(self) -> None:
        self._ready = True

    def is_ready(self) -> bool:
        return self._ready

    async def end_input(self) -> None:
        return None

    async def close(self) -> None:
        self._ready = False
        self._inbox.put_nowait(None)

    async def write(self, data: str) -> None:
        for line in data.splitlines():
            if not line.strip():
                continue
            message = cast(dict[str, Any], json.loads(line))
            if message.get("type") == "control_response":
                response = cast(dict[str, Any], message["response"])
                future = self._answers.pop(str(response["request_id"]))
                if response.get("subtype") == "error":
                    future.set_exception(RuntimeError(str(response.get("error"))))
                else:
                    future.set_result(cast(dict[str, Any], response.get("response") or {}))
            else:
                self._inbox.put_nowait(message)

    async def _receive(self) -> dict[str, Any]:
        message = await self._inbox.get()
        if message is None:
            raise EOFError("the SDK closed the transport")
        return message

    def _request(self, request: dict[str, Any]) -> tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]:
        """A control request to the SDK, and where its answer arrives."""
        request_id = self._cli.next_id("cli_req")
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._answers[request_id] = future
        return {"type": "control_request", "request_id": request_id, "request": request}, future

    def _mcp(self, method: str, params: dict[str, Any] | None = None, *, notify: bool = False) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not notify:
            message["id"] = self._cli.next_id("mcp")
        return self._request({"subtype": "mcp_message", "server_name": "dex", "message": message})

    def _record(self, entry: dict[str, Any]) -> None:
        entry = {"uuid": self._cli.next_id("entry"), "sessionId": self._session_id, **entry}
        self._transcript.append(entry)
        self._unmirrored.append(entry)

    def _mirror(self) -> dict[str, Any]:
        config = self._options.env["CLAUDE_CONFIG_DIR"]
        entries, self._unmirrored = self._unmirrored, []
        return {
            "type": "transcript_mirror",
            "filePath": f"{config}/projects/{_PROJECT}/{self._session_id}.jsonl",
            "entries": entries,
        }

    def _result(self, **fields: Any) -> dict[str, Any]:
        return {
            "type": "result",
            "subtype": "success",
            "duration_ms": 1,
            "duration_api_ms": 1,
            "is_error": False,
            "num_turns": self._model_calls,
            "session_id": self._session_id,
            "usage": dict(self._usage),
            **fields,
        }

    async def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        try:
            async for message in self._run():
                yield message
        except EOFError:
            return

    async def _run(self) -> AsyncIterator[dict[str, Any]]:
        initialize = await self._receive()
        assert initialize["request"]["subtype"] == "initialize", initialize
        hooks = cast(dict[str, Any], initialize["request"].get("hooks") or {})
        self._hook_ids = [
            callback for matcher in hooks.get("PreToolUse", []) for callback in matcher["hookCallbackIds"]
        ]
        yield {
            "type": "control_response",
            "response": {"subtype": "success", "request_id": initialize["request_id"], "response": {}},
        }
        # The CLI's MCP client opens the SDK server before the first model call.
        request, answer = self._mcp("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})
        yield request
        await answer
        request, answer = self._mcp("notifications/initialized", notify=True)
        yield request
        await answer
        request, answer = self._mcp("tools/list")
        yield request
        listed = (await answer)["mcp_response"]["result"]["tools"]
        self._cli.listed_tools.append([str(tool["name"]) for tool in listed])

        results: list[tuple[str, str, bool]] = []
        if self._options.resume is not None:
            store = self._options.session_store
            assert store is not None, "a resumed run needs the session store"
            loaded = await store.load({"project_key": _PROJECT, "session_id": self._options.resume})
            assert loaded, f"no transcript for session {self._options.resume}"
            self._transcript = [dict(entry) for entry in loaded]
            self._cli.resumed_transcripts.append([dict(entry) for entry in loaded])
            # The CLI resumes the tool use its transcript was deferred at: hook first, then the tool.
            pending = cast(dict[str, Any], self._transcript[-1]["deferred"])
            use = ApiToolUse(pending["id"], pending["name"], pending["input"])
            earlier = cast(list[list[Any]], self._transcript[-1].get("results", []))
            results = [(str(i), str(t), bool(e)) for i, t, e in earlier]
            if self._cli.lose_deferred_calls:
                results.append((use.tool_use_id, LOST_TOOL_RESULT, True))
            else:
                async for message in self._tool_use(use, results):
                    assert message is not None, "the hook deferred the call it resumes"
                    yield message
            yield self._tool_results_message(results)
        else:
            prompt = await self._receive()
            assert prompt["type"] == "user", prompt
            self._cli.prompts.append(str(prompt["message"]["content"]))
            self._record({"type": "user", "message": prompt["message"]})

        while True:
            self._cli.model_inputs.append([(str(i), str(t), bool(e)) for i, t, e in results])
            response = self._cli.responses.pop(0)
            if response.error_status is not None:
                # The CLI retried and gave up: an error result, with no assistant message.
                yield self._mirror()
                yield self._result(
                    is_error=True,
                    result=f"API Error: {response.error_status} {response.error_message}",
                    api_error_status=response.error_status,
                    stop_reason=None,
                )
                return
            results = []
            deferred: list[ApiToolUse] = []
            tool_uses = self._tool_uses(response.tool_uses, results, deferred)
            if self._cli.hooks_before_stop:
                async for message in self._model_call(response, before_stop=tool_uses):
                    yield message
            else:
                async for message in self._model_call(response):
                    yield message
                async for message in tool_uses:
                    yield message
            if not response.tool_uses:
                yield self._mirror()
                yield self._result(result=response.text, stop_reason="end_turn")
                return
            if deferred:
                # The CLI keeps the last deferred call (and the other results) for the resume.
                last = deferred[-1]
                deferred_use = {"id": last.tool_use_id, "name": last.cli_name, "input": dict(last.input)}
                self._record({"type": "system", "deferred": deferred_use, "results": results})
                yield self._mirror()
                yield self._result(result="", stop_reason="tool_deferred", deferred_tool_use=deferred_use)
                return
            yield self._tool_results_message(results)

    async def _tool_uses(
        self,
        uses: Sequence[ApiToolUse],
        results: list[tuple[str, str, bool]],
        deferred: list[ApiToolUse],
    ) -> AsyncIterator[dict[str, Any]]:
        """Ask about and run every tool use of a response; collect the deferred ones in ``deferred``."""
        for use in uses:
            async for message in self._tool_use(use, results):
                if message is None:
                    deferred.append(use)
                else:
                    yield message

    async def _model_call(
        self, response: ApiReply, before_stop: AsyncIterator[dict[str, Any]] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        self._model_calls += 1
        usage = {
            "input_tokens": response.input_tokens,
            "output_tokens": response.output_tokens,
            "cache_read_input_tokens": response.cache_read_input_tokens,
            "cache_creation_input_tokens": response.cache_creation_input_tokens,
        }
        for key, value in usage.items():
            self._usage[key] = self._usage.get(key, 0) + value
        message_id = self._cli.next_id("msg")
        blocks: list[dict[str, Any]] = []
        events: list[dict[str, Any]] = [{"type": "message_start", "message": {"id": message_id}}]
        if response.text:
            blocks.append({"type": "text", "text": response.text})
            events.append({"type": "content_block_start", "index": 0, "content_block": {"type": "text"}})
            # Two deltas, so a test sees the text stream in pieces.
            middle = len(response.text) // 2
            for piece in (response.text[:middle], response.text[middle:]):
                delta = {"type": "text_delta", "text": piece}
                events.append({"type": "content_block_delta", "index": 0, "delta": delta})
        for use in response.tool_uses:
            block = {
                "type": "tool_use",
                "id": use.tool_use_id,
                "name": use.cli_name,
                "input": dict(use.input),
            }
            blocks.append(block)
            events.append({"type": "content_block_start", "index": len(blocks) - 1, "content_block": block})
        for event in events:
            yield self._stream_event(event)
        if before_stop is not None:
            async for message in before_stop:
                yield message
        # The API's closing delta says the response finished; the runner takes no response without it.
        stop_reason = "tool_use" if response.tool_uses else "end_turn"
        yield self._stream_event({"type": "message_delta", "delta": {"stop_reason": stop_reason}})
        yield self._stream_event({"type": "message_stop"})
        message = {"id": message_id, "role": "assistant", "model": "scripted", "content": blocks}
        self._record({"type": "assistant", "message": message})
        yield {
            "type": "assistant",
            "message": message,
            "parent_tool_use_id": None,
            "session_id": self._session_id,
            "uuid": self._cli.next_id("assistant"),
        }

    def _stream_event(self, event: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "stream_event",
            "uuid": self._cli.next_id("event"),
            "session_id": self._session_id,
            "event": event,
            "parent_tool_use_id": None,
        }

    async def _tool_use(
        self, use: ApiToolUse, results: list[tuple[str, str, bool]]
    ) -> AsyncIterator[dict[str, Any] | None]:
        """Ask the hook about one tool use and run it; yields `None` when the hook defers it."""
        kind: str | None = None
        reason: str | None = None
        for callback_id in self._hook_ids:
            request, answer = self._request(
                {
                    "subtype": "hook_callback",
                    "callback_id": callback_id,
                    "tool_use_id": use.tool_use_id,
                    "input": {
                        "hook_event_name": "PreToolUse",
                        "session_id": self._session_id,
                        "tool_name": use.cli_name,
                        "tool_input": dict(use.input),
                        "tool_use_id": use.tool_use_id,
                    },
                }
            )
            yield request
            output = cast(dict[str, Any], (await answer).get("hookSpecificOutput") or {})
            if "permissionDecision" in output:
                kind = str(output["permissionDecision"])
                reason = cast(str | None, output.get("permissionDecisionReason"))
                if kind != "allow":
                    break
        self._cli.hook_decisions.append((use.tool_use_id, kind or "none", reason))
        if kind is None:
            # No hook decided: the permission system does (allowed tools, then can_use_tool).
            refusal: str | None = None
            if use.cli_name not in self._options.allowed_tools:
                if self._options.can_use_tool is None:
                    refusal = (
                        f"Claude requested permissions to use {use.cli_name}, but you haven't granted it yet."
                    )
                else:
                    self._cli.permission_requests.append((use.cli_name, use.tool_use_id))
                    request, answer = self._request(
                        {
                            "subtype": "can_use_tool",
                            "tool_name": use.cli_name,
                            "input": dict(use.input),
                            "tool_use_id": use.tool_use_id,
                            "permission_suggestions": [],
                        }
                    )
                    yield request
                    verdict = await answer
                    if verdict.get("behavior") != "allow":
                        refusal = str(verdict.get("message", ""))
            if refusal is not None:
                # The permission system's refusal reaches the model verbatim.
                results.append((use.tool_use_id, refusal, True))
                return
            kind = "allow"
        if kind == "defer":
            yield None
        elif kind == "deny":
            results.append((use.tool_use_id, f"PreToolUse:{use.cli_name} hook error: {reason}", True))
        elif use.cli_name.startswith("mcp__dex__"):
            params = {
                "name": use.cli_name.removeprefix("mcp__dex__"),
                "arguments": dict(use.input),
                "_meta": {"claudecode/toolUseId": use.tool_use_id},
            }
            request, answer = self._mcp("tools/call", params)
            yield request
            result = cast(dict[str, Any], (await answer)["mcp_response"]["result"])
            text = "\n".join(str(block.get("text", "")) for block in result.get("content", []))
            results.append((use.tool_use_id, text, bool(result.get("isError"))))
        else:
            results.append((use.tool_use_id, f"{use.cli_name} ran inline", False))

    def _tool_results_message(self, results: list[tuple[str, str, bool]]) -> dict[str, Any]:
        content = [
            {"type": "tool_result", "tool_use_id": i, "content": [{"type": "text", "text": t}], "is_error": e}
            for i, t, e in results
        ]
        message = {"role": "user", "content": content}
        self._record({"type": "user", "message": message})
        return {
            "type": "user",
            "message": message,
            "parent_tool_use_id": None,
            "session_id": self._session_id,
            "uuid": self._cli.next_id("user"),
        }
