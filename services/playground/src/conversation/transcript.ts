/** One line of a conversation as the models beside the flow read it (branch decisions, extraction, judges). */
export interface Turn {
  role: 'user' | 'assistant';
  content: string;
}

/**
 * The one rendering of a transcript for a model: `User: …` / `Agent: …`, one line each; numbered from 1
 * (`Turn 3, Agent: …`) where an answer cites a turn, as the test session lists its messages.
 */
export function transcriptText(transcript: Turn[], opts: { numbered?: boolean } = {}): string {
  return transcript
    .map((t, i) => {
      const who = t.role === 'user' ? 'User' : 'Agent';
      return opts.numbered ? `Turn ${i + 1}, ${who}: ${t.content}` : `${who}: ${t.content}`;
    })
    .join('\n');
}
