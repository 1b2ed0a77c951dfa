"""The public API is exactly what resumable/__init__.py lists in __all__."""

import resumable


def test_all_lists_exactly_the_public_names() -> None:
    public = {name for name in dir(resumable) if not name.startswith("_")}
    # submodules appear as attributes once imported; they are not API
    modules = {name for name in public if type(getattr(resumable, name)).__name__ == "module"}
    assert set(resumable.__all__) == public - modules


def test_every_exported_name_resolves() -> None:
    for name in resumable.__all__:
        assert getattr(resumable, name) is not None, name
