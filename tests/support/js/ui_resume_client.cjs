// useChat's own resume (DefaultChatTransport.reconnectToStream, what useChat({resume: true}) calls on mount)
// against GET /api/ui-stream/{chatId}/stream (run by tests/integration/test_resume_ui_wires.py).
// Usage: node ui_resume_client.cjs <node_modules dir> <api url> <bearer token> <chat id> [--after]
// Prints "connected" once the transport has the response (the stream, or null for a 204), then the result
// as JSON: {chunks, message} (every chunk as the SDK parsed and schema-checked it, and the assistant UIMessage
// readUIMessageStream built from them), or {stream: null} when there was nothing to resume.
const path = require("path");

async function main() {
  const [modules, api, token, chatId] = process.argv.slice(2);
  const { DefaultChatTransport, readUIMessageStream } = require(path.join(modules, "ai"));
  const transport = new DefaultChatTransport({ api, headers: { Authorization: `Bearer ${token}` } });
  const stream = await transport.reconnectToStream({ chatId });
  process.stdout.write("connected\n");
  if (stream === null) {
    process.stdout.write(JSON.stringify({ stream: null }) + "\n");
    return;
  }
  const out = { chunks: [], message: null };
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
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((error) => {
  process.stderr.write(String(error && error.stack ? error.stack : error));
  process.exit(1);
});
