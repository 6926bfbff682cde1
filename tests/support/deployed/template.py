"""CloudFormation intrinsics resolved against local resources: Ref, Fn::GetAtt, Fn::Join, Fn::Select, Fn::Split.

`Resolver` holds what each logical id became locally (a table name, a queue URL, a secret ARN, ...) as
CloudFormation would report it; anything it cannot resolve raises `Unresolved`, so a template that gains a
new kind of reference fails loudly instead of reaching a function as garbage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ACCOUNT = "123456789012"
REGION = "us-east-1"
PARTITION = "aws"


class Unresolved(KeyError):
    """The template refers to something the local account does not hold."""


@dataclass
class Resolver:
    stack_name: str
    refs: dict[str, str] = field(default_factory=dict)  # logical id -> what `Ref` returns
    attributes: dict[tuple[str, str], str] = field(default_factory=dict)  # (logical id, attribute) -> value

    def pseudo(self, name: str) -> str:
        values = {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::Partition": PARTITION,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": self.stack_name,
        }
        if name not in values:
            raise Unresolved(name)
        return values[name]

    def resolve(self, value: Any) -> Any:
        """The value with every supported intrinsic replaced by its local result."""
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                if arg.startswith("AWS::"):
                    return self.pseudo(arg)
                if arg not in self.refs:
                    raise Unresolved(f"Ref {arg}")
                return self.refs[arg]
            if key == "Fn::GetAtt":
                logical, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
                if (logical, attribute) not in self.attributes:
                    raise Unresolved(f"Fn::GetAtt {logical}.{attribute}")
                return self.attributes[(logical, attribute)]
            if key == "Fn::Join":
                separator, parts = arg
                return separator.join(str(p) for p in self.resolve(parts))
            if key == "Fn::Select":
                index, items = arg
                return self.resolve(items)[int(self.resolve(index))]
            if key == "Fn::Split":
                separator, text = arg
                return str(self.resolve(text)).split(separator)
            if key.startswith("Fn::") or key == "Condition":
                raise Unresolved(key)
        return {k: self.resolve(v) for k, v in value.items()}
