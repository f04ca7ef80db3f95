#!/usr/bin/env bash
# `npm run build` (through scripts/run.sh): compiles src, workers, migrations and scripts to dist/.
# The compiler and the type packages are devDependencies, which npm skips when NODE_ENV=production
# (and which an install that failed part-way may lack): that is said in one line with what to do,
# not as tsc's "TS2688: Cannot find type definition file for 'node'".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
missing=()
for dep in typescript $(node -p "Object.keys(require('./package.json').devDependencies).filter((d) => d.startsWith('@types/')).join(' ')"); do
  [[ -f "node_modules/$dep/package.json" ]] || missing+=("$dep")
done
if ((${#missing[@]} > 0)); then
  list="$(IFS=,; echo "${missing[*]}")"
  echo "npm run build: ${list//,/, } not installed: the build needs the devDependencies, which npm skips when NODE_ENV=production. Install them with 'bash scripts/run.sh npm ci --include=dev', build, then drop them with 'npm prune --omit=dev' (README, Deploying)." >&2
  exit 1
fi
rm -rf dist
exec node node_modules/typescript/bin/tsc -p tsconfig.build.json
