import { describe, expect, it } from 'vitest';
import { leaseMs, outcomeOf, retryDelayMs } from './sender.js';

const schedule = [1000, 60_000];
const middle = () => 0.5; // no jitter: 0.8 + 0.4 × 0.5 = 1

describe('outcomeOf', () => {
  it('is delivered for any 2xx', () => {
    for (const status of [200, 202, 204, 299])
      expect(outcomeOf({ responseStatus: status, error: null }, 1, schedule, middle)).toEqual({
        status: 'delivered',
        responseStatus: status,
      });
  });

  it('is failed, due after the next step of the schedule, for any other answer or none', () => {
    expect(outcomeOf({ responseStatus: 500, error: null }, 1, schedule, middle)).toEqual({
      status: 'failed',
      responseStatus: 500,
      error: 'the receiver answered 500',
      retryInMs: 1000,
      disable: false,
    });
    expect(outcomeOf({ responseStatus: 302, error: null }, 2, schedule, middle)).toMatchObject({
      status: 'failed',
      retryInMs: 60_000,
    });
    expect(outcomeOf({ responseStatus: null, error: 'connect ECONNREFUSED' }, 1, schedule, middle)).toMatchObject({
      status: 'failed',
      responseStatus: null,
      error: 'connect ECONNREFUSED',
    });
  });

  it('is dead once the schedule is spent', () => {
    expect(outcomeOf({ responseStatus: 503, error: null }, 3, schedule, middle)).toEqual({
      status: 'dead',
      responseStatus: 503,
      error: 'the receiver answered 503',
      disable: false,
    });
  });

  it('disables the subscription on 410 Gone, whether retried or dead', () => {
    expect(outcomeOf({ responseStatus: 410, error: null }, 1, schedule, middle)).toMatchObject({
      status: 'failed',
      disable: true,
    });
    expect(outcomeOf({ responseStatus: 410, error: null }, 3, schedule, middle)).toMatchObject({
      status: 'dead',
      disable: true,
    });
  });
});

describe('retryDelayMs and leaseMs', () => {
  it('jitters each step by ±20%', () => {
    expect(retryDelayMs(schedule, 1, () => 0)).toBe(800);
    expect(retryDelayMs(schedule, 1, () => 1)).toBe(1200);
    expect(retryDelayMs(schedule, 3, () => 0.5)).toBeUndefined();
  });

  it('holds a claim for the attempt’s time-out and 5 s more, at most 30 s', () => {
    expect(leaseMs(10_000)).toBe(15_000);
    expect(leaseMs(25_000)).toBe(30_000);
  });
});
