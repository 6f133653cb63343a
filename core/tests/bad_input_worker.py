"""The Worker child of the bad-input table: its session Flows only.

`AgentWorker` serves nothing but session Flows, so no Worker registers `NotASessionFlow`: a session RPC sent
to one of its Flows finds no Worker, which is the refusal the table's row checks.
"""

from dex_agents.testing import run_agent_worker
from tests.bad_input_agents import BAD_INPUT_SPEC, BAD_PROVIDER_SPEC

if __name__ == "__main__":
    run_agent_worker((*BAD_INPUT_SPEC.build_flows().all, BAD_PROVIDER_SPEC.build_flows().main))
