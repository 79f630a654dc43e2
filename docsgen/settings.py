"""docs/reference/settings.md: every worker setting with its type, default, environment
variable and meaning, from the pydantic models the worker validates its settings with."""

from __future__ import annotations

import enum
import json
import re
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from cloudrunner.settings import ENV_KEYS, Settings
from docsgen.comments import attribute_comments
from docsgen.markdown import GENERATED_NOTE, code

_SIMPLE = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
           "Path": "path", "PosixPath": "path"}  # fmt: skip
_QUALIFIED = re.compile(r"\b(?:[a-z_][a-z0-9_]*\.)+([A-Za-z_][A-Za-z0-9_]*)")


def _type_name(annotation: Any) -> str:
    if annotation is None:
        return "none"
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " or ".join(json.dumps(a) for a in typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, enum.StrEnum):
        return " or ".join(json.dumps(member.value) for member in annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return " or ".join(_type_name(a) for a in rest) + " (optional)"
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin in (list, tuple, set, frozenset):
        inner = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return "list of " + (_type_name(inner[0]) if inner else "values")
    if origin is dict:
        key, value = typing.get_args(annotation) or (str, object)
        return f"table of {_type_name(key)} to {_type_name(value)}"
    if isinstance(annotation, type) and origin is None:
        return _SIMPLE.get(annotation.__name__, annotation.__name__)
    text = str(annotation).replace("typing.", "").replace("pathlib.", "")
    return _QUALIFIED.sub(r"\1", text).replace("PosixPath", "Path").replace("NoneType", "none")


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value: Any = info.default_factory()  # type: ignore[call-arg]
    else:
        value = info.default
    if isinstance(value, BaseModel):
        return ""
    if value is None:
        return "unset"
    if isinstance(value, dict | list | tuple) and not value:
        return "empty"
    if isinstance(value, list | tuple):
        return code(json.dumps(list(value)))
    if isinstance(value, str) and value == "":
        return 'empty (`""`)'
    return code(value if not isinstance(value, bool) else str(value).lower())


def _rows(model: type[BaseModel], prefix: str) -> list[tuple[str, list[Key]]]:
    """(table name, keys) for this model and, after it, each nested model."""
    env_of = {dotted: name for name, dotted in ENV_KEYS.items()}
    keys: list[Key] = []
    nested: list[tuple[str, list[Key]]] = []
    comments: dict[str, str] = {}  # for models that document fields with `#:` comments
    for base in reversed(model.__mro__):
        if issubclass(base, BaseModel) and base.__module__.startswith("cloudrunner."):
            comments.update(attribute_comments(base))
    for name, info in model.model_fields.items():
        dotted = f"{prefix}{name}"
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            nested += _rows(annotation, f"{dotted}.")
            continue
        keys.append(
            Key(
                dotted,
                _type_name(annotation),
                _default(info),
                env_of.get(dotted),
                info.description or comments.get(name, ""),
                _example(dotted, annotation),
            )
        )
    return [(prefix.rstrip(".") or "top level", keys), *nested]


class Key(typing.NamedTuple):
    dotted: str
    type: str
    default: str
    env: str | None
    meaning: str
    example: str


#: example values for settings that are unset by default, by the type's name
_PLACEHOLDERS: dict[str, Any] = {
    "path": "/etc/cloudrunner/example",
    "string": "example",
    "integer": 1,
    "number": 1.5,
    "boolean": True,
}


#: example values for keys whose values have a shape of their own (by key, or its last part)
_EXAMPLES: dict[str, Any] = {
    "sources.project_digests": ["sha256:" + "0" * 64],
    "egress.sandbox_subnets": "172.30.0.0/16",
    "sources.project_digest_paths": ["tools/hooks/**"],
    "domains": ["api.example.com"],
    "addresses": ["192.0.2.10"],
    "methods": ["POST"],
    "hook_env.enterprise": ["CI", "DEPLOY_*"],
    "hook_env.team": ["CI", "DEPLOY_*"],
    "hook_env.project": ["CI", "DEPLOY_*"],
    "hook_env.user": ["CI", "DEPLOY_*"],
    # empty by default (off), which says nothing about what to write
    "telemetry.otlp_endpoint": "http://127.0.0.1:4318",
}


def _example(dotted: str, annotation: Any) -> str:
    """The key as it is written in a settings file: its default, or a value of its type
    when it has none (the file is TOML, so a reader can copy it)."""
    import tomli_w

    value: Any = Settings().model_dump(mode="json")
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    simple = _type_name(annotation).removesuffix(" (optional)")
    if value == [] and simple.startswith("list of"):  # an empty default: show one item
        value = None
    if value is None or (value == "" and dotted in _EXAMPLES):
        value = _EXAMPLES.get(dotted, _EXAMPLES.get(dotted.rsplit(".", 1)[-1]))
    if value is None:
        if simple.startswith('"'):
            value = json.loads(simple.split(" or ")[0])
        elif simple.startswith("list of"):
            value = [_PLACEHOLDERS.get(simple.removeprefix("list of "), "example")]
        else:
            value = _PLACEHOLDERS.get(simple, "example")
    *tables, key = dotted.split(".")
    document: dict[str, Any] = {key: value}
    for table_name in reversed(tables):
        document = {table_name: document}
    return tomli_w.dumps(document).strip()


def _key_section(key: Key) -> list[str]:
    facts = [f"type: {key.type}", f"default: {key.default or 'its table'}"]
    if key.env:
        facts.append(f"variable: {code(key.env)}")
    return [
        f"### {code(key.dotted)} {{#{key.dotted.replace('.', '-').replace('_', '-')}}}",
        "",
        key.meaning or "-",
        "",
        "; ".join(facts) + ".",
        "",
        "```toml",
        key.example,
        "```",
        "",
    ]


def render() -> str:
    out = [
        "# Settings",
        "",
        GENERATED_NOTE,
        "The worker reads its settings from defaults, then a TOML file (`--config FILE`, else",
        "`$CLOUDRUNNER_CONFIG`, else `/etc/cloudrunner/config.toml` when present), then",
        "`CLOUDRUNNER_*` environment variables, then command-line flags; each layer overrides",
        "the one before key by key. A misspelt key or a wrong type is an error naming the",
        "file or variable and the key. `cloudrunner config init` writes a commented default",
        "file; `cloudrunner config show` prints the effective settings.",
        "",
        "Sizes take a byte count or a number with a unit (`512MiB`, `64m`, `1g`; binary units).",
        "",
        "Paths: a relative path in a settings file is relative to the directory of that file,",
        "never to the directory the process starts in; a path given by a variable or a flag",
        "must be absolute (a relative one is refused, naming the variable and the key). The",
        "enterprise and team hooks paths must lie outside the workspace.",
        "",
    ]
    for title, keys in _rows(Settings, ""):
        heading = "Top-level keys" if title == "top level" else f"`[{title}]`"
        out += [f"## {heading}", ""]
        for key in keys:
            out += _key_section(key)
    return "\n".join(out).rstrip() + "\n"
