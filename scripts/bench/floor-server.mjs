// The floor under the web process's cost per event: node's HTTP server doing only what any
// implementation of the event routes must do on node (read the body, parse its JSON, write a JSON
// answer with the service's own response headers), with no key check, validation, rate limit,
// ledger or database. Started by scripts/bench/floor.ts; plain JavaScript, so it needs no build.
//
// FLOOR_HEADERS: the headers a real answer carried, as [name, value] pairs; FLOOR_ANSWER: a real
// single event's answer. A batch is answered with one copy of it per event.
import http from 'node:http';

const headers = JSON.parse(process.env.FLOOR_HEADERS ?? '[]');
const answer = JSON.parse(process.env.FLOOR_ANSWER ?? '{}');

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    const text = JSON.stringify(Array.isArray(body.events) ? body.events.map(() => answer) : answer);
    for (const [name, value] of headers) res.setHeader(name, value);
    res.statusCode = 200;
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.setHeader('Content-Length', Buffer.byteLength(text));
    res.end(text);
  });
});
server.keepAliveTimeout = 5_000;
server.listen(Number(process.env.PORT), '127.0.0.1', () => process.stdout.write('ready\n'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
