"""Check the built wheels and sdists of a release: names, versions, metadata and what each holds.

    python3 scripts/lib/release_contents.py DIST_DIR VERSION PACKAGE...

PACKAGE is a distribution name such as ``dex-agents``. Each must have exactly one wheel and one sdist of
VERSION in DIST_DIR. A wheel holds only its import package and its ``.dist-info`` (no tests, examples,
benchmarks or bytecode); its metadata names no local path, requires every other package of the release
in the release's own range, and keeps ``dex-python-sdk`` exact. Prints one line per file with its size,
and exits 1 naming every problem found.
"""

from __future__ import annotations

import email.parser
import re
import sys
import tarfile
import zipfile
from pathlib import Path

_NOT_SHIPPED = {"tests", "examples", "bench", "__pycache__"}
_SDK_PIN = "dex-python-sdk==1.23.0"
# Besides src/: an sdist builds the wheel and nothing more (each pyproject.toml says only-include = ["src"]).
_SDIST_FILES = ("PKG-INFO", "pyproject.toml", "README.md", ".gitignore")


def _import_name(distribution: str) -> str:
    return distribution.replace("-", "_")


def _release_range(version: str) -> str:
    major, minor = (int(part) for part in version.split(".")[:2])
    return f"<{major}.{minor + 1},>={major}.{minor}"


def check_wheel(path: Path, distribution: str, version: str, release: set[str]) -> list[str]:
    """The problems of one wheel; empty when it is as a release needs it."""
    problems: list[str] = []
    package = _import_name(distribution)
    with zipfile.ZipFile(path) as wheel:
        names = wheel.namelist()
        metadata_name = f"{package}-{version}.dist-info/METADATA"
        if metadata_name not in names:
            return [f"{path.name}: no {metadata_name}"]
        metadata = email.parser.Parser().parsestr(wheel.read(metadata_name).decode())
    for name in names:
        top = name.split("/", 1)[0]
        if top not in (package, f"{package}-{version}.dist-info"):
            problems.append(f"{path.name}: {name} is outside {package}/ and its dist-info")
        if _NOT_SHIPPED & set(name.split("/")[:-1]) or name.endswith(".pyc"):
            problems.append(f"{path.name}: ships {name}")
    if f"{package}/__init__.py" not in names:
        problems.append(f"{path.name}: no {package}/__init__.py")
    if metadata["Name"] != distribution or metadata["Version"] != version:
        problems.append(f"{path.name}: metadata says {metadata['Name']} {metadata['Version']}")
    if metadata["Requires-Python"] != ">=3.11":
        problems.append(f"{path.name}: Requires-Python is {metadata['Requires-Python']!r}")
    if metadata["Description-Content-Type"] != "text/markdown" or len(metadata.get_payload() or "") < 500:
        problems.append(f"{path.name}: no Markdown description (the package's README)")
    for requirement in metadata.get_all("Requires-Dist") or []:
        if " @ " in requirement or "file:" in requirement:
            problems.append(f"{path.name}: requires a direct reference: {requirement}")
        name = re.split(r"[\s\[<>=!;~]", requirement, maxsplit=1)[0]
        if name in release and _release_range(version) not in requirement:
            problems.append(f"{path.name}: requires {requirement!r}, not the release's {_release_range(version)}")
        if name == "dex-python-sdk" and _SDK_PIN not in requirement.replace(" ", ""):
            problems.append(f"{path.name}: requires {requirement!r}; the SDK must stay {_SDK_PIN}")
    return problems


def check_sdist(path: Path, distribution: str, version: str) -> list[str]:
    """The problems of one sdist: it must hold its metadata, pyproject.toml, README.md and src/ only."""
    root = f"{_import_name(distribution)}-{version}"
    with tarfile.open(path) as sdist:
        names = sdist.getnames()
    problems = [f"{path.name}: no {root}/{name}" for name in ("PKG-INFO", "pyproject.toml") if f"{root}/{name}" not in names]
    shipped = {root, f"{root}/src", *(f"{root}/{name}" for name in _SDIST_FILES)}
    problems += [
        f"{path.name}: ships {name}"
        for name in names
        if name not in shipped and not name.startswith(f"{root}/src/")
    ]
    problems += [f"{path.name}: ships {name}" for name in names if name.endswith(".pyc") or "/__pycache__" in name]
    return problems


def main() -> int:
    dist, version, distributions = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    release = set(distributions)
    problems: list[str] = []
    for distribution in distributions:
        stem = f"{_import_name(distribution)}-{version}"
        wheels = sorted(dist.glob(f"{stem}-*.whl"))
        sdists = sorted(dist.glob(f"{stem}.tar.gz"))
        if len(wheels) != 1 or len(sdists) != 1:
            problems.append(f"{distribution}: expected one wheel and one sdist of {version} in {dist}")
            continue
        problems += check_wheel(wheels[0], distribution, version, release)
        problems += check_sdist(sdists[0], distribution, version)
        for path in (wheels[0], sdists[0]):
            with zipfile.ZipFile(path) if path.suffix == ".whl" else tarfile.open(path) as archive:
                count = len(archive.namelist() if isinstance(archive, zipfile.ZipFile) else archive.getnames())
            print(f"  {path.name:<52} {path.stat().st_size / 1024:>8.1f} KiB  {count:>4} files")
    unexpected = sorted(
        path.name
        for path in dist.iterdir()
        if path.suffix in (".whl", ".gz") and not any(path.name.startswith(_import_name(d) + "-") for d in release)
    )
    problems += [f"{name}: not a package of this release" for name in unexpected]
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
