"""A mypy plugin: `.get` of a key a TypedDict does not have is an error, as `[]` is.

mypy checks `record["outcom"]` against the TypedDict but lets `record.get("outcom")` pass
as `object`. Readers of the audit log use `.get` for the fields an old or odd record may
lack, so without this a misspelt field in a reader would go unnoticed, while the same
misspelling in a writer is an error; in a hash-chained log a wrong key is permanent. On a
union of TypedDicts every member must have the key (narrow to the kind that has it first).
The type of the result is mypy's own.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.errorcodes import TYPEDDICT_ITEM
from mypy.plugin import MethodContext, Plugin
from mypy.plugins.default import typed_dict_get_callback
from mypy.typeops import try_getting_str_literals
from mypy.types import Type, TypedDictType, get_proper_type


def checked_get(ctx: MethodContext) -> Type:
    owner = get_proper_type(ctx.type)
    if isinstance(owner, TypedDictType) and ctx.args and len(ctx.args[0]) == 1:
        keys = try_getting_str_literals(ctx.args[0][0], ctx.arg_types[0][0]) or []
        for key in keys:
            if key not in owner.items:
                name = owner.fallback.type.name
                ctx.api.fail(
                    f'TypedDict "{name}" has no key "{key}"', ctx.context, code=TYPEDDICT_ITEM
                )
    return typed_dict_get_callback(ctx)


class TypedDictKeys(Plugin):
    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        return checked_get if fullname == "typing.Mapping.get" else None


def plugin(_version: str) -> type[Plugin]:
    return TypedDictKeys
