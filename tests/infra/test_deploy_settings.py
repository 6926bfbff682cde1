"""What an operator meets at deploy time: the Web Adapter layer version, the LLM key placeholder, the guide."""

from __future__ import annotations

import json

import pytest

from infra.components.functions import LWA_ACCOUNT, LWA_LAYER_NAME, REPO_ROOT
from infra.settings import LWA_1_0_LAYER_VERSION, LWA_LAYER_VERSION, InfraSettings, SettingsError
from infra.stack import LLM_KEY_PLACEHOLDER
from tests.infra.test_stack import PROD_IAM, Synth, _fn, _synth

DOCS = REPO_ROOT / "docs" / "infrastructure.md"


@pytest.fixture(scope="module")
def dev() -> Synth:
    return _synth()


@pytest.fixture(scope="module")
def prod_iam() -> Synth:
    return _synth(PROD_IAM)


# --- the Lambda Web Adapter layer -------------------------------------------------------------------


def test_the_adapter_layer_is_the_documented_1_0_release() -> None:
    """26 is the adapter's 1.0 layer (its README's version; 25 is 0.9.1); cdk.json pins the same."""
    assert LWA_LAYER_VERSION == LWA_1_0_LAYER_VERSION == 26
    assert InfraSettings().lwa_layer_version == LWA_LAYER_VERSION
    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    assert context["lwaLayerVersion"] == LWA_LAYER_VERSION


@pytest.mark.parametrize(
    ("variant", "layer"), [("dev", "LambdaAdapterLayerArm64"), ("prod_iam", "LambdaAdapterLayerX86")]
)
def test_the_stream_function_gets_the_pinned_adapter_layer(
    variant: str, layer: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(variant)
    arn = _fn(synth, "stream")[1]["Properties"]["Layers"][1]["Fn::Join"]
    assert arn[0] == ""
    text = "".join(part if isinstance(part, str) else "|" for part in arn[1])
    assert text == f"arn:|:lambda:|:{LWA_ACCOUNT}:layer:{layer}:{LWA_LAYER_VERSION}"
    assert {"Ref": "AWS::Partition"} in arn[1] and {"Ref": "AWS::Region"} in arn[1]


@pytest.mark.parametrize("version", [1, 17, 25, "25", 0, -3])
def test_adapter_releases_before_1_0_are_refused(version: object) -> None:
    with pytest.raises(SettingsError, match=r"lwaLayerVersion .* before 1\.0"):
        InfraSettings.from_mapping({"lwaLayerVersion": version})


@pytest.mark.parametrize("version", [26, "27", 30])
def test_adapter_layer_versions_from_1_0_on_are_accepted(version: object) -> None:
    assert InfraSettings.from_mapping({"lwaLayerVersion": version}).lwa_layer_version == int(str(version))


def test_the_guide_names_the_pinned_layer_and_how_to_check_it() -> None:
    docs = DOCS.read_text()
    for name in LWA_LAYER_NAME.values():
        assert f"{LWA_ACCOUNT}:layer:{name}:{LWA_LAYER_VERSION}" in docs
    assert "aws lambda get-layer-version-by-arn --arn" in docs


# --- the LLM key placeholder -------------------------------------------------------------------------


def _llm_secret(synth: Synth) -> dict[str, object]:
    secrets = synth.resources("AWS::SecretsManager::Secret")
    (props,) = [v["Properties"] for k, v in secrets.items() if k.startswith("LlmApiKey")]
    return props


def test_the_llm_key_placeholder_is_plain_text_and_says_what_it_is(dev: Synth) -> None:
    props = _llm_secret(dev)
    assert "GenerateSecretString" not in props  # a random value could start with "{" and read as JSON
    value = props["SecretString"]
    assert value == LLM_KEY_PLACEHOLDER
    assert isinstance(value, str) and not value.lstrip().startswith(("{", "[", '"'))
    with pytest.raises(ValueError):
        json.loads(value)
    assert "placeholder" in value


@pytest.mark.usefixtures("aws_env")
def test_the_app_reads_the_placeholder_as_the_plain_string_it_is(dev: Synth) -> None:
    """Through Secrets Manager (moto) and the app's own reader: the value, not a JSON parse error."""
    import boto3

    from agent_core.secrets import read_secret

    value = _llm_secret(dev)["SecretString"]
    boto3.client("secretsmanager", region_name="us-east-1").create_secret(Name="llm-key", SecretString=value)
    assert read_secret("llm-key") == LLM_KEY_PLACEHOLDER


def test_the_guide_documents_every_context_key() -> None:
    docs = DOCS.read_text()
    settings_table = docs[docs.index("## Settings (context)") : docs.index("## Authentication at the front doors")]
    missing = [key for key in InfraSettings.context_keys() if f"`{key}`" not in settings_table]
    assert not missing, f"docs/infrastructure.md 'Settings (context)' lacks {missing}"
