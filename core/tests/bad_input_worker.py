"""The Worker child of the bad-input table: its session Flows and a Flow that is not a session."""

from dex_agents.testing import run_agent_worker
from tests.bad_input_agents import BAD_INPUT_SPEC, NotASessionFlow

if __name__ == "__main__":
    # run_agent_worker serves session Flows; the Registry takes any Flow, which this table needs.
    run_agent_worker((*BAD_INPUT_SPEC.build_flows().all, NotASessionFlow()))  # pyright: ignore[reportArgumentType]
