"""A Worker child that runs the previous release of dex-agents (0.1.0, commit 8f7738b) from a checkout.

``DEX_AGENTS_PREVIOUS_RELEASE_SRC`` names that checkout's ``core/src``; it goes first on ``sys.path``, so
every ``dex_agents`` import below is the previous release's code. The Worker serves the ``CoreUpgrade``
Flow type with that release's ``ScriptedRunner``, so a test can create a session the way 0.1.0 stored it.
"""

import os
import sys

PREVIOUS_RELEASE_SRC_ENV = "DEX_AGENTS_PREVIOUS_RELEASE_SRC"

if __name__ == "__main__":
    source = os.environ[PREVIOUS_RELEASE_SRC_ENV]
    sys.path.insert(0, source)
    import dex_agents
    from dex_agents import AgentSessionFlow
    from dex_agents.testing import ScriptedRunner, matrix_session_options, run_agent_worker

    if not str(dex_agents.__file__).startswith(source):
        raise RuntimeError(f"dex_agents was imported from {dex_agents.__file__}, not from {source}")
    print(f"previous release of dex_agents from {dex_agents.__file__}", flush=True)
    run_agent_worker(
        [AgentSessionFlow(ScriptedRunner(), flow_type="CoreUpgrade", options=matrix_session_options())]
    )
