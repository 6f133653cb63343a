# Sourced by the ci.sh of every package whose tests run the official MCP reference servers
# (@modelcontextprotocol/server-everything and server-memory, pinned in core/tests/mcp_servers'
# package-lock.json). Installs them with `npm ci` only when the lockfile changed since the last install.
install_official_mcp_servers() {
    local project
    project="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../core/tests/mcp_servers" && pwd)"
    if ! command -v npm >/dev/null 2>&1; then
        echo "error: npm is needed to install the official MCP servers in $project" >&2
        return 1
    fi
    if ! cmp -s "$project/package-lock.json" "$project/node_modules/.installed-package-lock.json"; then
        (cd "$project" && npm ci --no-audit --no-fund --loglevel=error)
        cp "$project/package-lock.json" "$project/node_modules/.installed-package-lock.json"
    fi
}
