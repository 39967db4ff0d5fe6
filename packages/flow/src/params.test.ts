import { describe, expect, it } from 'vitest';
import { modelKindOf } from './node-types.js';
import { readParams, URL_PARAMS, urlsOf } from './params.js';

const read = <K extends Parameters<typeof readParams>[1]>(kind: K, node: Record<string, unknown>) =>
  readParams({ id: 'n1', ...node }, kind);

describe('node params', () => {
  it('reads what a form sends: numbers and switches as text, empty fields as not set', () => {
    expect(read('burst', { command: 'Go', rounds: '3' })).toEqual({
      params: { command: 'Go', rounds: 3 },
      issues: [],
    });
    expect(read('start', { command: 'Hello', isLiteral: 'true' }).params.isLiteral).toBe(true);
    expect(read('llm', { provider: 'openai', temperature: '0.5', model: '', baseURL: null })).toEqual({
      params: { provider: 'openai', temperature: 0.5 },
      issues: [],
    });
  });

  it('fills in defaults', () => {
    expect(read('burst', { rounds: '' }).params).toEqual({ command: '', rounds: 1 });
    expect(read('agent', {}).params).toEqual({
      name: 'Agent',
      instructions: '',
      language: 'en',
      drainGoodbye: '',
      allowInterruptions: true,
      turnDetection: 'model',
      minEndpointingDelay: 500,
      maxEndpointingDelay: 3000,
      minInterruptionDuration: 500,
      minInterruptionWords: 0,
      falseInterruptionTimeout: 2000,
      resumeFalseInterruption: true,
      preemptiveGeneration: true,
    });
    expect(read('mcp', { serverUrl: 'https://tools.test/mcp' }).params).toEqual({
      serverUrl: 'https://tools.test/mcp',
      authType: 'none',
      selectedTools: [],
    });
  });

  it('says which param is missing and which is out of range, on the node, and still reads the rest', () => {
    const r = read('burst', { command: 7, rounds: 11 });
    expect(r.issues).toEqual([
      { code: 'PARAM_OUT_OF_RANGE', message: '`command` must be text', nodeId: 'n1' },
      { code: 'PARAM_OUT_OF_RANGE', message: '`rounds` must be a whole number from 1 to 10', nodeId: 'n1' },
    ]);
    expect(r.params).toEqual({ command: '', rounds: 1 });
    expect(read('ifelse', { conditionText: '' }).issues).toEqual([
      { code: 'PARAM_MISSING', message: 'ifelse needs `conditionText`', nodeId: 'n1' },
    ]);
    expect(read('categorize', { categories: [] }).issues[0]?.code).toBe('PARAM_MISSING');
    expect(read('timer', { duration: '10' }).issues[0]?.message).toBe(
      '`duration` must be a number from 30 to 1800 seconds',
    );
  });

  it('keeps a list that is only too long, so the exits drawn for it are still checked', () => {
    const categories = Array.from({ length: 21 }, (_, i) => `c${i}`);
    const r = read('categorize', { categories });
    expect(r.issues.map((i) => i.code)).toEqual(['PARAM_OUT_OF_RANGE']);
    expect(r.params.categories).toEqual(categories);
  });

  it('leaves out the structured-output fields that are wrong, naming each', () => {
    const r = read('structured_output', {
      schemaFields: [
        null,
        { name: 'kind', type: 'enum' },
        { name: 'age', type: 'int' },
        { name: 'age', type: 'int' },
      ],
    });
    expect(r.params.schemaFields).toEqual([{ name: 'age', type: 'int' }]);
    expect(r.issues.map((i) => i.message)).toEqual([
      'field 1 must be an object with a name and a type',
      'enum field `kind` needs its options',
      'field 4 needs a unique name of letters, digits and _',
    ]);
  });

  it('never changes the node it reads', () => {
    const node = { id: 'n1', nodeType: 'burst', command: 'Go', rounds: '3', extra: { x: 1 } };
    const copy = structuredClone(node);
    readParams(node, 'burst');
    readParams({ ...node, rounds: 'many' }, 'burst');
    expect(node).toEqual(copy);
  });
});

describe('what other packages read of a flow', () => {
  it('knows which params are URLs the server calls', () => {
    expect(URL_PARAMS).toEqual({
      llm: ['baseURL'],
      tts: ['baseURL'],
      stt: ['baseURL'],
      mcp: ['serverUrl'],
      webhook: ['url'],
    });
    expect(urlsOf({ id: 'h', nodeType: 'webhook', url: 'https://hooks.test/x' })).toEqual([
      { param: 'url', url: 'https://hooks.test/x' },
    ]);
    // unset or not a URL: nothing to check (the compiler reports the latter)
    expect(urlsOf({ id: 'l', nodeType: 'llm', provider: 'openai', baseURL: '' })).toEqual([]);
    expect(urlsOf({ id: 'h', nodeType: 'webhook', url: 'not a url' })).toEqual([]);
    expect(urlsOf({ id: 's', nodeType: 'start', url: 'https://ignored.test' })).toEqual([]);
  });

  it('knows which node types are models', () => {
    expect(['llm', 'tts', 'stt', 'mcp', 'agent', 'toString', ''].map(modelKindOf)).toEqual([
      'llm',
      'tts',
      'stt',
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });
});
