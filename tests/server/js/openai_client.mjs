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

// n: 3 choices from one prompt, each with its own index; greedy choices are identical.
const n3 = await client.completions.create({ model, prompt: 'The capital of France is', max_tokens: 6, temperature: 0, n: 3 });
assert.deepEqual(n3.choices.map((x) => x.index), [0, 1, 2]);
for (const x of n3.choices) assert.equal(x.text, n3.choices[0].text);
assert.equal(n3.usage.completion_tokens, 18);
const n3s = await client.completions.create({ model, prompt: 'The capital of France is', max_tokens: 6, temperature: 1, seed: 5, n: 3 });
assert.equal(n3s.choices.length, 3);
const n3again = await client.completions.create({ model, prompt: 'The capital of France is', max_tokens: 6, temperature: 1, seed: 5, n: 3 });
assert.deepEqual(n3again.choices.map((x) => x.text), n3s.choices.map((x) => x.text));  // seeded: reproducible
// Streaming chat with n: 3: every choice streams its own deltas and finish reason.
const nstream = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0, n: 3, stream: true });
const perChoice = ['', '', ''];
const finishes = [null, null, null];
for await (const chunk of nstream) {
  for (const x of chunk.choices) {
    perChoice[x.index] += x.delta?.content ?? '';
    if (x.finish_reason) finishes[x.index] = x.finish_reason;
  }
}
assert.deepEqual(finishes, ['length', 'length', 'length']);
assert.equal(perChoice[1], perChoice[0]);

// Completions logprobs: one entry per token, top alternatives, greedy token = the most likely.
const lp = await client.completions.create({ model, prompt: 'The capital of France is', max_tokens: 5, temperature: 0, logprobs: 2 });
const L = lp.choices[0].logprobs;
assert.equal(L.tokens.length, 5);
assert.equal(L.token_logprobs.length, 5);
assert.equal(L.text_offset.length, 5);
assert.equal(L.tokens.join(''), lp.choices[0].text);
for (let i = 0; i < 5; ++i) {
  assert.ok(L.token_logprobs[i] <= 0);
  const top = Object.values(L.top_logprobs[i]);
  assert.ok(top.length >= 1 && top.length <= 2);
  assert.ok(Math.abs(Math.max(...top) - L.token_logprobs[i]) < 1e-5);
}
// echo + max_tokens 0 scores the prompt (evaluation harnesses): the first token has none.
const score = await client.completions.create({ model, prompt: 'The capital of France is', max_tokens: 0, echo: true, logprobs: 1 });
assert.equal(score.choices[0].text, 'The capital of France is');
assert.equal(score.choices[0].logprobs.token_logprobs[0], null);
assert.ok(score.choices[0].logprobs.token_logprobs.slice(1).every((x) => x <= 0));
assert.equal(score.usage.completion_tokens, 0);

// Chat logprobs with top_logprobs.
const clp = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 3 });
const lpContent = clp.choices[0].logprobs.content;
assert.equal(lpContent.length, 4);
for (const t of lpContent) {
  assert.equal(t.top_logprobs.length, 3);
  assert.ok(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-5);
  assert.ok(Array.isArray(t.bytes));
}

// logit_bias: +100 on one token makes greedy emit only it (with two tokens at +100 the model's
// own logits break the tie, which may alternate between contexts); with both at +100, frequency
// and presence penalties (2 per use + 2) bring the second one in; repetition_penalty 2 halves the
// logit of a used token, so a token biased +60 takes turns with one biased +100.
const [A, B] = [450, 451];
const distinct = (r) => new Set(r.choices[0].logprobs.tokens).size;
const biased = await client.completions.create({ model, prompt: 'Hello', max_tokens: 4, temperature: 0, logprobs: 0, logit_bias: { [A]: 100 } });
assert.equal(distinct(biased), 1);
const penalized = await client.completions.create({
  model, prompt: 'Hello', max_tokens: 4, temperature: 0, logprobs: 0, logit_bias: { [A]: 100, [B]: 100 }, frequency_penalty: 2, presence_penalty: 2,
});
assert.equal(distinct(penalized), 2);
const rep1 = await client.completions.create({ model, prompt: 'Hello', max_tokens: 4, temperature: 0, logprobs: 0, logit_bias: { [A]: 100, [B]: 60 } });
const rep2 = await client.completions.create({
  model, prompt: 'Hello', max_tokens: 4, temperature: 0, logprobs: 0, logit_bias: { [A]: 100, [B]: 60 }, repetition_penalty: 2,
});
assert.equal(distinct(rep1), 1);
assert.equal(distinct(rep2), 2);
// min_tokens with ignore_eos off still generates that many tokens.
const minT = await client.completions.create({ model, prompt: 'Hello', max_tokens: 5, min_tokens: 5, temperature: 0, logit_bias: { 2: 100 } });
assert.equal(minT.usage.completion_tokens, 5);
const eos = await client.completions.create({ model, prompt: 'Hello', max_tokens: 5, temperature: 0, logit_bias: { 2: 100 } });
assert.equal(eos.usage.completion_tokens, 1);
assert.equal(eos.choices[0].finish_reason, 'stop');

// Streaming usage: continuous_usage_stats puts usage in every chunk; the last equals the total.
let chunks = 0;
let withUsage = 0;
let lastUsage = null;
const us = await client.completions.create({
  model, prompt: 'The capital of France is', max_tokens: 6, temperature: 0, stream: true,
  stream_options: { include_usage: true, continuous_usage_stats: true },
});
for await (const chunk of us) {
  ++chunks;
  if (chunk.usage) { ++withUsage; lastUsage = chunk.usage; }
}
assert.equal(withUsage, chunks);
assert.equal(lastUsage.completion_tokens, 6);

// vLLM's conventions: unknown fields are ignored; unsupported ones are a 400 naming them.
const extra = await client.completions.create({ model, prompt: 'x', max_tokens: 1, chat_template_kwargs: {}, some_future_field: 1 });
assert.equal(extra.choices.length, 1);
// Structured output: a JSON Schema response_format comes back as JSON that satisfies it; a
// schema keyword specd does not implement is a 400 naming it.
const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false };
const structured = await client.chat.completions.create({ model, messages, max_tokens: 200, temperature: 0,
  response_format: { type: 'json_schema', json_schema: { name: 'flag', schema, strict: true } } });
assert.equal(typeof JSON.parse(structured.choices[0].message.content).ok, 'boolean');
await assert.rejects(client.chat.completions.create({ model, messages,
  response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', not: { const: 'a' } } } } }),
  (e) => e.status === 400 && /not/.test(e.message));

// Errors surface as the client's typed errors with the server's status.
await assert.rejects(client.completions.create({ model, prompt: 'x', n: 65 }), (e) => e.status === 400 && /\bn\b/.test(e.message));
await assert.rejects(client.completions.create({ model: 'no-such-model', prompt: 'x' }), (e) => e.status === 404);

const models = await client.models.list();
assert.equal(models.data[0].id, model);
const one = await client.models.retrieve(model);
assert.equal(one.id, model);
assert.equal(one.object, "model");
console.log('all openai client checks passed');
