#!/usr/bin/env bash
# `npm run dev`: makes sure Node >= 22.17 and node_modules are there, then runs the dev launcher.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/ensure-node.sh
source scripts/ensure-node.sh
exec node --import tsx scripts/dev.ts "$@"
