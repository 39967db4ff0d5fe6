// @ts-check
// The agent console (docs/api.md, "The console"): this module wires the page and nothing imports it. Below it,
// one way: panels/ (each a part of the page, knowing only the store and the UI helpers) → store/ (the session
// store and its views) → ui/ (DOM helpers) → lib/ (the API, no DOM). eslint.config.js holds the direction.
// Plain browser JavaScript, no build: everything it shows comes from this origin's /api.

import { setTokenPrompt } from './lib/api.js';
import { mount as mountAgentPicker } from './store/agent-picker.js';
import { mount as mountChart } from './store/chart.js';
import { mount as mountConversation } from './store/conversation.js';
import { mount as mountFeed } from './store/feed.js';
import { mount as mountFlow } from './store/flow-view.js';
import { mount as mountSessionBar } from './store/session-bar.js';
import { mount as mountSessions } from './store/sessions-list.js';
import { store } from './store/store.js';
import { mount as mountTimeline } from './store/timeline.js';
import { mountPanels } from './ui/panel.js';
import { mountKeysBox } from './ui/run-form.js';
import { askToken } from './ui/token-dialog.js';

// The panels, in the order their sections appear: a new one is its file under panels/ and a line here.
import './panels/build.js';
import './panels/tests.js';
import './panels/text.js';
import './panels/talk.js';
import './panels/deploy.js';
import './panels/credentials.js';
import './panels/analysis.js';
import './panels/calls.js';

setTokenPrompt(askToken);
// the views first: a panel's first events find them listening (the timeline before the conversation, which
// stamps its messages)
for (const mount of [
  mountTimeline,
  mountConversation,
  mountSessionBar,
  mountFlow,
  mountChart,
  mountAgentPicker,
  mountSessions,
  mountFeed,
])
  mount();
mountKeysBox();
mountPanels();
void store.loadAgents();
