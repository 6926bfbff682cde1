"""The deployed-emulation harness: every function run as Lambda runs it, from the stack's own artifacts.

`build` makes the inputs (the Python 3.12 runtime with awslambdaric and boto3, the synthesized template and
its assets: the function code and the layer); `template` resolves the template's intrinsics to local
resources; `aws` runs the standalone moto server (IAM enforced) and creates the template's resources and
roles; `recorder` records every call through the proxy in front of it; `runtime_api` is the Lambda Runtime
API; `web_adapter` emulates the Lambda Web Adapter; `functions` starts a function process; `gateway` is what
each front door makes of a result; `stack` puts it all together.
"""
