import { afterEach, describe, expect, it, vi } from 'vitest';
import { onStopSignal, REPEAT_WINDOW_MS } from '../../src/shared/stop-signals.js';

let remove: (() => void) | undefined;
afterEach(() => {
  remove?.();
  vi.useRealTimers();
});

/** Delivers a signal to the listeners as Node does (process.emit), without signalling the test runner. */
const deliver = (signal: string) => process.emit(signal as NodeJS.Signals, signal as NodeJS.Signals);

describe('onStopSignal', () => {
  it('stops on the first signal, takes a repeat within the window for its copy, and a later one for a second request', () => {
    vi.useFakeTimers();
    const stop = vi.fn();
    const again = vi.fn();
    remove = onStopSignal(stop, { again });
    deliver('SIGINT');
    expect(stop).toHaveBeenCalledExactlyOnceWith('SIGINT');
    // The terminal's Ctrl-C and npm's forwarded copy of it.
    deliver('SIGINT');
    vi.advanceTimersByTime(REPEAT_WINDOW_MS);
    deliver('SIGTERM');
    expect(again).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    deliver('SIGINT');
    expect(again).toHaveBeenCalledExactlyOnceWith('SIGINT');
    expect(stop).toHaveBeenCalledTimes(1);
  });

  it('without `again`, every repeat is ignored and the handlers stay (a removed one would let the default action kill the process)', () => {
    vi.useFakeTimers();
    const stop = vi.fn();
    const before = process.listenerCount('SIGTERM');
    remove = onStopSignal(stop, { signals: ['SIGTERM', 'SIGHUP'] });
    deliver('SIGHUP');
    vi.advanceTimersByTime(10 * REPEAT_WINDOW_MS);
    deliver('SIGTERM');
    expect(stop).toHaveBeenCalledExactlyOnceWith('SIGHUP');
    expect(process.listenerCount('SIGTERM')).toBe(before + 1);
  });
});
