import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { TestProject } from 'vitest/node';
import { type ErrorCode, errorCodes } from '../../src/shared/errors.js';

/**
 * The run's checks of what the service answered (recorded by test/setup/answers.ts):
 * - every answer of an operation is declared by the OpenAPI document: its status, and its error
 *   code among that status's `x-error-codes`; on any run, a subset of files included;
 * - every code of the error table was answered through HTTP, but those the table marks
 *   `notAnswered` (which must not be); only when the whole suite ran (`npm test`).
 */

/** [method, path, status, error code or null] */
export type Answer = [string, string, number, string | null];
export interface FileAnswers {
  file: string;
  answers: Answer[];
}

interface Operation {
  operationId: string;
  responses: Record<string, { 'x-error-codes'?: string[] }>;
}
export interface Document {
  paths: Record<string, Record<string, Operation>>;
}

interface Template {
  method: string;
  path: string;
  pattern: RegExp;
  params: number;
  operation: Operation;
}

/**
 * Paths as express matches them (app.ts): case-insensitive, an optional trailing slash, a
 * parameter one whole segment. Of several matches the one with fewer parameters wins (a
 * literal segment before a parameter), as OpenAPI has it.
 */
function templatesOf(doc: Document): Template[] {
  const templates: Template[] = [];
  for (const [path, operations] of Object.entries(doc.paths)) {
    const source = path
      .split(/(\{\w+\})/)
      .map((part) => (/^\{\w+\}$/.test(part) ? '[^/]+' : part.replace(/[.*+?^$()|[\]\\]/g, '\\$&')))
      .join('');
    const pattern = new RegExp(`^${source}/?$`, 'i');
    const params = (path.match(/\{\w+\}/g) ?? []).length;
    for (const [method, operation] of Object.entries(operations))
      templates.push({ method: method.toUpperCase(), path, pattern, params, operation });
  }
  return templates.sort((a, b) => a.params - b.params);
}

/** No route took the request: its path is unknown, or known but not with this method (or on this host). */
const NO_ROUTE = new Set(['http_404', 'http_405']);

/** `operationId (METHOD path): status code`, and the test files where it was answered. */
export function undeclaredAnswers(doc: Document, recorded: FileAnswers[]): Map<string, Set<string>> {
  const templates = templatesOf(doc);
  const found = new Map<string, Set<string>>();
  for (const { file, answers } of recorded) {
    for (const [requestMethod, path, status, code] of answers) {
      // A CORS preflight is answered before any route.
      if (requestMethod === 'OPTIONS' || (code && NO_ROUTE.has(code))) continue;
      // express answers HEAD with the GET route.
      const method = requestMethod === 'HEAD' ? 'GET' : requestMethod;
      const template = templates.find((t) => t.method === method && t.pattern.test(path));
      if (!template) continue;
      const response = template.operation.responses[`${status}`];
      const declared = response && (!code || (response['x-error-codes'] ?? []).includes(code));
      if (declared) continue;
      const what = `${template.operation.operationId} (${method} ${template.path}): ${status}${code ? ` ${code}` : ''}`;
      found.set(what, (found.get(what) ?? new Set()).add(file));
    }
  }
  return found;
}

/** Codes of the error table no answer carried, but those it marks `notAnswered`; and those it marks but that were answered. */
export function unprovokedCodes(recorded: FileAnswers[]): {
  unprovoked: ErrorCode[];
  answeredAnyway: ErrorCode[];
} {
  const answered = new Set(recorded.flatMap(({ answers }) => answers.map(([, , , code]) => code)));
  const codes = Object.keys(errorCodes) as ErrorCode[];
  const marked = (code: ErrorCode) => 'notAnswered' in errorCodes[code];
  return {
    unprovoked: codes.filter((code) => !marked(code) && !answered.has(code)),
    answeredAnyway: codes.filter((code) => marked(code) && answered.has(code)),
  };
}

function readRecord(dir: string): { doc?: Document; recorded: FileAnswers[] } {
  const docFile = join(dir, 'openapi.json');
  const doc = existsSync(docFile) ? (JSON.parse(readFileSync(docFile, 'utf8')) as Document) : undefined;
  const recorded = readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl'))
    .flatMap((name) => readFileSync(join(dir, name), 'utf8').split('\n'))
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as FileAnswers);
  return { doc, recorded };
}

/** Whether every test file of the project ran, with every test (no name filter). */
async function wholeSuiteRan(project: TestProject): Promise<boolean> {
  if (project.vitest.config.testNamePattern) return false;
  const ran = new Set(project.vitest.state.getFiles().map((f) => resolve(f.filepath)));
  const { testFiles } = await project.globTestFiles();
  return testFiles.length > 0 && testFiles.every((file) => ran.has(resolve(file)));
}

function listed(title: string, lines: string[]): string {
  return `${title}\n${lines.map((line) => `  ${line}`).join('\n')}`;
}

/**
 * For a global setup: a directory for the run's answers, provided to the workers as
 * `answersDir`, and the check its teardown runs: what failed (undefined when nothing did; it
 * never throws), the directory removed. `everyCode`: also check that every code of the error
 * table was answered, when the whole suite ran.
 */
export function answerRecord(project: TestProject, options: { everyCode: boolean }) {
  const dir = mkdtempSync(join(tmpdir(), 'lf-answers-'));
  project.provide('answersDir', dir);
  return {
    async check(): Promise<string | undefined> {
      try {
        const { doc, recorded } = readRecord(dir);
        const failures: string[] = [];
        if (doc) {
          const undeclared = undeclaredAnswers(doc, recorded);
          if (undeclared.size > 0)
            failures.push(
              listed(
                "The service answered what its OpenAPI document does not declare: declare it (a route's `errors` or `responses`, or src/openapi/error-responses.ts for an answer given outside the handlers), or fix the answer.",
                [...undeclared].map(([what, files]) => `${what}, in ${[...files].join(', ')}`),
              ),
            );
        } else if (recorded.length > 0) {
          process.stderr.write(
            'answers not checked against the OpenAPI document: no test built an app (test/setup/test-app.ts) to read it from\n',
          );
        }
        if (options.everyCode && (await wholeSuiteRan(project))) {
          const { unprovoked, answeredAnyway } = unprovokedCodes(recorded);
          if (unprovoked.length > 0)
            failures.push(
              listed(
                'No test made the service answer these codes of the error table (src/shared/errors.ts): provoke each through HTTP in a test of the running service, or mark it `notAnswered` with the reason.',
                unprovoked,
              ),
            );
          if (answeredAnyway.length > 0)
            failures.push(
              listed('The service answered codes the error table marks `notAnswered`:', answeredAnyway),
            );
        }
        return failures.length > 0 ? failures.join('\n\n') : undefined;
      } catch (err) {
        // Said as the run's failure, so the rest of the teardown (dropping databases) still runs.
        return `The answers of the run could not be checked: ${(err as Error).stack}`;
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
