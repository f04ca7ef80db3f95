#!/usr/bin/env bash
# `bash scripts/run.sh <command> [args...]`: what every npm script goes through, so each works on a
# fresh clone whatever Node is first on PATH (a newcomer's may be 20): Node >= 22.17 and
# node_modules are made sure of first (scripts/ensure-node.sh; quiet when there is nothing to
# do, progress on stderr so a script's stdout stays its own), then the command replaces this shell
# (signals reach it directly).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/ensure-node.sh
source scripts/ensure-node.sh
exec "$@"
