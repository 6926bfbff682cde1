"""The CDK app that deploys agent-core: settings, the function registry, constructs and the stack."""
