"""Context compaction: the policy that triggers it and the runner capability that performs it.

With `AgentSessionOptions.compaction` set, `RunModel` asks the runner, before each model call, how large the
next model input is. Once it reaches ``trigger_ratio`` of the context window, the runner picks the last
message to summarize, and the `CompactContext` Step makes one summary call, stores the summary, and goes
back to `RunModel`. From then on the runner receives the summary in `AgentTurnContext.context_summary` and
only the messages after it in `AgentTurnContext.messages`.

The texts a runner shows its model are shared by every runner, so a transcript reads the same whichever
framework wrote it: `CONTEXT_SUMMARY_HEADER` before the summary where the model input starts
(`context_summary_text`), and `left_out_messages_note` in a summary call that could not take every message.
`build_summary_prompt` writes a summary call's one prompt from them, and `DEFAULT_SUMMARY_INSTRUCTIONS` says
what a summary must keep.

Everything about compaction lives in this package: the policy (`_policy`), the runner capability
(`_capability`), the shared texts (`_texts`), `RunModel`'s decision to compact (`_decision`) and the
`CompactContext` Step (`_step`). The last two are the session's, and only the session imports them.
"""

from __future__ import annotations

from dex_agents.compaction._capability import (
    ContextCompactionRunner,
    ContextSummaryRequest,
    ContextSummaryResult,
    is_compaction_runner,
)
from dex_agents.compaction._policy import DEFAULT_CONTEXT_WINDOW_BYTES, CompactionPolicy
from dex_agents.compaction._texts import (
    CONTEXT_SUMMARY_HEADER,
    DEFAULT_SUMMARY_INSTRUCTIONS,
    build_summary_prompt,
    context_summary_text,
    left_out_messages_note,
)

__all__ = [
    "CONTEXT_SUMMARY_HEADER",
    "DEFAULT_CONTEXT_WINDOW_BYTES",
    "DEFAULT_SUMMARY_INSTRUCTIONS",
    "CompactionPolicy",
    "ContextCompactionRunner",
    "ContextSummaryRequest",
    "ContextSummaryResult",
    "build_summary_prompt",
    "context_summary_text",
    "is_compaction_runner",
    "left_out_messages_note",
]
