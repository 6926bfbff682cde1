// useChat's own transport and reader against POST /api/ui-stream (run by tests/integration/test_ui_stream.py).
// Usage: node ui_chat_client.cjs <node_modules dir> <api url> <bearer token> <chat id> <user text>
// Prints {chunks, message, error}: every chunk as the SDK parsed (and schema-checked) it, and the
// assistant UIMessage that readUIMessageStream built from them.
const path = require("path");

async function main() {
  const [modules, api, token, chatId, text] = process.argv.slice(2);
  const { DefaultChatTransport, readUIMessageStream } = require(path.join(modules, "ai"));
  const transport = new DefaultChatTransport({ api, headers: { Authorization: `Bearer ${token}` } });
  const messages = [{ id: `u-${Date.now()}`, role: "user", parts: [{ type: "text", text }] }];
  const out = { chunks: [], message: null, error: null };
  try {
    const stream = await transport.sendMessages({
      chatId,
      messages,
      trigger: "submit-message",
      messageId: undefined,
      abortSignal: undefined,
    });
    const recorded = stream.pipeThrough(
      new TransformStream({
        transform(chunk, controller) {
          out.chunks.push(chunk);
          controller.enqueue(chunk);
        },
      }),
    );
    for await (const message of readUIMessageStream({ stream: recorded, terminateOnError: true })) {
      out.message = message;
    }
  } catch (error) {
    out.error = String(error && error.message ? error.message : error);
  }
  process.stdout.write(JSON.stringify(out));
}

main();
