#!/usr/bin/env bash
# `npm test`: like `npm run dev`, makes sure Node >= 22.17 and node_modules are there (a fresh
# clone on Node 20 works), then runs vitest with whatever arguments were given.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/ensure-node.sh
source scripts/ensure-node.sh
exec node node_modules/vitest/vitest.mjs run "$@"
