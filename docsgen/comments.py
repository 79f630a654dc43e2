"""The `#:` comments right above a class's attributes (the convention the code uses for
enum members and model fields), read from the class's source: a reference page can then say
what the code says, in the code's words."""

from __future__ import annotations

import ast
import inspect
import textwrap


def attribute_comments(cls: type) -> dict[str, str]:
    """Attribute name -> its `#:` comment lines joined (attributes without one are left out)."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    found: dict[str, str] = {}
    for node in body.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name = node.target.id
        else:
            continue
        comment: list[str] = []
        row = node.lineno - 2
        while row >= 0 and lines[row].strip().startswith("#:"):
            comment.insert(0, lines[row].strip()[2:].strip())
            row -= 1
        if comment:
            found[name] = " ".join(comment)
    return found
