"""Domain errors: one base class with a stable code; the API maps codes to HTTP in one place."""

from __future__ import annotations

from typing import Any


class AgentError(Exception):
    """Base of every error the product reports to a caller."""

    code = "internal_error"
    status = 500
    type = "server_error"
    data: dict[str, Any] | None = None  # extra details the mapper adds at the body's top level
    # False: the request did work a retry would repeat (its question is stored), so clients must not retry
    # it automatically (the error answer says `x-should-retry: false`, which the OpenAI SDKs honour).
    retry_safe = True

    def __init__(
        self, message: str, *, param: str | None = None, code: str | None = None, data: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code:
            self.code = code
        if data is not None:
            self.data = data


class InvalidRequest(AgentError):
    code = "invalid_request"
    status = 422
    type = "invalid_request_error"


class InvalidTimezone(InvalidRequest):
    """A time zone that is not an IANA name the server knows (e.g. Europe/Paris)."""

    code = "invalid_timezone"
    status = 400


class PayloadTooLarge(AgentError):
    code = "message_too_large"
    status = 413
    type = "invalid_request_error"


class NotFound(AgentError):
    code = "not_found"
    status = 404
    type = "invalid_request_error"


class Unauthorized(AgentError):
    code = "unauthorized"
    status = 401
    type = "authentication_error"


class Conflict(AgentError):
    code = "conflict"
    status = 409
    type = "invalid_request_error"


class RunInProgress(Conflict):
    code = "run_in_progress"


class LlmUnavailable(AgentError):
    code = "llm_unavailable"
    status = 502
    type = "server_error"
    # Whether another model of the fallback chain may answer instead (when no output was produced yet).
    fallback_ok = True


class LlmRejectedTools(LlmUnavailable):
    """The provider refused the request because of its `tools` (HTTP 400 naming them)."""

    code = "llm_rejected_tools"
    fallback_ok = False


class LlmRequestInvalid(LlmUnavailable):
    """The provider refused the request as malformed (HTTP 400, Bedrock's ValidationException): not retried."""

    code = "llm_request_invalid"
    fallback_ok = False


class LlmAccessDenied(LlmUnavailable):
    """The provider refused the credentials (Bedrock's AccessDeniedException): a configuration error."""

    code = "llm_access_denied"


class ServiceUnavailable(AgentError):
    """Storage (or another AWS service) is throttling, failing or timing out: retryable, 503 + Retry-After."""

    code = "service_unavailable"
    status = 503
    type = "server_error"
    retry_after_s = 1


class TooManyRequests(AgentError):
    """A user's budget or rate limit refuses the turn before the model is called: 429 with Retry-After and, in
    `data`, what remains of the budget."""

    status = 429
    type = "rate_limit_error"

    def __init__(self, message: str, *, retry_after_s: int, data: dict[str, Any]) -> None:
        super().__init__(message, data=data)
        self.retry_after_s = retry_after_s


class BudgetExceeded(TooManyRequests):
    code = "budget_exceeded"


class RateLimited(TooManyRequests):
    code = "rate_limited"


class DeadlineExceeded(AgentError):
    """The turn ran out of time (model hang, a long Retry-After): no answer, 504."""

    code = "deadline_exceeded"
    status = 504
    type = "server_error"


class GuardrailIntervened(AgentError):
    """An agent's guardrail blocked the message, the answer, a tool's arguments or its result (docs/guardrails.md).

    The message names the check, never the text it matched."""

    code = "guardrail_intervened"
    status = 400
    type = "invalid_request_error"
    retry_safe = False


class GuardrailUnavailable(AgentError):
    """The guardrail could not answer (Bedrock throttling or failing after retries): nothing unchecked is let
    through, so the run ends (fail closed)."""

    code = "guardrail_unavailable"
    status = 503
    type = "server_error"
    retry_after_s = 1


def error_for_code(code: str, message: str) -> AgentError:
    """The AgentError a run's `run.error` code stands for (blocking routes answer with its status)."""
    for kind in (
        LlmRejectedTools,
        LlmRequestInvalid,
        LlmAccessDenied,
        LlmUnavailable,
        ServiceUnavailable,
        DeadlineExceeded,
        GuardrailIntervened,
        GuardrailUnavailable,
    ):
        if kind.code == code:
            return kind(message)
    return AgentError(message, code=code)


class ResumeUnavailable(AgentError):
    """A dropped stream cannot be continued from the run's event log (expired, or never fully written)."""

    code = "resume_unavailable"
    status = 410
    type = "invalid_request_error"
