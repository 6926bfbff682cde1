"""The CDK app (cdk.json: `.venv/bin/python -m infra.app`): one stack, AgentCore-<stage>.

Environment-agnostic: no account or region is looked up at synth time, so `cdk synth` needs no AWS
credentials; `cdk deploy` deploys into the account and region of the caller's credentials.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for path in (REPO_ROOT, REPO_ROOT / "shared"):  # `python infra/app.py` works as well as `-m infra.app`
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")  # Node 20 works; jsii only warns

import aws_cdk as cdk  # noqa: E402

from infra.nag import add_checks  # noqa: E402
from infra.settings import InfraSettings, SettingsError  # noqa: E402
from infra.stack import AgentCoreStack  # noqa: E402


def build_app(app: cdk.App | None = None, *, nag: bool = True) -> tuple[cdk.App, AgentCoreStack]:
    app = app or cdk.App()
    settings = InfraSettings.from_context(app.node)
    stack = AgentCoreStack(
        app,
        settings.stack_name,
        settings=settings,
        description=f"agent-core serverless LLM agent backend ({settings.stage})",
    )
    if nag:
        add_checks(app)
    return app, stack


def main() -> int:
    try:
        app, _ = build_app()
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
