// A tool-call round trip with the official openai npm client against `specd serve` running a
// model with Qwen 3's own chat template (Hermes <tool_call> format): tools and tool_choice reach
// the template, the assistant's tool_calls and the tool's result are accepted as the next turn's
// history and rendered into the prompt, chat_template_kwargs reach the template, and tool_choice
// "required" or a named function forces a valid call (structured output). Prints the transcript.
// Environment as openai_client.mjs.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.env.SPECD_TOOLS_DIR, 'package.json'));
const OpenAI = require('openai');
const client = new (OpenAI.default ?? OpenAI)({ baseURL: process.env.SPECD_URL, apiKey: 'unused', maxRetries: 0 });
const model = process.env.SPECD_MODEL;

const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}];
const user = { role: 'user', content: 'What is the weather in Paris?' };

const noTools = await client.chat.completions.create({ model, messages: [user], max_tokens: 4, temperature: 0 });
const first = await client.chat.completions.create({ model, messages: [user], tools, tool_choice: 'auto', max_tokens: 4, temperature: 0 });
console.log('request 1:', JSON.stringify({ messages: [user], tools, tool_choice: 'auto' }));
console.log('response 1:', JSON.stringify(first.choices[0]), JSON.stringify(first.usage));
// The template wrote the tools into the prompt.
assert.ok(first.usage.prompt_tokens > noTools.usage.prompt_tokens + 40);
assert.ok(['stop', 'length', 'tool_calls'].includes(first.choices[0].finish_reason));

// The assistant's call (as a client replays it, content null) and the tool's answer.
const call = first.choices[0].message.tool_calls?.[0] ??
  { id: 'call_0', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } };
const history = [
  user,
  { role: 'assistant', content: null, tool_calls: [call] },
  { role: 'tool', tool_call_id: call.id, content: '{"temperature_c": 18, "sky": "clear"}' },
];
const second = await client.chat.completions.create({ model, messages: history, tools, max_tokens: 4, temperature: 0 });
console.log('request 2:', JSON.stringify({ messages: history }));
console.log('response 2:', JSON.stringify(second.choices[0]), JSON.stringify(second.usage));
assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens + 20);  // the call and the result were rendered
assert.equal(second.choices[0].message.role, 'assistant');

// Streaming with tools works too.
let streamed = '';
const s = await client.chat.completions.create({ model, messages: history, tools, max_tokens: 4, temperature: 0, stream: true });
for await (const chunk of s) streamed += chunk.choices[0]?.delta?.content ?? '';
assert.equal(streamed, second.choices[0].message.content ?? '');

// chat_template_kwargs reach the template (Qwen 3's enable_thinking: false adds an empty think block).
const think = await client.chat.completions.create({ model, messages: [user], max_tokens: 1, chat_template_kwargs: { enable_thinking: false } });
assert.equal(think.usage.prompt_tokens, noTools.usage.prompt_tokens + 4);

// tool_choice "required" and a named function constrain the output to one call (structured
// output): it comes back as tool_calls whose arguments satisfy the function's schema.
const flag = { type: 'function', function: { name: 'set_flag', parameters: {
  type: 'object', properties: { on: { type: 'boolean' } }, required: ['on'], additionalProperties: false } } };
for (const tool_choice of ['required', { type: 'function', function: { name: 'set_flag' } }]) {
  const forced = await client.chat.completions.create({
    model, messages: [user], tools: tool_choice === 'required' ? [flag] : [...tools, flag], tool_choice, max_tokens: 200, temperature: 0 });
  console.log('forced call:', JSON.stringify(forced.choices[0]));
  const calls = forced.choices[0].message.tool_calls;
  assert.equal(calls.length, 1);
  assert.equal(calls[0].function.name, 'set_flag');
  assert.equal(typeof JSON.parse(calls[0].function.arguments).on, 'boolean');
  assert.equal(forced.choices[0].finish_reason, 'tool_calls');
}
await assert.rejects(client.chat.completions.create({
  model, messages: [user], tools, tool_choice: { type: 'function', function: { name: 'no_such_tool' } },
}), (e) => e.status === 400 && /no_such_tool/.test(e.message));
console.log('all openai tool checks passed');
