import type { ChildProcess } from 'node:child_process';
import { recordLogLine } from './answers.js';

export interface ChildOutput {
  /** stdout and stderr so far, interleaved as they arrived. */
  text(): string;
  /** The JSON log lines so far. */
  lines(): Record<string, unknown>[];
  /**
   * Resolves once `condition` holds, checked whenever output arrives (no polling). Rejects when the
   * process's output ends first (it exited) or after `timeoutMs`, with the output in the message.
   */
  until(what: string, condition: () => boolean, timeoutMs: number): Promise<void>;
}

/** Collects a child's stdout and stderr (both piped) and waits on what it writes. */
export function watchOutput(child: ChildProcess): ChildOutput {
  let output = '';
  let closed = false;
  const checks = new Set<() => void>();
  const wake = () => {
    for (const check of [...checks]) check();
  };
  const add = (chunk: Buffer | string) => {
    output += chunk;
    wake();
  };
  child.stdout?.on('data', add);
  child.stderr?.on('data', add);
  // A web process's answers, from its request log lines, for the run's check (answers.ts).
  let partial = '';
  child.stdout?.on('data', (chunk: Buffer | string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop()!;
    for (const line of lines) recordLogLine(line);
  });
  // 'close' comes after the last chunk of both streams, unlike 'exit'.
  child.once('close', () => {
    closed = true;
    wake();
  });
  const lines = () =>
    output
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  const until = (what: string, condition: () => boolean, timeoutMs: number) =>
    new Promise<void>((resolve, reject) => {
      const settle = (error?: Error) => {
        clearTimeout(timer);
        checks.delete(check);
        if (error) reject(error);
        else resolve();
      };
      const check = () => {
        try {
          if (condition()) settle();
          else if (closed) settle(new Error(`the process ended before ${what}:\n${output}`));
        } catch (error) {
          settle(error as Error);
        }
      };
      const timer = setTimeout(
        () => settle(new Error(`timed out after ${timeoutMs} ms waiting for ${what}:\n${output}`)),
        timeoutMs,
      );
      checks.add(check);
      check();
    });
  return { text: () => output, lines, until };
}
