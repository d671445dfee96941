import { describe, expect, it } from 'vitest';
import { otlpProtocol, startTracing, tracer, tracingRequested } from './tracing.js';

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
});
