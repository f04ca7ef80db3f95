# shellcheck shell=bash
# Sourced (not run) by scripts/run.sh, which every npm script goes through: makes `node` on PATH
# at least 22.17 and node_modules match package-lock.json (not in production, whose build
# installed them). Quiet when there is nothing to do; progress goes to stderr.
#
# Node 24 comes from the npm registry as the `node-<os>-<arch>` package, which carries the binary
# (MikroORM 7 and vitest 5 need >= 22.17): /opt/node24 when the machine has it, otherwise a per-user cache.
# Safe under `set -euo pipefail`; it never exits the calling shell, it returns 1 on failure.

_lf_node_is_recent() {
  # True when `node` on PATH is >= 22.17.
  local version major minor
  version="$(node -p 'process.versions.node' 2>/dev/null)" || return 1
  major="${version%%.*}"
  minor="${version#*.}"
  minor="${minor%%.*}"
  [[ "$major" =~ ^[0-9]+$ && "$minor" =~ ^[0-9]+$ ]] || return 1
  ((major > 22 || (major == 22 && minor >= 17)))
}

_lf_ensure_node() {
  _lf_node_is_recent && return 0

  local os arch pkg
  case "$(uname -s)" in
    Linux) os=linux ;;
    Darwin) os=darwin ;;
    *) echo "ensure-node: unsupported OS $(uname -s); install Node >= 22.17 yourself" >&2; return 1 ;;
  esac
  case "$(uname -m)" in
    x86_64 | amd64) arch=x64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) echo "ensure-node: unsupported CPU $(uname -m); install Node >= 22.17 yourself" >&2; return 1 ;;
  esac
  pkg="node-${os}-${arch}"

  local candidate
  for candidate in "/opt/node24/node_modules/${pkg}/bin" "${XDG_CACHE_HOME:-$HOME/.cache}/lf-node24/node_modules/${pkg}/bin"; do
    if [[ -x "$candidate/node" ]]; then
      export PATH="$candidate:$PATH"
      _lf_node_is_recent && return 0
    fi
  done

  local prefix="${XDG_CACHE_HOME:-$HOME/.cache}/lf-node24"
  if ! command -v npm >/dev/null 2>&1; then
    echo "ensure-node: node $(node --version 2>/dev/null || echo 'is missing'), and no npm to fetch Node 24 with." >&2
    echo "ensure-node: install Node >= 22.17 (e.g. 'npm install --prefix /opt/node24 ${pkg}@24')." >&2
    return 1
  fi
  echo "ensure-node: node $(node --version 2>/dev/null || echo 'missing') is older than 22.17; installing ${pkg}@24 into ${prefix}" >&2
  mkdir -p "$prefix"
  # Run from the prefix so the project's .npmrc (engine-strict) does not apply to this install.
  if ! (cd "$prefix" && npm install --prefix "$prefix" --no-save --no-audit --no-fund --loglevel=error "${pkg}@24" >&2); then
    echo "ensure-node: 'npm install ${pkg}@24' failed; install Node >= 22.17 yourself" >&2
    return 1
  fi
  export PATH="$prefix/node_modules/${pkg}/bin:$PATH"
  if ! _lf_node_is_recent; then
    echo "ensure-node: installed ${pkg}@24 but 'node' still reports $(node --version 2>/dev/null); check PATH" >&2
    return 1
  fi
  echo "ensure-node: using node $(node --version) from $prefix" >&2
}

_lf_ensure_deps() {
  # `npm` is the system one, but it now runs on the Node found above (its shebang is `env node`).
  local root="$1"
  # A production image or slug installed (and pruned) its dependencies when it was built.
  [[ "${NODE_ENV:-}" == production ]] && return 0
  if [[ -d "$root/node_modules" && -f "$root/node_modules/.package-lock.json" &&
    ! "$root/package-lock.json" -nt "$root/node_modules/.package-lock.json" ]]; then
    return 0
  fi
  echo "ensure-node: installing dependencies (npm ci) with node $(node --version)" >&2
  # The lockfile lists every platform's optional binaries (test/unit/lockfile.test.ts), so npm ci
  # needs no fallback; when it fails, npm's own error above says why.
  if ! (cd "$root" && npm ci --no-audit --no-fund >&2); then
    echo "ensure-node: 'npm ci' failed (see npm's error above); fix it and rerun" >&2
    return 1
  fi
  # npm may write package-lock.json after its hidden lockfile; make the next check quiet.
  touch "$root/node_modules/.package-lock.json"
}

_lf_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if _lf_ensure_node && _lf_ensure_deps "$_lf_root"; then
  unset -f _lf_node_is_recent _lf_ensure_node _lf_ensure_deps
  unset _lf_root
else
  unset -f _lf_node_is_recent _lf_ensure_node _lf_ensure_deps
  unset _lf_root
  # `return` works when sourced; the `exit` only runs if someone executes this file directly.
  # shellcheck disable=SC2317
  return 1 2>/dev/null || exit 1
fi
