"""The built layer carries what Lambda runs: no local-only module, and every function starts from it."""

from __future__ import annotations

from tests.infra.test_layer_content import LOCAL_ONLY_MODULES, agent_core_modules
from tests.support.deployed.functions import function_definitions
from tests.support.deployed.stack import DeployedStack


def test_every_function_starts_from_the_built_layer_which_lacks_the_local_only_modules(stack: DeployedStack) -> None:
    (layer,) = stack.synthesis.resources("AWS::Lambda::LayerVersion")
    site = stack.synthesis.asset_path(layer) / "python"
    modules = agent_core_modules(site)
    assert {"agent_core.lambda_entry", "agent_core.context", "agent_core.api.routes.playground"} <= modules
    assert modules & LOCAL_ONLY_MODULES == set()
    assert (site / "agent_core" / "api" / "static" / "playground.html").is_file()
    names = sorted(function_definitions(stack.synthesis))
    assert len(names) >= 7
    for name in names:
        process = stack.function(name)  # started once: its init ran the entry module from this layer
        assert site in process.layer_dirs
