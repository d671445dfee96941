import { createServer } from 'node:net';
import { describe, expect, it, onTestFinished } from 'vitest';
import { until } from '../../test/support/until.js';
import { otlpProtocol, samplerSetting, startTracing, tracer, tracingRequested } from './tracing.js';

describe('tracing configuration (the standard OTEL_* variables)', () => {
  it('is off without an OTLP endpoint, blank values included, and on with either endpoint variable', () => {
    expect(tracingRequested({})).toBe(false);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: '  ', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '' })).toBe(false);
    expect(tracingRequested({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' })).toBe(false);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' })).toBe(true);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:4318/v1/traces' })).toBe(true);
  });

  it('starts nothing while off: no tracer, so every span site is one comparison', () => {
    expect(startTracing({ OTEL_TRACES_SAMPLER: 'always_on' })).toBeUndefined();
    expect(tracer()).toBeUndefined();
  });

  it('exports http/protobuf by default, http/json when asked, the traces variable first', () => {
    expect(otlpProtocol({})).toBe('http/protobuf');
    expect(otlpProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })).toBe('http/json');
    expect(
      otlpProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' }),
    ).toBe('http/protobuf');
  });

  it('refuses grpc (or anything else) at start-up with one line naming the variable', () => {
    expect(otlpProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toEqual({
      invalid: 'Invalid configuration: OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or http/json (got "grpc")',
    });
    expect(otlpProtocol({ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'thrift' })).toEqual({
      invalid:
        'Invalid configuration: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be http/protobuf or http/json (got "thrift")',
    });
    expect(() =>
      startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }),
    ).toThrow('OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or http/json (got "grpc")');
    expect(tracer()).toBeUndefined();
  });

  it('refuses a sampler it does not know, or a ratio that is not one, with one line naming the variable', () => {
    const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' };

    const typo = () => startTracing({ ...on, OTEL_TRACES_SAMPLER: 'parentbased_traceidration' });
    const remote = () => startTracing({ ...on, OTEL_TRACES_SAMPLER: 'jaeger_remote' });
    const ratio = () => startTracing({ ...on, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '10%' });

    expect(typo).toThrow(
      new Error(
        'Invalid configuration: OTEL_TRACES_SAMPLER must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio (got "parentbased_traceidration")',
      ),
    );
    expect(remote).toThrow('OTEL_TRACES_SAMPLER must be one of');
    expect(ratio).toThrow(
      new Error(
        'Invalid configuration: OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1 for traceidratio (got "10%")',
      ),
    );
    expect(tracer()).toBeUndefined();
  });

  it('reads the standard samplers and their ratio', () => {
    expect(samplerSetting({})).toEqual({ name: 'parentbased_always_on', ratio: 1 });
    expect(samplerSetting({ OTEL_TRACES_SAMPLER: ' always_off ' })).toEqual({ name: 'always_off', ratio: 0 });
    expect(samplerSetting({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' })).toEqual(
      { name: 'parentbased_traceidratio', ratio: 0.1 },
    );
    expect(samplerSetting({ OTEL_TRACES_SAMPLER: 'traceidratio' })).toEqual({ name: 'traceidratio', ratio: 1 });
    expect(samplerSetting({ OTEL_TRACES_SAMPLER: 'always_on', OTEL_TRACES_SAMPLER_ARG: 'ignored' })).toEqual({
      name: 'always_on',
      ratio: 1,
    });
  });

  it('tells of a final export that fails at shutdown, even right after another failure was told', async () => {
    // A port nobody listens on: every export is refused.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as { port: number };
    await new Promise((resolve) => closed.close(resolve));
    // The SDK's exporter and batch processor read their settings from process.env: exports every
    // 10 ms, each given up after 300 ms of retries.
    const settings = {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${String(port)}`,
      OTEL_EXPORTER_OTLP_TIMEOUT: '300',
      OTEL_BSP_SCHEDULE_DELAY: '10',
    };
    Object.assign(process.env, settings);
    onTestFinished(() => {
      for (const name of Object.keys(settings)) Reflect.deleteProperty(process.env, name);
    });
    const tracing = startTracing(process.env, 'test')!;
    const told: string[] = [];
    tracing.logTo((_fields, message) => told.push(message));

    tracer()!.startSpan('first').end();
    await until('the first failure told', () => told.length > 0, 10_000);
    tracer()!.startSpan('last').end();
    const shutdown = await tracing.shutdown().then(
      () => 'resolved',
      (error: unknown) => String(error),
    );

    expect(shutdown).toBe('resolved');
    expect(told).toHaveLength(2); // the second within the line's interval, yet told
    expect(told[1]).toMatch(/^tracing: the last spans could not be exported: /);
  });
});
