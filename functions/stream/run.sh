#!/bin/bash
# Lambda Web Adapter entry point (handler "run.sh", AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap,
# AWS_LWA_INVOKE_MODE=response_stream): uvicorn serves the app; the adapter streams its responses.
export PYTHONPATH="/opt/python:${LAMBDA_TASK_ROOT:-.}:${PYTHONPATH:-}"
exec python3 -m uvicorn functions.stream.app:app --host 127.0.0.1 --port "${PORT:-8080}" --no-access-log --log-level warning
