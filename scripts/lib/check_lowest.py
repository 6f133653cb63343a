"""Check that a package's lowest-versions.txt pins each ranged dependency at the lower bound of its range.

    python3 scripts/lib/check_lowest.py pyproject.toml lowest-versions.txt

Every requirement of ``project.dependencies`` and ``project.optional-dependencies`` with a ``>=`` bound must
be pinned ``==`` that bound. A requirement without a lower bound, an exact pin and a path source need no
check. Exits 1, naming each mismatch and the command that rewrites the file, when one does not match.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lower_bounds(pyproject: Path) -> dict[str, str]:
    """The ``>=`` bound of each runtime requirement, by normalized name."""
    project = tomllib.loads(pyproject.read_text())["project"]
    requirements = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    bounds: dict[str, str] = {}
    for requirement in requirements:
        match = _REQUIREMENT.match(requirement)
        if match is None:
            continue
        for specifier in match.group(3).split(","):
            specifier = specifier.strip()
            if specifier.startswith(">="):
                bounds[_normalized(match.group(1))] = specifier[2:].strip()
    return bounds


def pins(lowest: Path) -> dict[str, str]:
    """The ``==`` pin of each package in a compiled requirements file, by normalized name."""
    found: dict[str, str] = {}
    for line in lowest.read_text().splitlines():
        match = _PIN.match(line.strip())
        if match is not None:
            found[_normalized(match.group(1))] = match.group(2)
    return found


def _same_version(left: str, right: str) -> bool:
    def release(version: str) -> list[str]:
        parts = version.split(".")
        while len(parts) > 1 and parts[-1] == "0":
            parts.pop()
        return parts

    return release(left) == release(right)


def main() -> int:
    pyproject, lowest = Path(sys.argv[1]), Path(sys.argv[2])
    if not lowest.exists():
        print(f"error: {lowest} does not exist; write it with scripts/lowest-versions", file=sys.stderr)
        return 1
    pinned = pins(lowest)
    problems = []
    for name, bound in sorted(lower_bounds(pyproject).items()):
        version = pinned.get(name)
        # A path source (the core, the devserver) is installed from the checkout, never pinned.
        if version is not None and not _same_version(version, bound):
            problems.append(f"{name}: {lowest} pins {version}, but the lower bound in {pyproject} is {bound}")
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        print(f"rewrite it with: scripts/lowest-versions {pyproject.resolve().parent.name}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
