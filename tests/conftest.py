"""Fixtures for every test, registered as plugins (see each module): no test module imports a fixture."""

pytest_plugins = [
    "tests.support.fixtures",
    "tests.support.responses_app",
    "tests.support.function_env",
]
