// The openai npm package (OpenAI's own Node client) against bench serve: what an OpenAI
// client sees, checked with the client's own parsing (its types, its SSE reader, its errors).
// Run by tests/test_openai.c (test_openai_client) against a `bench serve` it launches on
// stories260K:
//
//   node tests/openai/client.mjs http://127.0.0.1:PORT/v1 build/node_modules
//
// Prints one line per check ("ok - ...") and exits 0, or prints "not ok - ..." and exits 1.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const [, , baseURL, mods] = process.argv;
if (!baseURL || !mods) {
  console.error('usage: node client.mjs BASE_URL NODE_MODULES_DIR');
  process.exit(2);
}
// the package is installed under build/ (make openai-client), not beside this script
const require = createRequire(path.join(path.resolve(mods), '_'));
const mod = require('openai');
const OpenAI = mod.OpenAI ?? mod.default ?? mod;
const { version } = JSON.parse(readFileSync(path.join(path.resolve(mods), 'openai', 'package.json'), 'utf8'));
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const model = 'stories';
const story = [{ role: 'user', content: 'Tell me a story' }];
let failed = 0;

function check(what, cond, detail) {
  if (cond) console.log(`ok - ${what}`);
  else {
    failed++;
    console.log(`not ok - ${what}${detail !== undefined ? `: ${JSON.stringify(detail)}` : ''}`);
  }
}

// every chunk of a stream: the text per choice index and the finish reasons
async function collect(stream, field) {
  const text = {}, finish = {};
  let chunks = 0, objects = new Set();
  for await (const chunk of stream) {
    chunks++;
    objects.add(chunk.object);
    for (const c of chunk.choices) {
      const piece = field === 'delta' ? c.delta?.content : c.text;
      text[c.index] = (text[c.index] ?? '') + (piece ?? '');
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  }
  return { text, finish, chunks, objects: [...objects] };
}

async function expect400(what, promise, needle) {
  try {
    await promise;
    check(what, false, 'no error');
  } catch (e) {
    check(what, e instanceof OpenAI.BadRequestError && e.status === 400 && String(e.message).includes(needle),
          { status: e.status, message: e.message });
  }
}

async function main() {
  console.log(`# openai ${version}, node ${process.version}, ${baseURL}`);
  const models = await client.models.list();
  check('models.list names the served model', models.data.length === 1 && models.data[0].id === model, models.data);

  // chat, not streamed and streamed: the same greedy answer
  const chat = await client.chat.completions.create({ model, messages: story, max_tokens: 24, temperature: 0 });
  const answer = chat.choices[0].message.content;
  check('chat.completions.create: a chat.completion with an assistant message',
        chat.object === 'chat.completion' && chat.choices[0].message.role === 'assistant' && answer.length > 0, chat);
  check('chat: finish_reason and usage', ['stop', 'length'].includes(chat.choices[0].finish_reason) &&
        chat.usage.completion_tokens >= 1 && chat.usage.completion_tokens <= 24, chat.usage);
  check('chat: system_fingerprint names the template', /chat-template=plain/.test(chat.system_fingerprint), chat.system_fingerprint);
  const cs = await collect(await client.chat.completions.create({ model, messages: story, max_tokens: 24, temperature: 0, stream: true }), 'delta');
  check('chat streamed: chat.completion.chunk deltas join to the same answer',
        cs.objects.length === 1 && cs.objects[0] === 'chat.completion.chunk' && cs.text[0] === answer, { got: cs.text[0], want: answer });
  check('chat streamed: a finish_reason', ['stop', 'length'].includes(cs.finish[0]), cs.finish);

  // completions, not streamed and streamed
  const prompt = 'Once upon a time';
  const cmpl = await client.completions.create({ model, prompt, max_tokens: 32, temperature: 0, ignore_eos: true });
  const full = cmpl.choices[0].text;
  check('completions.create: a text_completion', cmpl.object === 'text_completion' && full.length > 20 &&
        cmpl.choices[0].finish_reason === 'length' && cmpl.usage.completion_tokens === 32, cmpl);
  const ps = await collect(await client.completions.create({ model, prompt, max_tokens: 32, temperature: 0, ignore_eos: true, stream: true }), 'text');
  check('completions streamed: the same text', ps.text[0] === full && ps.finish[0] === 'length', { got: ps.text[0], want: full });

  // stop: a piece of the middle of the text; the answer ends right before it
  const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 5);
  const cut = full.slice(0, full.indexOf(stop));
  const st = await client.completions.create({ model, prompt, max_tokens: 32, temperature: 0, ignore_eos: true, stop: [stop] });
  check(`stop ${JSON.stringify(stop)}: the text ends before it`, st.choices[0].text === cut && st.choices[0].finish_reason === 'stop',
        { got: st.choices[0].text, want: cut, finish: st.choices[0].finish_reason });
  const sts = await collect(await client.completions.create({ model, prompt, max_tokens: 32, temperature: 0, ignore_eos: true, stop, stream: true }), 'text');
  check('stop, streamed: the same text, the stop string never sent', sts.text[0] === cut && sts.finish[0] === 'stop', sts);
  const chatStop = await client.chat.completions.create({ model, messages: story, max_tokens: 24, temperature: 0, stop: 'a' });
  check('chat stop "a": no "a" in the answer', !chatStop.choices[0].message.content.includes('a') &&
        chatStop.choices[0].finish_reason === 'stop', chatStop.choices[0]);

  // n
  const two = await client.chat.completions.create({ model, messages: story, max_tokens: 12, temperature: 0, n: 2 });
  check('n=2: two choices, greedy: equal', two.choices.length === 2 && two.choices[1].index === 1 &&
        two.choices[0].message.content === two.choices[1].message.content, two.choices);
  const sampled = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 1, seed: 7, n: 3, ignore_eos: true });
  check('n=3 sampled with a seed: the choices differ', new Set(sampled.choices.map((c) => c.text)).size > 1, sampled.choices);
  const ns = await collect(await client.chat.completions.create({ model, messages: story, max_tokens: 8, temperature: 0, n: 2, stream: true }), 'delta');
  check('n=2 streamed: both choices to their end', Object.keys(ns.text).length === 2 && ns.finish[0] && ns.finish[1] && ns.text[0] === ns.text[1], ns);

  // what bench serve does not do is refused, naming the field
  await expect400('an unknown field is a 400 naming it', client.chat.completions.create({ model, messages: story, foo: 1 }), 'foo');
  await expect400('n=100 is a 400', client.chat.completions.create({ model, messages: story, n: 100 }), 'n: expected');
  await expect400('logprobs: true is a 400', client.chat.completions.create({ model, messages: story, logprobs: true }), 'logprobs');
}

main().then(() => {
  console.log(failed ? `# ${failed} check(s) failed` : '# all checks passed');
  process.exit(failed ? 1 : 0);
}, (e) => {
  console.log(`not ok - ${e?.stack ?? e}`);
  process.exit(1);
});
