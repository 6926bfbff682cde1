"""The deployed-emulation harness: every function run as Lambda runs it, from the stack's own artifacts.

`build` makes the inputs (the Python 3.12 runtime with awslambdaric and boto3, the synthesized template and its
assets: the function code and the layer), `template` resolves the template's intrinsics to local resources,
`aws` runs the standalone moto server (IAM enforced) behind a recording proxy, `runtime_api` is the Lambda
Runtime API, `web_adapter` emulates the Lambda Web Adapter, and `functions` starts a function process.
"""
