"""agent-core serve (the local server with embedded storage and every route), agent-core jobs, and
agent-core chat (a terminal client of a running server, in agent_core.chat_client)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import json
import logging
import socket
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO
from zoneinfo import ZoneInfo

from agent_core.config import Settings, get_settings, local_server_settings

if TYPE_CHECKING:  # the CLI imports the app only for the commands that run it (`chat` is a client)
    import uvicorn
    from pydantic import ValidationError

    from agent_core.context import AppContext
    from agent_core.jobs.handlers import ScheduledJob

ContextBuilder = Callable[[Settings], "AppContext"]


def _identity(settings: Settings) -> str:
    """Who the caller is, in the server's auth mode (one rule for curl and the OpenAI SDK)."""
    if settings.auth_mode == "none":
        return "the X-User-Id header, else Authorization: Bearer <user> (the OpenAI SDK's api_key), else local-user"
    return f"AGENT_AUTH_MODE={settings.auth_mode}"


def _banner(settings: Settings, host: str, port: int) -> str:
    base = f"http://{host}:{port}"
    llm, storage = settings.effective_llm_provider, settings.effective_storage
    if storage == "embedded":
        storage += f" in {Path(settings.data_dir).resolve()}"
    return (
        f"agent-core listening on {base}  (storage: {storage}, llm: {llm}, model: {settings.model})\n"
        f"User: {_identity(settings)}\n"
        f"API docs: {base}/docs and {base}/redoc; event protocol: docs/protocol.md\n"
        f"Playground: {base}/ (chat in the browser), or `agent-core chat --url {base}` in a terminal\n"
        f"Try:\n"
        f"  id=$(curl -s -X POST {base}/api/v1/conversations -H 'content-type: application/json' "
        f'-d \'{{"title":"demo"}}\' | python3 -c \'import sys,json;print(json.load(sys.stdin)["conversationId"])\')\n'
        f"  curl -s -X POST {base}/api/v1/conversations/$id/chat -H 'content-type: application/json' "
        f'-d \'{{"message":"what time is it in Tokyo?"}}\'\n'
    )


def invalid_configuration(error: ValidationError) -> str:
    """A settings ValidationError as one line: each problem by the variable it names, no input echoed (the
    settings it was given hold keys)."""
    problems = []
    for problem in error.errors(include_url=False, include_input=False):
        message = str(problem["msg"]).removeprefix("Value error, ")
        where = ".".join(str(part) for part in problem["loc"])
        problems.append(f"{where}: {message}" if where else message)
    return f"agent-core: invalid configuration: {'; '.join(problems)} (docs/settings.md)"


def listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound before anything starts: a busy port is one clear line and exit status 1.

    Created with its protocol number: asyncio sets TCP_NODELAY on accepted connections only when the listening
    socket says IPPROTO_TCP, and without it every small streamed write waits for the client's delayed ACK.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart need not wait for TIME_WAIT
    try:
        sock.bind((host, port))
    except (OSError, OverflowError) as error:
        sock.close()
        if isinstance(error, OverflowError):  # bind's own words name neither the range nor the setting
            reason, setting = "port must be 0-65535", "PORT"
        else:  # an unknown or foreign address is the host's fault; anything else (in use, denied) the port's
            reason = error.strerror or str(error)
            setting = "HOST" if isinstance(error, socket.gaierror) or error.errno == errno.EADDRNOTAVAIL else "PORT"
        raise SystemExit(f"agent-core: cannot listen on {host}:{port}: {reason} (set {setting}= for another)") from None
    sock.set_inheritable(True)
    return sock


def serve(host: str, port: int) -> None:
    from pydantic import ValidationError

    from agent_core.api import routes
    from agent_core.api.app import build_app
    from agent_core.context import build_context
    from agent_core.runtime.agents import AgentDefinitionError

    sock = listen(host, port)
    try:
        settings = local_server_settings()  # the dev stage unless AGENT_STAGE says otherwise
    except ValidationError as error:
        sock.close()
        raise SystemExit(invalid_configuration(error)) from None
    sole_owner = settings.effective_storage == "embedded"
    data_lock: TextIO | None = None
    if sole_owner:
        from agent_core.store.embedded import DataDirInUse, claim_data_dir

        try:
            data_lock = claim_data_dir(settings)  # held until the server stops (or its process dies)
        except DataDirInUse as error:
            sock.close()
            raise SystemExit(f"agent-core: {error}; set AGENT_DATA_DIR= for another") from None
    try:
        context = build_context(settings)  # embedded storage starts here, before the first request
    except AgentDefinitionError as error:
        # An invalid agent definition stops the server from starting, naming file, field and problem.
        raise SystemExit(f"agent-core: invalid agent definition: {error}") from error
    app = build_app(*routes.local, context=context, docs=True)

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        from agent_core.jobs.local_scheduler import local_schedules

        async with local_schedules(context.deps, context.schedules):
            yield

    app.router.lifespan_context = lifespan
    server = http_server(app, settings)

    async def start_then_serve() -> None:
        from agent_core.domain.ids import now_ms
        from agent_core.runtime.interrupted import settle_interrupted_runs, waiting_runs

        # Before the banner and the first request, on the server's loop; a store that cannot be read (AWS
        # storage without credentials, region or table) is one line, not uvicorn's startup traceback.
        try:
            # Runs the last process left running (it was killed) end `interrupted` and free their chats: every
            # lease in a data directory this server holds is a dead process's. One that waited on people goes
            # on from its checkpoint once answered (runtime/continuation.py).
            at = now_ms()
            waiting = waiting_runs(context.deps)
            expired_before = None if sole_owner else at
            await settle_interrupted_runs(context.deps.turns, at, expired_before=expired_before, waiting=waiting)
            # Jobs queued before the last stop (kept in the embedded database) run now.
            await context.background.resume()
        except Exception as error:
            problem = _unreachable_table_problem(settings, error, "serve")
            if problem is None:
                raise
            sock.close()
            raise SystemExit(problem) from None
        bound = sock.getsockname()[1]  # the port itself, also when 0 asked the system for a free one
        print(_banner(settings, host, bound), flush=True)
        await server.serve(sockets=[sock])

    with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
        runner.run(start_then_serve())
    if data_lock is not None:
        data_lock.close()


def http_server(app: Any, settings: Settings) -> uvicorn.Server:
    """uvicorn serving `app` on sockets from `listen`. No connection is held by a silent or slow client: idle
    keep-alive connections close after AGENT_KEEP_ALIVE_TIMEOUT_S, a request head must arrive within
    AGENT_BODY_READ_TIMEOUT_S (HeadTimeoutProtocol), and so must its body (the app's BodyLimit: 408)."""
    import uvicorn

    from agent_core.api.head_timeout import head_timeout_protocol

    config = uvicorn.Config(
        app,
        log_level="warning",
        timeout_keep_alive=settings.keep_alive_timeout_s,
        http=head_timeout_protocol(settings.body_read_timeout_s),
    )
    return uvicorn.Server(config)


# --- agent-core jobs ------------------------------------------------------------------------------

JOBS_HELP = """Run against the configured storage with the in-process queue, and wait until every job enqueued has
finished. Prints one JSON line; exits 1 if any enqueued job failed. Works on the local server's database
(AGENT_STORAGE=embedded) and on DynamoDB (aws); refuses (exit 2) AGENT_STORAGE=memory, which lives inside
one process (this command would see an empty store of its own).

ISO is a time with its UTC offset (2026-01-07T11:00:00+08:00, 2026-01-07T03:00:00Z), as X-Agent-Now takes it.

  jobs idle-sessions [--now ISO]
      the 5-minute pass at NOW (default: the current time)
  jobs daily-summary [--now ISO]
      the hourly pass at NOW: the user-days that closed in the hours just before
  jobs daily-summary --date DATE
      the hourly pass at the end of DATE in AGENT_DEFAULT_TIMEZONE + 1 h, i.e. the summaries of DATE for
      the users whose day closes with that zone's (use --user for a user in another zone)
  jobs daily-summary --date DATE --user USER [--now ISO] [--force]
      one daily-summary job for USER's DATE (--now sets the job's clock)
  jobs backfill --since DATE --user USER [--until DATE] [--force]
      one daily-summary job per date from --since through --until (default: yesterday in
      AGENT_DEFAULT_TIMEZONE), one at a time, with a progress bar on stderr; --user is required (no
      table scan finds "all users")

A daily summary waits while its user is active (a message in the last 10 minutes): the job would be
deferred by 10 minutes at a time, up to an hour. With --user, the command refuses at once instead (exit 3,
the reason on stderr, nothing enqueued); --force summarises now, with the messages so far.
"""


FORCE_HELP = "summarise now even if the user was active in the last 10 minutes (else: refused, exit 3)"
USER_ACTIVE = 3  # the exit code when --user was active recently and --force was not given


class UserActive(Exception):
    """The user is talking: a daily summary now would wait (deferred); the command refuses and says why."""


def _iso_time(value: str) -> datetime:
    """An ISO 8601 instant with its UTC offset (the rule of X-Agent-Now)."""
    from agent_core.domain.instant import NotAnInstant, parse_instant

    try:
        return parse_instant(value)
    except NotAnInstant as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _iso_date(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a YYYY-MM-DD date: {value!r}") from exc


def add_jobs_commands(jobs: argparse.ArgumentParser) -> None:
    jobs.description = JOBS_HELP
    jobs.formatter_class = argparse.RawDescriptionHelpFormatter
    which = jobs.add_subparsers(dest="job", required=True)
    idle = which.add_parser("idle-sessions", help="close idle sessions and expire run leases now")
    idle.add_argument("--now", type=_iso_time, help="the pass's time (ISO 8601 with its UTC offset)")
    daily = which.add_parser(
        "daily-summary",
        help="the hourly daily-summary pass, or one user's date",
        description=JOBS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    daily.add_argument("--date", type=_iso_date, help="YYYY-MM-DD: that date's summaries")
    daily.add_argument("--user", help="with --date: enqueue the job for this user directly")
    daily.add_argument("--now", type=_iso_time, help="the pass's (or the job's) time (ISO 8601 with its UTC offset)")
    daily.add_argument("--force", action="store_true", help=FORCE_HELP)
    backfill = which.add_parser(
        "backfill",
        help="enqueue one user's daily summaries since a date (--user is required)",
        description=JOBS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    backfill.add_argument("--since", type=_iso_date, required=True, help="YYYY-MM-DD, the first date")
    backfill.add_argument("--until", type=_iso_date, help="YYYY-MM-DD, the last date (default: yesterday)")
    backfill.add_argument("--user", required=True, help="the user whose days to summarise (required)")
    backfill.add_argument("--force", action="store_true", help=FORCE_HELP)


class ProgressBar:
    """A one-line progress bar on a stream (stderr): `[#####.....] 5/10 label`."""

    def __init__(self, stream: TextIO, width: int = 30) -> None:
        self.stream = stream
        self.width = width

    def __call__(self, done: int, total: int, label: str) -> None:
        filled = self.width * done // max(total, 1)
        end = "\n" if done >= total else ""
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} {label}{end}")
        self.stream.flush()


def _end_of_day(day: date, zone: str) -> datetime:
    """One hour after `day` ends in `zone`, in UTC: when the hourly pass has certainly seen that day close."""
    midnight = datetime.combine(day + timedelta(days=1), time(0), tzinfo=ZoneInfo(zone))
    return (midnight + timedelta(hours=1)).astimezone(UTC)


def _dates(since: date, until: date) -> list[date]:
    return [since + timedelta(days=n) for n in range((until - since).days + 1)]


def _check_jobs_args(args: argparse.Namespace, zone: str, fail: Callable[[str], NoReturn]) -> None:
    """Refuse argument combinations that have no meaning; fill in backfill's default --until."""
    if args.job == "daily-summary":
        if args.user and args.date is None:
            fail("daily-summary: --user needs --date")
        if args.date and not args.user and args.now:
            fail("daily-summary: --date without --user runs the pass at the end of that date; leave out --now")
        if args.force and not args.user:
            fail("daily-summary: --force applies to one user's date (--date and --user)")
    if args.job == "backfill":
        args.until = args.until or (datetime.now(ZoneInfo(zone)).date() - timedelta(days=1))
        if args.until < args.since:
            fail(f"backfill: --since {args.since} is after --until {args.until}")


Progress = Callable[[int, int, str], None]  # (done, total, label)


async def refuse_if_active(ctx: AppContext, user_id: str, now: datetime | None) -> None:
    """Raise UserActive (saying what the job would wait for) when `user_id` was active in the last 10 minutes."""
    from agent_core.jobs.daily import ACTIVE_WINDOW_MS, DEFER_S, MAX_DEFERRALS, last_active
    from agent_core.memory.calendar import from_ms, to_ms

    at = now or datetime.now(UTC)
    active_at = await last_active(ctx.deps.memory_store, user_id, to_ms(at))
    if active_at is None:
        return
    quiet = from_ms(active_at + ACTIVE_WINDOW_MS).isoformat()
    raise UserActive(
        f"agent-core jobs: user {user_id!r} was active at {from_ms(active_at).isoformat()}, in the "
        f"{ACTIVE_WINDOW_MS // 60_000} minutes before {at.isoformat()}. A daily summary waits until its user has "
        f"been quiet that long (deferred {DEFER_S // 60} minutes at a time, up to {MAX_DEFERRALS} times), so "
        f"nothing was enqueued. Run it again after {quiet}, or add --force to summarise now with the messages so far."
    )


async def enqueue_daily_summaries(
    ctx: AppContext,
    user_id: str,
    dates: list[date],
    now: datetime | None = None,
    progress: Progress | None = None,
    *,
    force: bool = False,
) -> int:
    """Enqueue one DailySummaryJob per date for `user_id`, one at a time, waiting for each; returns the count.

    `force`: the jobs do not wait for an active user (they summarise the messages so far)."""
    from agent_core.domain.jobs import DailySummaryJob
    from agent_core.jobs.daily import forced
    from agent_core.memory.calendar import to_ms

    now_ms = to_ms(now) if now is not None else None
    for done, day in enumerate(dates, start=1):
        job = DailySummaryJob(user_id=user_id, date=day.isoformat(), now_ms=now_ms)
        await ctx.deps.work_queue.enqueue(forced(job) if force else job)
        await ctx.background.join()
        if progress is not None:
            progress(done, len(dates), day.isoformat())
    return len(dates)


async def _jobs(args: argparse.Namespace, build: ContextBuilder | None) -> dict[str, Any]:
    from agent_core.context import build_context
    from agent_core.runtime.agents import AgentDefinitionError

    settings = get_settings()
    try:
        ctx = (build or build_context)(settings)
    except AgentDefinitionError as error:
        raise SystemExit(f"agent-core: invalid agent definition: {error}") from error
    line: dict[str, Any]
    if getattr(args, "user", None) and not args.force:
        await refuse_if_active(ctx, args.user, getattr(args, "now", None))
    if args.job == "backfill":
        dates = _dates(args.since, args.until)
        progress = ProgressBar(sys.stderr)
        count = await enqueue_daily_summaries(ctx, args.user, dates, progress=progress, force=args.force)
        line = {"job": "backfill", "user": args.user, "since": str(args.since), "until": str(args.until)}
        line["enqueued"] = count
    elif args.job == "daily-summary" and args.user:
        count = await enqueue_daily_summaries(ctx, args.user, [args.date], args.now, force=args.force)
        line = {"job": "daily_summary", "user": args.user, "date": args.date.isoformat(), "enqueued": count}
    else:
        name: ScheduledJob = "idle_sessions" if args.job == "idle-sessions" else "daily_summary"
        day = getattr(args, "date", None)
        now = _end_of_day(day, settings.default_timezone) if day else (args.now or datetime.now(UTC))
        report = await ctx.run_scheduled(name, now)
        line = {"job": name, "now": now.isoformat(), "report": asdict(report)}
    line["completed"], line["failed"] = ctx.background.completed, ctx.background.failed
    return line


@contextmanager
def _logs_to_stderr(quiet: bool) -> Iterator[None]:
    """Standard output carries only the report line: the JSON logs go to standard error meanwhile.

    `quiet` (under a progress bar) keeps only warnings and errors, so the bar stays readable.
    """
    from agent_core.observability import logger

    handler = logger.registered_handler
    stream = handler if isinstance(handler, logging.StreamHandler) else None
    level = logger.log_level
    previous = stream.setStream(sys.stderr) if stream is not None else None
    if quiet:
        logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)
        if stream is not None and previous is not None:  # None when it already was standard error
            stream.setStream(previous)


# Storage that lives and dies with the process that opened it: a new command starts with it empty.
# (`embedded` is a database on disk, shared with the local server.)
PROCESS_LOCAL_STORAGE = frozenset({"memory"})


def _process_local_storage_problem(settings: Settings) -> str | None:
    """`jobs` on a store only this command can see would scan nothing and report `scanned: 0`: say why not."""
    storage = settings.effective_storage
    if storage not in PROCESS_LOCAL_STORAGE:
        return None
    return (
        f"agent-core jobs: AGENT_STORAGE={storage} keeps its data inside the process that opened it, so this "
        "command would start with an empty store of its own. Run the jobs inside the running server instead "
        "(curl -X POST http://127.0.0.1:8000/api/dev/jobs/idle-sessions, then .../daily-summary), or set "
        "AGENT_STORAGE=embedded (the local server's database, the default) or AGENT_STORAGE=aws (a DynamoDB table)."
    )


def _note_a_new_database(settings: Settings) -> None:
    """Say so when the embedded database does not exist yet: the pass would report `scanned: 0` over an empty
    one it creates, which reads as "nothing was due" when the command ran from another directory."""
    if settings.effective_storage != "embedded":
        return
    from agent_core.store.embedded import DATABASE_FILE

    directory = Path(settings.data_dir).expanduser().resolve()
    if not (directory / DATABASE_FILE).exists():
        print(
            f"agent-core jobs: no database in {directory} yet: this pass starts an empty one. The local server "
            "keeps its data in .agent-core under the directory it was started from (or AGENT_DATA_DIR).",
            file=sys.stderr,
            flush=True,
        )


def _unreachable_table_problem(settings: Settings, error: Exception, command: str = "jobs") -> str | None:
    """`jobs` or `serve` on a DynamoDB table it cannot read (no credentials, no endpoint, no table): one line,
    not a botocore (or uvicorn start-up) traceback. None for any other failure."""
    if settings.effective_storage != "aws":
        return None
    from botocore.exceptions import BotoCoreError, ClientError

    from agent_core.errors import ServiceUnavailable

    if not isinstance(error, BotoCoreError | ClientError | ServiceUnavailable):
        return None
    return (
        f"agent-core {command}: AGENT_STORAGE=aws: the table {settings.table_name} could not be read ({error}). "
        "Check the AWS credentials and region (the usual AWS_* variables or profile) and AGENT_TABLE_NAME, or "
        "leave AGENT_STORAGE unset for the local server's database."
    )


def run_jobs_command(
    args: argparse.Namespace, parser: argparse.ArgumentParser, build: ContextBuilder | None = None
) -> int:
    from pydantic import ValidationError

    try:
        get_settings()
    except ValidationError as error:
        raise SystemExit(invalid_configuration(error)) from None
    _check_jobs_args(args, get_settings().default_timezone, parser.error)
    problem = _process_local_storage_problem(get_settings())
    if problem is not None:
        print(problem, file=sys.stderr, flush=True)
        return 2
    _note_a_new_database(get_settings())
    try:
        with _logs_to_stderr(quiet=args.job == "backfill"):
            line = asyncio.run(_jobs(args, build))
    except UserActive as refused:
        print(refused, file=sys.stderr, flush=True)
        return USER_ACTIVE
    except Exception as error:
        problem = _unreachable_table_problem(get_settings(), error)
        if problem is None:
            raise
        print(problem, file=sys.stderr, flush=True)
        return 1
    print(json.dumps(line, separators=(", ", ": ")), flush=True)
    return 1 if line["failed"] else 0


def add_usage_commands(commands: Any) -> None:
    usage = commands.add_parser("usage", help="a user's usage ledger, budgets and what remains today (JSON)")
    usage.add_argument("--user", required=True, help="the user id")
    usage.add_argument("--from", dest="first", help="YYYY-MM-DD, the first local day (default: 6 days before --to)")
    usage.add_argument("--to", dest="last", help="YYYY-MM-DD, the last local day (default: today)")
    usage.add_argument("--timezone", help="the zone of the days (default: the user's profile, else the default)")
    limits = commands.add_parser(
        "limits", help="set a user's own budgets and rate limit (0: none; omitted: the settings)"
    )
    limits.add_argument("--user", required=True, help="the user id")
    limits.add_argument("--daily-tokens", type=int, help="tokens per local day")
    limits.add_argument("--daily-cost-usd", type=float, help="estimated USD per local day")
    limits.add_argument("--requests-per-minute", type=int, help="turns started per minute")


def run_usage_command(args: argparse.Namespace) -> int:
    """`usage` and `limits`, on the configured storage (the local server's database, or the DynamoDB table)."""
    from agent_core.context import build_table
    from agent_core.errors import AgentError
    from agent_core.memory.calendar import zone
    from agent_core.usage.meter import UsageMeter
    from agent_core.usage.prices import MICROS_PER_USD
    from agent_core.usage.report import usage_report

    settings = get_settings()
    if settings.effective_storage in PROCESS_LOCAL_STORAGE:
        print("agent-core usage: AGENT_STORAGE=memory has no data outside its process", file=sys.stderr)
        return 2
    meter = UsageMeter(build_table(settings), settings)

    async def act() -> dict[str, Any]:
        if args.command == "limits":
            overrides = {
                "dailyTokens": args.daily_tokens,
                "dailyCostMicros": None if args.daily_cost_usd is None else round(args.daily_cost_usd * MICROS_PER_USD),
                "requestsPerMinute": args.requests_per_minute,
            }
            await meter.limits.put(args.user, {k: v for k, v in overrides.items() if v is not None})
        named = getattr(args, "timezone", None)
        if named is None:
            from agent_core.store.items import profile_key

            profile = await meter.limits.table.get(profile_key(args.user))
            named = str(profile["timezone"]) if profile and profile.get("timezone") else None
        tz = zone(named, settings.default_timezone)
        first, last = getattr(args, "first", None), getattr(args, "last", None)
        return await usage_report(meter, args.user, first, last, tz, datetime.now(UTC))

    try:
        report = asyncio.run(act())
    except AgentError as error:
        print(f"agent-core {args.command}: {error.message}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2), flush=True)
    return 0


def main(argv: list[str] | None = None, *, build: ContextBuilder | None = None) -> int:
    """The command line; `build` makes the `jobs` commands' context from Settings (default: `build_context`;
    tests give their own job handlers or scheduled passes through it)."""
    parser = argparse.ArgumentParser(prog="agent-core", description="Serverless LLM agent backend, run locally.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_cmd = commands.add_parser("serve", help="start the local server with embedded storage")
    serve_cmd.add_argument("--host", default="127.0.0.1")
    serve_cmd.add_argument("--port", type=int, default=8000)
    chat_cmd = commands.add_parser("chat", help="chat in the terminal with a running server (local or deployed)")
    chat_cmd.add_argument("--url", default="http://127.0.0.1:8000", help="the server (default: %(default)s)")
    chat_cmd.add_argument("--token", help="sent as Authorization: Bearer (locally: the user name; deployed: a JWT)")
    chat_cmd.add_argument("--agent", help="the agent to talk to (default: the server's)")
    chat_cmd.add_argument("--chat", help="open this chat first")
    jobs_cmd = commands.add_parser("jobs", help="run the scheduled jobs or enqueue daily summaries, then wait")
    add_jobs_commands(jobs_cmd)
    add_usage_commands(commands)
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve(args.host, args.port)
    elif args.command == "chat":
        from agent_core.chat_client import run_chat

        return run_chat(args.url, args.token, args.agent, args.chat, sys.stdout)
    elif args.command == "jobs":
        return run_jobs_command(args, jobs_cmd, build)
    elif args.command in ("usage", "limits"):
        return run_usage_command(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
