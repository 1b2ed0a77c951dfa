"""The program's functions and their code in a checkpoint: pickled in few objects.

A namespace is pickled again at every statement boundary, the program's functions and classes
with it, and the pickler asks ``persistent_id`` (Python) about every object it saves, a dict's
key strings included. cloudpickle saves a code object field by field (some sixty objects for a
small function) and a function's attributes as a dict: for a program of a few helpers that was
most of a capture. Here a code object is the bytes the interpreter writes to a ``.pyc``
(``marshal``) and a function's fields are two flat tuples. The helpers below are named in
checkpoints: they keep their names and this module its path (or :mod:`.moved` says where they
went).
"""

from __future__ import annotations

import importlib.util
import marshal
import types
from collections.abc import Mapping
from typing import Any, Final

from cloudpickle import cloudpickle as _cp

from resumable.errors import RecordError, RecordVersionError

_MAGIC: Final = importlib.util.MAGIC_NUMBER
"""The bytecode version of this Python, as a ``.pyc`` starts with it: before each code object."""
_CODE_FILENAME: Final = 10
"""Where ``co_filename`` stands among ``types.CodeType``'s arguments (3.11 to 3.13)."""


# -- helpers named in pickles ----------------------------------------------------------------
def _load_code(data: bytes) -> types.CodeType:
    if data[: len(_MAGIC)] != _MAGIC:
        raise RecordVersionError(
            "the checkpoint holds the program's code compiled by another Python version "
            f"(bytecode {data[:2].hex()}, this Python's {_MAGIC[:2].hex()}); resume the run "
            "with the Python version that started it"
        )
    code = marshal.loads(data[len(_MAGIC) :])
    if type(code) is not types.CodeType:  # what code_reduce wrote is always one
        raise RecordError("a checkpoint's code object does not load as one")
    return code


def _make_program_function(
    code: types.CodeType, globals_: dict[str, Any], closure: Any, name: str, qualname: str
) -> types.FunctionType:
    func = types.FunctionType(code, globals_, name, None, closure)
    func.__qualname__ = qualname
    return func


def _fill_program_function(func: Any, state: tuple[Any, ...]) -> None:
    """What may refer back to the function (a default, its doc, an attribute may be the
    function itself), set once it exists."""
    defaults, kwdefaults, annotations, module, doc, attrs = state[:6]
    func.__defaults__, func.__kwdefaults__, func.__annotations__ = defaults, kwdefaults, annotations
    func.__module__, func.__doc__ = module, doc
    if attrs:
        func.__dict__.update(attrs)
    if len(state) > 6:
        func.__type_params__ = state[6]


# -- reducers ----------------------------------------------------------------------------------
def code_reduce(code: types.CodeType) -> tuple[Any, ...]:
    """A code object as one bytes object, its ``marshal`` form.

    ``marshal`` keeps every field, ``co_filename`` included: a restored function is still the
    program's (its awaits are not taken for foreign ones on replay) and its tracebacks name its
    file. Bytecode is the Python version's: the bytes start with its magic number, as a
    ``.pyc`` does, and another version refuses them by name rather than run them. A code object
    ``marshal`` refuses (a constant put there by ``code.replace``) is pickled as cloudpickle
    does, keeping ``co_filename`` (cloudpickle 3.1.2 and later write ``<dynamic-code>``).
    """
    try:
        return (_load_code, (_MAGIC + marshal.dumps(code),))
    except ValueError:
        constructor, args = _cp._code_reduce(code)
        args = list(args)
        args[_CODE_FILENAME] = "".join(code.co_filename)  # un-interned: reproducible pickles
        return (constructor, tuple(args))


def program_function_reduce(func: types.FunctionType, ns: Mapping[str, Any]) -> tuple[Any, ...]:
    """A function whose globals are the program's namespace ``ns`` (a persistent id). What
    cannot refer back to it goes in its arguments; the rest is set once it exists (a default
    may hold the function itself)."""
    name = "".join(func.__name__)  # un-interned, so pickles are reproducible
    qualname = "".join(func.__qualname__)
    state: tuple[Any, ...] = (
        func.__defaults__,
        func.__kwdefaults__,
        func.__annotations__,
        func.__module__,
        func.__doc__,
        func.__dict__ or None,
    )
    if getattr(func, "__type_params__", ()):
        state = (*state, func.__type_params__)  # type: ignore[attr-defined]
    args = (func.__code__, ns, func.__closure__, name, qualname)
    return (_make_program_function, args, state, None, None, _fill_program_function)
