import type { Flow } from '@vab/contracts';

/**
 * A complete flow with every kind of step and post-processing, as a builder sends it: the flow reference and
 * the API document show it, and a test compiles it. A front desk that greets, asks twice, checks whether it
 * has a date (and asks again when not), sorts the call, books, answers or transfers, then extracts the
 * booking and posts it.
 */
export const EXAMPLE_FLOW = {
  nodes: [
    {
      id: 'agent-1',
      nodeType: 'agent',
      name: 'Front desk',
      instructions: 'You answer the phone for a dental practice. Be brief and kind.',
      language: 'en',
      allowInterruptions: true,
    },
    { id: 'llm-1', nodeType: 'llm', provider: 'openai', model: 'gpt-4o-mini', temperature: 0.4 },
    { id: 'tts-1', nodeType: 'tts', provider: 'elevenlabs', voiceId: 'Rachel' },
    { id: 'stt-1', nodeType: 'stt', provider: 'deepgram', model: 'nova-3', keyterms: ['Dr. Ortiz'] },
    {
      id: 'mcp-1',
      nodeType: 'mcp',
      serverUrl: 'https://tools.example.com/mcp',
      authType: 'bearer',
      authValue: 'token-of-the-tool-server',
      selectedTools: ['find_free_slots'],
    },
    { id: 'start-1', nodeType: 'start', command: 'Hello, Smile Dental, how can I help?', isLiteral: true },
    { id: 'burst-1', nodeType: 'burst', command: 'Find out what the caller needs and when.', rounds: 2 },
    { id: 'ifelse-1', nodeType: 'ifelse', conditionText: 'The caller has said a day for the visit.' },
    {
      id: 'categorize-1',
      nodeType: 'categorize',
      command: 'What does the caller want?',
      categories: ['booking', 'question', 'other'],
    },
    { id: 'opentalk-1', nodeType: 'opentalk', command: 'Answer the question; offer a booking.' },
    { id: 'timer-1', nodeType: 'timer', command: 'Book the visit with find_free_slots.', duration: 120 },
    { id: 'transfer-1', nodeType: 'transfer', targetAgentId: 'agent-reception' },
    { id: 'end-1', nodeType: 'end', command: 'Thank you for calling, goodbye!', isLiteral: true },
    {
      id: 'structured-1',
      nodeType: 'structured_output',
      command: 'The booking the caller made.',
      schemaFields: [
        { name: 'day', type: 'string', description: 'The day of the visit' },
        { name: 'reason', type: 'enum', options: ['checkup', 'pain', 'cleaning'] },
        { name: 'newPatient', type: 'boolean' },
      ],
    },
    {
      id: 'webhook-1',
      nodeType: 'webhook',
      url: 'https://hooks.example.com/bookings',
      headers: { 'X-Source': 'front-desk' },
    },
  ],
  edges: [
    { source: 'llm-1', sourceHandle: 'output', target: 'agent-1', targetHandle: 'llm_in' },
    { source: 'tts-1', sourceHandle: 'output', target: 'agent-1', targetHandle: 'tts_in' },
    { source: 'stt-1', sourceHandle: 'output', target: 'agent-1', targetHandle: 'stt_in' },
    { source: 'mcp-1', sourceHandle: 'output', target: 'agent-1', targetHandle: 'tools_in' },
    { source: 'agent-1', sourceHandle: 'output', target: 'start-1', targetHandle: 'in' },
    { source: 'start-1', sourceHandle: 'output', target: 'burst-1', targetHandle: 'in' },
    { source: 'burst-1', sourceHandle: 'output', target: 'ifelse-1', targetHandle: 'in' },
    { source: 'ifelse-1', sourceHandle: 'true', target: 'categorize-1', targetHandle: 'in' },
    // no day yet: ask again (a loop; it has a way out)
    { source: 'ifelse-1', sourceHandle: 'false', target: 'burst-1', targetHandle: 'in' },
    { source: 'categorize-1', sourceHandle: 'cat_0', target: 'timer-1', targetHandle: 'in' },
    { source: 'categorize-1', sourceHandle: 'cat_1', target: 'opentalk-1', targetHandle: 'in' },
    { source: 'categorize-1', sourceHandle: 'cat_2', target: 'transfer-1', targetHandle: 'in' },
    { source: 'opentalk-1', sourceHandle: 'output', target: 'end-1', targetHandle: 'in' },
    { source: 'timer-1', sourceHandle: 'output', target: 'end-1', targetHandle: 'in' },
    { source: 'end-1', sourceHandle: 'output', target: 'structured-1', targetHandle: 'in' },
    { source: 'structured-1', sourceHandle: 'output', target: 'webhook-1', targetHandle: 'in' },
  ],
} satisfies Flow;
