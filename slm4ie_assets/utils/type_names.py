"""A value's type as messages name it, with the right article ("an int", "a str", "a dict").

Messages about input values of the wrong type (a token's form that is a number, a text that is a
list) are read by people fixing their data; "is a int" reads as a bug in the tool."""


def a_type_name(value: object) -> str:
    """'an int', 'a str': the article goes by the first letter of the type's name, which is right
    for every type a JSON or Arrow value has here (int, str, float, bool, list, dict, NoneType)."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"
