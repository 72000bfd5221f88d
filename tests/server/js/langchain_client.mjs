// Drives `specd serve` with LangChain JS (@langchain/openai): ChatOpenAI invoked and streamed,
// the OpenAI completions LLM with a batch of prompts (one request with a list of prompts),
// asserting on content, finish reasons and token usage.
// Environment: SPECD_URL (base URL ending in /v1), SPECD_MODEL, SPECD_TOOLS_DIR (node_modules).
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.env.SPECD_TOOLS_DIR, 'package.json'));
const { ChatOpenAI, OpenAI } = require('@langchain/openai');
const model = process.env.SPECD_MODEL;
const common = { model, temperature: 0, maxTokens: 8, apiKey: 'unused', maxRetries: 0,
                 configuration: { baseURL: process.env.SPECD_URL } };

// Chat, invoked.
const chat = new ChatOpenAI(common);
const messages = [['system', 'You are terse.'], ['human', 'Say hi']];
const m = await chat.invoke(messages);
assert.equal(typeof m.content, 'string');
assert.ok(m.content.length > 0);
assert.equal(m.response_metadata.finish_reason, 'length');
assert.equal(m.usage_metadata.output_tokens, 8);
assert.equal(m.usage_metadata.total_tokens, m.usage_metadata.input_tokens + 8);

// Chat, streamed: the same content; usage arrives with the stream.
let content = '';
let usage = null;
for await (const chunk of await chat.stream(messages)) {
  content += chunk.content;
  if (chunk.usage_metadata) usage = chunk.usage_metadata;
}
assert.equal(content, m.content);
assert.ok(usage === null || usage.output_tokens === 8, JSON.stringify(usage));

// Completions with a batch of prompts: LangChain sends them in one request as a list.
const llm = new OpenAI(common);
const prompts = ['The capital of France is', 'Once upon a time', 'def fibonacci(n):'];
const batch = await llm.generate(prompts);
assert.equal(batch.generations.length, prompts.length);
for (let i = 0; i < prompts.length; ++i) {
  const alone = await llm.invoke(prompts[i]);
  assert.equal(batch.generations[i][0].text, alone, `prompt ${i} in the batch`);
  assert.equal(batch.generations[i][0].generationInfo.finishReason, 'length');
}
assert.equal(batch.llmOutput.tokenUsage.completionTokens, 8 * prompts.length);

console.log('all langchain checks passed');
