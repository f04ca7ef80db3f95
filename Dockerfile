# syntax=docker/dockerfile:1
# Production image for the web, worker and release (migrate) processes; see docker-compose.yml.

FROM node:24-slim AS build
WORKDIR /app
# The README's deploy commands, as Heroku's buildpack runs them: production settings, the
# devDependencies installed for the build (NODE_ENV=production alone makes npm skip them, and tsc
# then fails with TS2688) and pruned after it. test/integration/first-deploy.test.ts runs these steps.
ENV NODE_ENV=production npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
COPY package.json package-lock.json .npmrc ./
COPY sdk/package.json ./sdk/
# What `npm ci` runs besides the lockfile: run.sh (Node >= 22.17) and the preinstall check.
COPY scripts/run.sh scripts/ensure-node.sh scripts/require-node.mjs ./scripts/
RUN bash scripts/run.sh npm ci --include=dev
COPY . .
RUN npm run build && npm prune --omit=dev

FROM node:24-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/package.json /app/package-lock.json /app/.npmrc ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# npm scripts go through run.sh (Node check only in production) and entry.mjs, which runs
# dist/scripts/*.js in production.
COPY --from=build /app/scripts/entry.mjs /app/scripts/run.sh /app/scripts/ensure-node.sh ./scripts/
USER node
EXPOSE 3000
# node directly (not npm), as the Procfile: SIGTERM reaches the process and its graceful shutdown runs.
CMD ["node", "--max-semi-space-size=16", "dist/src/server.js"]
