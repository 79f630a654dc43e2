"""docsgen/comments.py: the `#:` comments above a class's attributes, as the reference
pages take them."""

from __future__ import annotations

from enum import StrEnum

import pytest

from docsgen.comments import attribute_comments


class Kinds(StrEnum):
    #: the first,
    #: on two lines
    FIRST = "first"
    # an ordinary comment is not documentation
    SECOND = "second"
    #: the third
    THIRD = "third"


class Model:
    #: annotated
    value: int = 1
    bare: str = ""


def test_comments_of_enum_members_and_annotated_fields() -> None:
    assert attribute_comments(Kinds) == {"FIRST": "the first, on two lines", "THIRD": "the third"}
    assert attribute_comments(Model) == {"value": "annotated"}


def test_a_kind_without_a_comment_fails_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    from docsgen import audit_kinds

    monkeypatch.setattr(audit_kinds, "RecordKind", Kinds)
    with pytest.raises(ValueError, match=r"without a `#:` comment.*SECOND"):
        audit_kinds.meanings()
