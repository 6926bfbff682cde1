// useChat's own transport and reader against POST /api/ui-stream (run by tests/integration/test_ui_stream.py).
// Usage: node ui_chat_client.cjs <node_modules dir> <api url> <bearer token> <chat id> <user text> [<json>]
// The optional JSON is {tools, messages, headers}: the client's tools (sent with the transport's `body` option),
// the messages to send instead of one user message (an assistant message carrying a tool output), and more
// request headers.
// Prints {chunks, message, error}: every chunk as the SDK parsed (and schema-checked) it, and the
// assistant UIMessage that readUIMessageStream built from them.
const path = require("path");

async function main() {
  const [modules, api, token, chatId, text, extra] = process.argv.slice(2);
  const options = extra ? JSON.parse(extra) : {};
  const ai = require(path.join(modules, "ai"));
  const { DefaultChatTransport, readUIMessageStream } = ai;
  const body = options.tools ? { tools: options.tools } : undefined;
  const headers = { Authorization: `Bearer ${token}`, ...(options.headers || {}) };
  const transport = new DefaultChatTransport({ api, headers, body });
  const messages = options.messages || [{ id: `u-${Date.now()}`, role: "user", parts: [{ type: "text", text }] }];
  const out = { chunks: [], message: null, error: null };
  // What useChat's sendAutomaticallyWhen helper says of the messages sent (outputs of every client call)
  out.complete = ai.lastAssistantMessageIsCompleteWithToolCalls({ messages });
  // ... and of approvals (ai 6: every approval of the last step answered, as addToolApprovalResponse writes)
  out.approved = ai.lastAssistantMessageIsCompleteWithApprovalResponses
    ? ai.lastAssistantMessageIsCompleteWithApprovalResponses({ messages })
    : null;
  // useChat continues the last assistant message when the request answers it: the stream builds on it
  const last = messages[messages.length - 1];
  const continued = last.role === "assistant" ? { message: JSON.parse(JSON.stringify(last)) } : {};
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
    for await (const message of readUIMessageStream({ stream: recorded, terminateOnError: true, ...continued })) {
      out.message = message;
    }
  } catch (error) {
    out.error = String(error && error.message ? error.message : error);
  }
  process.stdout.write(JSON.stringify(out));
}

main();
