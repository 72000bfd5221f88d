// Drives `specd serve` with the official openai npm client: completions and chat, streaming
// and not, asserting on content, usage and finish reasons. Environment: SPECD_URL (base URL
// ending in /v1), SPECD_MODEL, SPECD_TOOLS_DIR (where node_modules/openai lives).
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.env.SPECD_TOOLS_DIR, 'package.json'));
const OpenAI = require('openai');
const client = new (OpenAI.default ?? OpenAI)({ baseURL: process.env.SPECD_URL, apiKey: 'unused', maxRetries: 0 });
const model = process.env.SPECD_MODEL;

// Completions, non-streaming.
const c = await client.completions.create({ model, prompt: 'The capital of France is', max_tokens: 10, temperature: 0 });
assert.equal(c.object, 'text_completion');
assert.equal(c.choices.length, 1);
assert.equal(c.choices[0].finish_reason, 'length');
assert.ok(c.choices[0].text.length > 0);
assert.equal(c.usage.completion_tokens, 10);
assert.equal(c.usage.total_tokens, c.usage.prompt_tokens + 10);

// Completions, streaming: same text, usage in the last chunk.
let text = '';
let finish = null;
let usage = null;
const cs = await client.completions.create({
  model, prompt: 'The capital of France is', max_tokens: 10, temperature: 0, stream: true,
  stream_options: { include_usage: true },
});
for await (const chunk of cs) {
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) {
    text += choice.text;
    if (choice.finish_reason) finish = choice.finish_reason;
  }
}
assert.equal(text, c.choices[0].text);
assert.equal(finish, 'length');
assert.deepEqual(usage, c.usage);

// Chat, non-streaming.
const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hi' }];
const ch = await client.chat.completions.create({ model, messages, max_completion_tokens: 8, temperature: 0, seed: 1 });
assert.equal(ch.object, 'chat.completion');
assert.equal(ch.choices[0].message.role, 'assistant');
assert.equal(ch.choices[0].finish_reason, 'length');
assert.equal(ch.usage.completion_tokens, 8);

// Chat, streaming: role first, then the same content.
let role = null;
let content = '';
finish = null;
const chs = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0, stream: true });
for await (const chunk of chs) {
  const d = chunk.choices[0]?.delta ?? {};
  if (d.role) role = d.role;
  if (d.content) content += d.content;
  if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
}
assert.equal(role, 'assistant');
assert.equal(content, ch.choices[0].message.content);
assert.equal(finish, 'length');

// Stop strings end with finish_reason "stop" and are not part of the text.
const stopAt = c.choices[0].text.slice(3, 5);
const st = await client.completions.create({ model, prompt: 'The capital of France is', max_tokens: 10, temperature: 0, stop: [stopAt] });
assert.equal(st.choices[0].finish_reason, 'stop');
assert.equal(st.choices[0].text, c.choices[0].text.slice(0, c.choices[0].text.indexOf(stopAt)));

// Errors surface as the client's typed errors with the server's status.
await assert.rejects(client.completions.create({ model, prompt: 'x', n: 3 }), (e) => e.status === 400 && /n must be 1/.test(e.message));
await assert.rejects(client.completions.create({ model: 'no-such-model', prompt: 'x' }), (e) => e.status === 404);

const models = await client.models.list();
assert.equal(models.data[0].id, model);
console.log('all openai client checks passed');
