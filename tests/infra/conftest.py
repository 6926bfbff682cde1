"""Infra tests: jsii runs on the machine's Node 20, which only warns; keep the output clean."""

import os

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
