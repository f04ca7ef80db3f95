// npm's `preinstall`: a plain `npm ci` or `npm install` on an older Node stops here with what to
// do, instead of npm's bare EBADENGINE. Plain JavaScript, so Node 20 can run it.
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 17)) {
  const needs = `This project needs Node >= 22.17 (it runs on 24); this is Node ${process.versions.node}. `;
  // A deploy build: scripts/run.sh installs nothing with NODE_ENV=production, so it must run npm ci.
  const instead =
    process.env.NODE_ENV === 'production'
      ? "For a production build run 'bash scripts/run.sh npm ci --include=dev' instead (it fetches " +
        "Node 24 first; the build needs the devDependencies), then 'npm run build' and " +
        "'npm prune --omit=dev' (README, Deploying).\n"
      : 'You need not install it: the npm scripts (npm run dev, npm test, npm run migrate, ...) fetch ' +
        'Node 24 and install the dependencies themselves (scripts/run.sh), so run one of them instead ' +
        'of npm ci. Or install Node 24 (nvm install 24; .nvmrc names it) and run npm ci again.\n';
  process.stderr.write(needs + instead);
  process.exit(1);
}
