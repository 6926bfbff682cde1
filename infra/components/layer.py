"""The agent-core layer: runtime dependencies + agent_core, bundled on this machine (no Docker)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.layer_build import LayerRecipe, build_layer
from infra.settings import InfraSettings

RUNTIMES = {"3.12": lambda_.Runtime.PYTHON_3_12, "3.13": lambda_.Runtime.PYTHON_3_13}
ARCHITECTURES = {"arm64": lambda_.Architecture.ARM_64, "x86_64": lambda_.Architecture.X86_64}
SHARED_DIR = Path(__file__).resolve().parents[2] / "shared"


@jsii.implements(cdk.ILocalBundling)
class LocalLayerBundler:
    """Builds the layer with pip's cross-platform wheel download instead of a Docker image."""

    def __init__(self, recipe: LayerRecipe) -> None:
        self.recipe = recipe

    def try_bundle(self, output_dir: str, *, image: Any = None, **_options: Any) -> bool:
        build_layer(Path(output_dir), self.recipe)
        return True


def runtime_for(settings: InfraSettings) -> lambda_.Runtime:
    return RUNTIMES[settings.python_runtime]


def architecture_for(settings: InfraSettings) -> lambda_.Architecture:
    return ARCHITECTURES[settings.architecture]


class AgentCoreLayer(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, settings: InfraSettings) -> None:
        super().__init__(scope, construct_id)
        recipe = LayerRecipe(settings.architecture, settings.python_runtime, settings.boto3_version)
        runtime = runtime_for(settings)
        code = lambda_.Code.from_asset(
            str(SHARED_DIR),
            # The content depends on more than shared/ (the dependency list, the platform): a custom hash
            # over all of it, so `cdk synth` rebuilds the layer only when one of them changes.
            asset_hash_type=cdk.AssetHashType.CUSTOM,
            asset_hash=recipe.fingerprint(),
            bundling=cdk.BundlingOptions(
                image=runtime.bundling_image,  # never pulled: the local bundler always succeeds
                local=LocalLayerBundler(recipe),
                output_type=cdk.BundlingOutput.NOT_ARCHIVED,
            ),
        )
        self.layer = lambda_.LayerVersion(
            self,
            "Layer",
            code=code,
            compatible_runtimes=[runtime],
            compatible_architectures=[architecture_for(settings)],
            description=f"agent_core + dependencies (python{settings.python_runtime}, {settings.architecture})",
        )
