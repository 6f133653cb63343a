# Sourced by every ci.sh and by scripts/demo: makes a pinned uv available on a machine that has only
# Python 3.11 and pip, so a fresh clone needs nothing installed by hand.
DEX_AGENTS_UV_VERSION="0.13.9"
if ! command -v uv >/dev/null 2>&1; then
  echo "uv not found: installing uv==${DEX_AGENTS_UV_VERSION} with pip" >&2
  python3 -m pip install --quiet --disable-pip-version-check "uv==${DEX_AGENTS_UV_VERSION}" >&2
  # pip may put the script in a user or interpreter bin directory that is not on PATH yet.
  PATH="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):${HOME}/.local/bin:${PATH}"
  export PATH
fi
command -v uv >/dev/null 2>&1 || { echo "error: uv is still not on PATH after installing it" >&2; exit 1; }
