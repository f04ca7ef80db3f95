import { once } from 'node:events';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonBody } from '../../src/http/json-body.js';

// The reader on a bare express app: what it hands the route, and the errors body-parser would give.
let server: http.Server;
let port: number;

beforeAll(async () => {
  const app = express();
  // `/strict` as the ops surface has it; the lenient reader after it finds the body read.
  app.use('/strict', jsonBody(64, { jsonOnly: true }));
  // `/own` with its own answers, as a publishable key's reader has them.
  const refusal = (status: number, type: string, message: string) =>
    Object.assign(new Error(message), { status, type });
  app.use(
    '/own',
    jsonBody(64, {
      tooLarge: () => refusal(413, 'own.too.large', 'over 64 bytes'),
      refuseEncoded: (encoding) => refusal(415, 'own.encoded', `no ${encoding}`),
    }),
  );
  app.use(jsonBody(64));
  app.post(['/', '/strict', '/own'], (req, res) => {
    res.json({ body: req.body === undefined ? '(undefined)' : req.body });
  });
  app.use(((err, _req, res, _next) => {
    res.status(err.status ?? 500).json({ type: err.type ?? err.code, message: err.message });
  }) as express.ErrorRequestHandler);
  server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** One request over a raw connection, so headers and chunks are exactly as written. */
function send(
  headers: Record<string, string>,
  chunks: (string | Buffer)[],
  path = '/',
): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ port, host: '127.0.0.1', method: 'POST', path, headers }, (res) => {
      let text = '';
      res.on('data', (c) => {
        text += c;
      });
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    for (const chunk of chunks) req.write(chunk);
    req.end();
  });
}

describe('jsonBody', () => {
  it('parses JSON whatever the Content-Type says, in one chunk or several', async () => {
    const form = await send({ 'Content-Type': 'application/x-www-form-urlencoded', 'Content-Length': '7' }, [
      '{"a":1}',
    ]);
    expect(form).toEqual({ status: 200, body: { body: { a: 1 } } });
    // A character split across chunks is decoded whole.
    const korean = Buffer.from('{"a":"한국"}');
    const chunked = await send({ 'Transfer-Encoding': 'chunked' }, [
      korean.subarray(0, 8),
      korean.subarray(8),
    ]);
    expect(chunked).toEqual({ status: 200, body: { body: { a: '한국' } } });
    // Bytes that are not UTF-8 read as U+FFFD, as Buffer#toString has them, a cut character at the end too.
    const invalid = await send({ 'Transfer-Encoding': 'chunked' }, [
      Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xff])]),
      Buffer.concat([Buffer.from([0xff]), Buffer.from('", "b":"'), korean.subarray(6, 8)]),
      Buffer.from('"}'),
    ]);
    expect(invalid).toEqual({ status: 200, body: { body: { a: '\uFFFD\uFFFD', b: '\uFFFD' } } });
  });

  it('an empty body is {}, no body at all stays undefined', async () => {
    expect(await send({ 'Content-Length': '0' }, [])).toEqual({ status: 200, body: { body: {} } });
    // No Content-Length and no Transfer-Encoding (node's client would add one): written by hand.
    const socket = net.connect(port, '127.0.0.1');
    socket.end('POST / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    let answer = '';
    for await (const chunk of socket) answer += chunk;
    expect(answer.slice(answer.indexOf('\r\n\r\n') + 4)).toBe('{"body":"(undefined)"}');
  });

  it('malformed JSON is 400 entity.parse.failed with the parser’s message', async () => {
    const res = await send({ 'Content-Length': '5' }, ['{"a":']);
    expect(res.status).toBe(400);
    expect(res.body.type).toBe('entity.parse.failed');
    expect(res.body.message).toMatch(/JSON/);
  });

  it('over the limit is 413, by Content-Length or as it streams', async () => {
    const big = `{"a":"${'x'.repeat(80)}"}`;
    const declared = await send({ 'Content-Length': String(big.length) }, [big]);
    expect(declared).toEqual({
      status: 413,
      body: { type: 'entity.too.large', message: 'request entity too large' },
    });
    const streamed = await send({ 'Transfer-Encoding': 'chunked' }, [big.slice(0, 40), big.slice(40)]);
    expect(streamed.status).toBe(413);
    expect(streamed.body.type).toBe('entity.too.large');
  });

  it('leaves compressed bodies and other charsets to body-parser: gzip read, latin1 refused 415', async () => {
    const zipped = gzipSync('{"z":true}');
    const gz = await send({ 'Content-Encoding': 'gzip', 'Content-Length': String(zipped.length) }, [zipped]);
    expect(gz).toEqual({ status: 200, body: { body: { z: true } } });
    const latin = await send({ 'Content-Type': 'application/json; charset=latin1', 'Content-Length': '2' }, [
      '{}',
    ]);
    expect(latin.status).toBe(415);
    expect(latin.body.type).toBe('charset.unsupported');
    const utf8 = await send({ 'Content-Type': 'application/json; charset="UTF-8"', 'Content-Length': '7' }, [
      '{"u":8}',
    ]);
    expect(utf8).toEqual({ status: 200, body: { body: { u: 8 } } });
  });

  it('tooLarge and refuseEncoded: its own 413 however the body is over, its own refusal of any Content-Encoding', async () => {
    const big = `{"a":"${'x'.repeat(80)}"}`;
    const own413 = { status: 413, body: { type: 'own.too.large', message: 'over 64 bytes' } };
    expect(await send({ 'Content-Length': String(big.length) }, [big], '/own')).toEqual(own413);
    expect(await send({ 'Transfer-Encoding': 'chunked' }, [big.slice(0, 40), big.slice(40)], '/own')).toEqual(
      own413,
    );
    // Another charset goes to body-parser, whose 413 becomes the reader's own.
    const utf16 = {
      'Content-Type': 'application/json; charset=utf-16le',
      'Content-Length': String(big.length),
    };
    expect(await send(utf16, [big], '/own')).toEqual(own413);
    const zipped = gzipSync('{"z":true}');
    expect(
      await send({ 'Content-Encoding': 'gzip', 'Content-Length': String(zipped.length) }, [zipped], '/own'),
    ).toEqual({ status: 415, body: { type: 'own.encoded', message: 'no gzip' } });
    expect(
      await send({ 'Content-Encoding': 'identity', 'Content-Length': '7' }, ['{"i":1}'], '/own'),
    ).toEqual({ status: 200, body: { body: { i: 1 } } });
  });

  it('jsonOnly: a body not typed application/json is 415 json_content_type_required, unread; JSON and empty bodies pass', async () => {
    const body = '{"a":1}';
    const length = { 'Content-Length': String(body.length) };
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/merge-patch+json']) {
      const refused = await send({ ...length, 'Content-Type': type }, [body], '/strict');
      expect(refused.status, type).toBe(415);
      expect(refused.body.type).toBe('json_content_type_required');
      expect(refused.body.message).toContain(`Content-Type ${type}`);
    }
    expect(await send(length, [body], '/strict')).toMatchObject({ status: 415 });
    // Refused by its headers, before a byte is parsed: a chunked body too.
    const chunked = await send(
      { 'Transfer-Encoding': 'chunked', 'Content-Type': 'text/plain' },
      [body],
      '/strict',
    );
    expect(chunked.body.type).toBe('json_content_type_required');
    for (const type of ['application/json', 'Application/JSON; charset=utf-8'])
      expect(await send({ ...length, 'Content-Type': type }, [body], '/strict')).toEqual({
        status: 200,
        body: { body: { a: 1 } },
      });
    expect(await send({ 'Content-Length': '0' }, [], '/strict')).toEqual({ status: 200, body: { body: {} } });
    // Without the option, as before: text/plain (sendBeacon) is read as JSON.
    expect(await send({ ...length, 'Content-Type': 'text/plain' }, [body])).toEqual({
      status: 200,
      body: { body: { a: 1 } },
    });
  });
});
