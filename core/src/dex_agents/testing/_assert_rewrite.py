"""Registers the matrix and runner contract modules with pytest's assertion rewriting, when pytest runs.

Their assertions live in an installed module, which pytest does not rewrite by default; this gives
an adapter author pytest's detailed failure messages. The package imports this first, so the registration
happens before either module is imported. Worker children, which run without pytest, skip it.
"""

import sys

__all__: list[str] = []

_pytest = sys.modules.get("pytest")
if _pytest is not None:
    _pytest.register_assert_rewrite("dex_agents.testing.matrix", "dex_agents.testing.runner_contract")
