// Drives `specd serve` with the Vercel AI SDK (ai + @ai-sdk/openai-compatible): chat and
// completions, generated and streamed, asserting on text, finish reasons and usage.
// Environment: SPECD_URL (base URL ending in /v1), SPECD_MODEL, SPECD_TOOLS_DIR (node_modules).
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.env.SPECD_TOOLS_DIR, 'package.json'));
const { generateText, streamText } = require('ai');
const { createOpenAICompatible } = require('@ai-sdk/openai-compatible');
const specd = createOpenAICompatible({ name: 'specd', baseURL: process.env.SPECD_URL, apiKey: 'unused' });
const model = process.env.SPECD_MODEL;
const common = { maxTokens: 8, temperature: 0, maxRetries: 0 };
const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hi' }];

// Chat, generated.
const g = await generateText({ model: specd.chatModel(model), messages, ...common });
assert.equal(g.finishReason, 'length');
assert.ok(g.text.length > 0);
assert.equal(g.usage.completionTokens, 8);
assert.ok(g.usage.promptTokens > 0);

// Chat, streamed: the same text and finish reason.
const s = streamText({ model: specd.chatModel(model), messages, ...common });
let text = '';
for await (const piece of s.textStream) text += piece;
assert.equal(text, g.text);
assert.equal(await s.finishReason, 'length');

// Completions, generated and streamed.
const c = await generateText({ model: specd.completionModel(model), prompt: 'The capital of France is', ...common });
assert.equal(c.finishReason, 'length');
assert.equal(c.usage.completionTokens, 8);
const cs = streamText({ model: specd.completionModel(model), prompt: 'The capital of France is', ...common });
text = '';
for await (const piece of cs.textStream) text += piece;
assert.equal(text, c.text);

// A multi-turn chat resent with its history: the same answer whatever the prefix cache holds.
const turn2 = [...messages, { role: 'assistant', content: g.text }, { role: 'user', content: 'Again' }];
const t1 = await generateText({ model: specd.chatModel(model), messages: turn2, ...common });
const t2 = await generateText({ model: specd.chatModel(model), messages: turn2, ...common });
assert.equal(t1.text, t2.text);

// A bad request surfaces as an API error naming the field.
await assert.rejects(generateText({ model: specd.chatModel(model), messages, ...common, temperature: -1 }),
                     (e) => /temperature/.test(String(e.message ?? e)));

console.log('all ai sdk checks passed');
