import { describe, expect, it } from 'vitest';
import { loadConfig } from './config.js';
import { tracingSettingsOf } from './tracing-env.js';

const settings = (env: Record<string, string>) => tracingSettingsOf('agents', loadConfig({}, env));

describe('the OTEL_* variables', () => {
  it('leave tracing off without an endpoint, an empty one included', () => {
    expect(settings({}).enabled).toBe(false);
    expect(settings({ OTEL_EXPORTER_OTLP_ENDPOINT: '' }).enabled).toBe(false);
    expect(
      settings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }).enabled,
    ).toBe(false);
    expect(
      settings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }).enabled,
    ).toBe(false);
  });

  it('resolve as the specification says: base endpoint + /v1/traces, the traces-specific ones winning', () => {
    expect(settings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' })).toMatchObject({
      enabled: true,
      url: 'http://c:4318/v1/traces',
      protocol: 'http/protobuf',
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
      serviceName: 'agents',
      captureContent: false,
    });
    const s = settings({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://t.example/otlp/traces',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=abc%3D,x-other=1',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
      OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-attrs,deployment.environment.name=prod',
      OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
    });
    expect(s).toMatchObject({
      url: 'https://t.example/otlp/traces',
      protocol: 'http/json',
      headers: { 'x-api-key': 'abc=', 'x-other': '1' },
      samplerRatio: 0.25,
      serviceName: 'from-attrs',
      resourceAttributes: { 'deployment.environment.name': 'prod' },
      captureContent: true,
    });
    expect(
      settings({ OTEL_SERVICE_NAME: 'mine', OTEL_RESOURCE_ATTRIBUTES: 'service.name=other' }).serviceName,
    ).toBe('mine');
  });

  it.each([
    ['OTEL_EXPORTER_OTLP_PROTOCOL', 'grpc', 'must be http/protobuf or http/json'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'collector:4318', 'must be an http(s) URL'],
    ['OTEL_TRACES_SAMPLER', 'sometimes', 'must be one of'],
    ['OTEL_TRACES_SAMPLER_ARG', '1.5', 'must be a number from 0 to 1'],
    ['OTEL_RESOURCE_ATTRIBUTES', 'novalue', 'must be a list of key=value pairs'],
    ['OTEL_PROPAGATORS', 'b3', 'must list tracecontext, baggage or none'],
    ['OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT', 'yes', 'must be true or false'],
  ])('refuse %s=%s, naming it', (name, value, problem) => {
    expect(() => loadConfig({}, { [name]: value })).toThrow(`${name} ${problem}`);
  });
});
